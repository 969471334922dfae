// Environment switches for experiments (benchmarks/, scripts/ab_builds.sh):
// not part of the API. Each call site reads its switch once.
#pragma once

#include <cstdlib>

namespace jsvd {
namespace cuda {

// A feature switch that is on unless the variable `name` is set to 0.
inline bool knob_on(const char* name) {
  const char* v = std::getenv(name);
  return !(v && v[0] == '0');
}

}  // namespace cuda
}  // namespace jsvd
