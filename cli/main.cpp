#include "cli/app.hpp"

int main(int argc, char** argv) { return air::cli::run_main(argc, argv); }
