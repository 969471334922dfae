// V by the log, applied after the sweeps' kernel (kernel_log_v.cuh, deferred): the whole-matrix kernel's
// register steps log a few sweeps' rotations and leave V to this kernel, which applies them to rows of V
// spread over blocks that fill every SM, then writes V's columns in descending S's order.
//
// Why a kernel of its own (docs/experiments/stops-89-93.md, stop 91): inside the sweeps' kernel the log's
// passes ran at its one block an SM (A's 128 KB at float64 128²: 200 matrices in two waves on 132 SMs)
// and at its 64 registers a thread, where holding each slot's own column in registers spilled (stop 81).
// Here rows are independent (V <- V J rotates columns), so a block takes 32 rows of one matrix, a warp 8,
// and each lane keeps, for the pass of a level (halving_order.h), its slots' own columns x of its rows in
// registers, as the register steps keep A's: a rotation then reads and writes only the partner y in
// shared memory, 16 bytes a row instead of 32. The records are walked in the kernel's own order
// (levels_in_registers), so x and y come from the order, not the entries; the rotations and their order
// are those of the in-kernel pass: V to the bit. The log is a ring of whole sweeps: where it fills, the
// kernel applies the oldest itself (V in global memory from then on), and this pass the rest, oldest
// first, from I where the kernel applied none.
#include "levels/smem/svd_smem.h"

#include "common/jacobi_device.cuh"
#include "levels/smem/halving_order.h"
#include "tuning_knobs.h"

#include <algorithm>

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

namespace jsvd {
namespace cuda {
namespace {

constexpr int kApplyWarps = 4, kApplyRowsPerWarp = 8;
constexpr int kApplyRows = kApplyWarps * kApplyRowsPerWarp;  // a block's rows of V
constexpr int kPrefetch = 8;

// Block t * chunks + chunk: matrix tasks[t]'s rows [32 chunk, 32 chunk + 32) of V (a matrix's chunks
// adjacent, so that they read its log while it is in L2). KS: slots a lane (G <= 32 KS).
template <typename T, int KS>
__global__ void __launch_bounds__(kApplyWarps * 32) log_v_apply_kernel(EngineArgs<T> args, const int32_t* tasks, int G,
                                                                      int chunks) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  constexpr int RR = kApplyRowsPerWarp;
  const int t = blockIdx.x / chunks, chunk = blockIdx.x - t * chunks;
  const int nrec = args.vlog_nrec[2 * t];
  if (nrec < 0) return;  // (a non-finite member: the kernel wrote V)
  const int head = args.vlog_nrec[2 * t + 1] >> 1;
  const bool in_global = (args.vlog_nrec[2 * t + 1] & 1) != 0;  // (else V = I: no sweep applied in the kernel)
  const MatrixDesc md = matrix_desc(args, list_at(tasks, t));
  const int c = md.q, vld = c + 1;
  const int r0 = chunk * kApplyRows, rows = min(kApplyRows, c - r0);
  T* const Vg = args.V + md.v_off;
  T* const Vs = reinterpret_cast<T*>(smem_raw);  // rows x c, row-major at stride c + 1; rows past `rows` zero
  for (int idx = threadIdx.x; idx < c * kApplyRows; idx += blockDim.x) {
    const int l = idx / kApplyRows, rr = idx - l * kApplyRows;
    Vs[rr * vld + l] = rr >= rows ? T(0) : in_global ? Vg[static_cast<int64_t>(l) * c + r0 + rr] : T(r0 + rr == l);
  }
  __syncthreads();
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  T* const Vw = Vs + warp * RR * vld;  // this warp's rows
  const LogEntry<T>* const vlog = static_cast<const LogEntry<T>*>(args.vlog) + static_cast<int64_t>(t) * args.vlog_entries;
  const HalvingOrder order{c, (c + 1) / 2};
  const int nlevels = order.levels();
  // The ring of whole sweeps (kernel_log_v.cuh): a sweep's records, and the ring's.
  int sweep_rec = 0;
  for (int L = 0; L < nlevels; ++L) sweep_rec += HalvingOrder::ceil_div(order.slots(L), G) * order.steps(L);
  const int ring = static_cast<int>(args.vlog_entries / (static_cast<int64_t>(sweep_rec) * G)) * sweep_rec;
  for (int done = 0; done < nrec; done += sweep_rec) {  // a sweep a round, oldest first
    int rec = head + done < ring ? head + done : head + done - ring;
    for (int L = 0; L < nlevels; ++L) {
      const int A = order.owners(L), nslots = order.slots(L), W = order.steps(L);
      for (int base = 0; base < nslots; base += G) {  // the kernel's passes of G groups
        // Slot base + g's own column x, and its partners y0 + (o + step) mod Ws below y0 + b
        // (levels_in_registers); b = 0: no pairs.
        int x[KS], y0[KS], b[KS], Ws[KS], jj[KS];
        T xr[KS][RR];
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          const int g = lane + 32 * ks, slot = base + g;
          x[ks] = y0[ks] = b[ks] = jj[ks] = 0;
          Ws[ks] = 1;
          if (g < G && slot < nslots) {
            const int ts = slot / A, o = slot - ts * A;
            int lo, mid, hi;
            order.segment(L, ts, lo, mid, hi);
            if (o < mid - lo && hi > mid) {
              x[ks] = lo + o;
              y0[ks] = mid;
              b[ks] = hi - mid;
              Ws[ks] = max(mid - lo, b[ks]);
              jj[ks] = o;
            }
          }
#pragma unroll
          for (int i = 0; i < RR; ++i) xr[ks][i] = Vw[i * vld + x[ks]];
        }
        // A step's entries are loaded a step ahead (their latency behind the rotations and the barrier).
        const LogEntry<T>* const lrec = vlog + static_cast<int64_t>(rec) * G + lane;
        auto load = [&](int step, int ks, T& sn, T& tau) {
          sn = tau = T(0);
          const int j = jj[ks] + step < Ws[ks] ? jj[ks] + step : jj[ks] + step - Ws[ks];  // (o + step) mod Ws
          if (lane + 32 * ks < G && step < Ws[ks] && j < b[ks]) {
            sn = __ldg(&lrec[static_cast<int64_t>(step) * G + 32 * ks].s);
            tau = __ldg(&lrec[static_cast<int64_t>(step) * G + 32 * ks].tau);
          }
        };
        T sn[KS], tau[KS];
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) load(0, ks, sn[ks], tau[ks]);
        for (int step = 0; step < W; ++step) {
          // (the entries kPrefetch steps on to L2: a step's own wait would be an L2 miss's latency)
          if (step + kPrefetch < W) {
#pragma unroll
            for (int ks = 0; ks < KS; ++ks)
              if (lane + 32 * ks < G)
                asm volatile("prefetch.global.L2 [%0];" ::"l"(&lrec[static_cast<int64_t>(step + kPrefetch) * G + 32 * ks]));
          }
          T sn_next[KS], tau_next[KS];
#pragma unroll
          for (int ks = 0; ks < KS; ++ks) load(step + 1, ks, sn_next[ks], tau_next[ks]);
#pragma unroll
          for (int ks = 0; ks < KS; ++ks) {
            if (sn[ks] != T(0)) {  // (zero also where the slot has no pair this step)
              const int j = jj[ks] + step < Ws[ks] ? jj[ks] + step : jj[ks] + step - Ws[ks];
              T* const y = Vw + y0[ks] + j;
#pragma unroll
              for (int i = 0; i < RR; ++i) rotate_pair(xr[ks][i], y[i * vld], sn[ks], tau[ks]);
            }
            sn[ks] = sn_next[ks];
            tau[ks] = tau_next[ks];
          }
          __syncwarp();  // the partners pass to the next owners
        }
        rec += W;
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
          if (b[ks] > 0) {
#pragma unroll
            for (int i = 0; i < RR; ++i) Vw[i * vld + x[ks]] = xr[ks][i];
          }
        }
        __syncwarp();  // the next level may pair x as a partner
      }
    }
  }
  __syncthreads();
  const int32_t* const rank = args.vlog_rank + static_cast<int64_t>(t) * c;
  for (int idx = threadIdx.x; idx < c * kApplyRows; idx += blockDim.x) {
    const int l = idx / kApplyRows, rr = idx - l * kApplyRows;
    if (rr < rows) Vg[static_cast<int64_t>(rank[l]) * c + r0 + rr] = Vs[rr * vld + l];
  }
}

template <typename T, int KS>
void launch_apply(const EngineArgs<T>& args, const int32_t* tasks, int ntasks, int cols, int groups, cudaStream_t stream) {
  const size_t smem = static_cast<size_t>(kApplyRows) * (cols + 1) * sizeof(T);
  auto kernel = log_v_apply_kernel<T, KS>;
  if (smem > 48 * 1024) C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
  const int chunks = (cols + kApplyRows - 1) / kApplyRows;
  kernel<<<ntasks * chunks, kApplyWarps * 32, smem, stream>>>(args, tasks, groups, chunks);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

int64_t log_v_deferred_sweeps(int64_t blocks, int64_t entries, size_t entry_bytes) {
  const int64_t most = knobs().log_defer;
  if (most <= 0) return 0;
  // The log's workspace kept under kLogDeferBytes (at least one sweep, which the kernel applies at once).
  const int64_t sweep_bytes = std::max<int64_t>(1, blocks * entries * static_cast<int64_t>(entry_bytes));
  return std::max<int64_t>(1, std::min<int64_t>(most, kLogDeferBytes / sweep_bytes));
}

template <typename T>
void launch_log_v_apply(const EngineArgs<T>& args, const int32_t* tasks, int ntasks, const SmemLaunch& cfg,
                        cudaStream_t stream) {
  const int cols = static_cast<int>(cfg.cols), groups = cfg.reg_threads / cfg.tpp;
  TORCH_CHECK(groups >= 1 && groups <= 128, "jsvd internal: the log's deferred pass takes 1 to 128 groups");
  if (groups <= 32) launch_apply<T, 1>(args, tasks, ntasks, cols, groups, stream);
  else if (groups <= 64) launch_apply<T, 2>(args, tasks, ntasks, cols, groups, stream);
  else launch_apply<T, 4>(args, tasks, ntasks, cols, groups, stream);
}

template void launch_log_v_apply<double>(const EngineArgs<double>&, const int32_t*, int, const SmemLaunch&, cudaStream_t);

}  // namespace cuda
}  // namespace jsvd
