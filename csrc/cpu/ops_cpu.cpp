// CPU kernels of the jsvd ops: the generic op layer driving the CPU engine.
#include <torch/library.h>

#include "../core.h"
#include "../svd_wrapper.h"
#include "batched_copy_cpu.h"

TORCH_LIBRARY_IMPL(jsvd, CPU, m) {
  jsvd::register_kernels<&jsvd::jacobi_svd_cpu, &jsvd::batched_copy_cpu>(m);
}
