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

// An integer switch: the value of `name`, or `fallback` where it is not set.
inline int knob_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v ? std::atoi(v) : fallback;
}

}  // namespace cuda
}  // namespace jsvd
