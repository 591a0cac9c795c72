// Catch2 v2 needs a translation unit that defines main; v3 links Catch2WithMain.
#if !AIR_CATCH_V3
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
