#pragma once
// The one compatibility header for Catch2 v2 (Debian 12) and v3 (Debian 13,
// Ubuntu 24.04): the tests include this, never Catch2 directly, and use the
// names below the same way under both.
#if AIR_CATCH_V3
#include <catch2/catch_all.hpp>
// v3 moved Approx into the Catch namespace; v2 exports it at global scope.
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
