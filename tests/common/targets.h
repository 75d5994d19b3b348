// Runs a test body once per Highway target that is both compiled into libfusednorm.so and
// supported by this CPU (hwy::SetSupportedTargetsForTest reaches the library's dispatch, which
// lives in the shared libhwy).
#pragma once

#include <catch2/catch.hpp>

#include "fusednorm/fusednorm.h"
#include "hwy/targets.h"

namespace fusednorm {
namespace test {

template <class Body>
void for_each_target(Body&& body) {
  for (const int64_t target : hwy::SupportedAndGeneratedTargets()) {
    hwy::SetSupportedTargetsForTest(target);
    INFO("Highway target " << hwy::TargetName(target) << " (library reports " << fusednorm_cpu_target() << ")");
    REQUIRE(std::string(fusednorm_cpu_target()) == hwy::TargetName(target));
    body(target);
  }
  hwy::SetSupportedTargetsForTest(0);
}

}  // namespace test
}  // namespace fusednorm
