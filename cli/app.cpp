#include "cli/app.hpp"

namespace air::cli {
int run_main(int, char**) { return 0; }
} // namespace air::cli
