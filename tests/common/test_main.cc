// Catch2's main for every C++ test binary. Failures print Catch's --rng-seed; rerun a case with
// `./test_x "case name" --rng-seed N`.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
