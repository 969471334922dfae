// svd_smem_kernel's V by a log of rotations (kLogV): float64 whole matrices whose V does not fit
// beside A in one block's shared memory (the planner takes it where A's rows fit the register steps:
// about 120 to 128 columns, planner.cpp). A alone stays in shared memory and its steps run as without
// V; each step's rotations are logged to global memory (a slot per pair or lane group: s = 0 where
// it did not rotate), and after each sweep the block applies the sweep's log to V, held in global
// memory, a few rows at a time staged in shared memory with a few steps of the log
// (SmemLaunch::log_rows, log_steps). On the register steps the log is by default a ring of a few sweeps
// that log_v_apply.cu applies after this kernel (EngineArgs::vlog_nrec; stop 91), this block applying a
// sweep itself only where the ring fills. Within a step the pairs are disjoint, so a warp owns a row of V
// and its lanes share the step's slots; a row's steps are ordered by __syncwarp alone. This is the
// split of V's accumulation from A's sweeps of issue 20 (the W-cycle paper's §IV-B update, applied
// per sweep rather than per block pair), in place of block pairs (a 128-column float64 matrix: 8
// blocks of 16 columns, 7 round-robin steps of 4 pair tasks a sweep). H200, stop 80, float64
// 200 x 128² (svd's Jacobi on the start's X): that Jacobi 1.95 ms by block pairs, 1.82 by the log,
// 0.77 without V; the log's passes cost about what the sweeps do, room left there.
//
// The pass's shared-memory traffic: a row's rotations of a step move 32 bytes a slot (the halving
// order's slots meet consecutive columns, so without bank conflicts), and the step's entries nearly as
// much again where a warp has one row; so a warp takes several rows (SmemLaunch::log_rows over the
// warps) and each lane loads its entries once for all of them, from arrays of s, tau and (i, j)
// (H200, stop 81: float64 200 x 128² svd 4.48 -> 4.32 ms, the kernel 1.52 ms).
//
// Not a standalone header: pasted by the preprocessor into svd_smem_kernel's body
// (svd_smem_kernel.cuh), before kernel_register_steps.cuh, whose steps log through log_put.

  // The log's record of this sweep's current step (register steps; the shared-memory steps use `step`).
  int lrec = 0;
  // Deferred (args.vlog_nrec, the register steps): the log is a ring of whole sweeps' records, lring of
  // them (a multiple of a sweep's lsweep records), lpending of them from record lhead not yet applied to
  // V; where the ring is full the oldest sweep is applied here, and log_v_apply.cu applies the rest after
  // the kernel. V = I is written only before the first sweep applied here (vinit; else that kernel starts
  // from I itself).
  int lpending = 0, lhead = 0, lsweep = 0, lring = 0;
  bool vinit = false;
  if constexpr (kLogV) {
    if (args.vlog_nrec) {
      const HalvingOrder lorder{c, (c + 1) / 2};  // (levels_in_registers': the records of a sweep)
      for (int L = 0; L < lorder.levels(); ++L)
        lsweep += HalvingOrder::ceil_div(lorder.slots(L), G) * lorder.steps(L);
      lring = static_cast<int>(args.vlog_entries / (static_cast<int64_t>(lsweep) * G)) * lsweep;
      if (lring < lsweep) __trap();  // (the engine sizes the log for whole sweeps: log_v_deferred_sweeps)
    }
  }
  LogEntry<T>* const vlog =
      kLogV ? static_cast<LogEntry<T>*>(args.vlog) + static_cast<int64_t>(blockIdx.x) * args.vlog_entries : nullptr;
  // V's staged rows (row-major, stride q + 1) and the log's staged steps, after rank_s (svd_smem.cu's sizes).
  const int vld = c + 1;
  const int vrows_at_once = args.vlog_rows, steps_at_once = args.vlog_steps;
  T* const Vs = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(rank_s + c) + 15) & ~uintptr_t(15));
  // The staged steps' entries, as arrays of s, tau and (i, j) (apply_log; a LogEntry<T>'s bytes a slot).
  T* const Ls_s = reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(Vs + vrows_at_once * vld) + 15) & ~uintptr_t(15));
  auto log_put = [&](int idx, T s, T tau, int i, int j) {
    if constexpr (kLogV) {
      // (deferred: this sweep's records after the pending ones, in the ring; lpending = 0 otherwise)
      const int at = lhead + lpending < lring ? lhead + lpending : lhead + lpending - lring;
      vlog[static_cast<int64_t>(at) * G + idx] = LogEntry<T>{s, tau, i | (j << 16)};
    }
  };
  auto init_v = [&] {  // V = I
    T* Vg = args.V + md.v_off;
    for_each_column(c, c, [&](int l, int r) { Vg[static_cast<int64_t>(l) * c + r] = r == l ? T(1) : T(0); });
    vinit = true;
  };
  if constexpr (kLogV) {
    if (!args.vlog_nrec) init_v();  // (the block's barriers before the first sweep's end order it)
  }
  // Rows [r0, r0 + rows) of V (column l at l * c) to Vs and back: a warp per column, its lanes over the rows.
  auto stage_v_rows = [&](int r0, int rows, bool to_smem) {
    T* Vg = args.V + md.v_off;
    for_each_column(c, rows, [&](int l, int rr) {
      T& g = Vg[static_cast<int64_t>(l) * c + r0 + rr];
      if (to_smem) Vs[rr * vld + l] = g;
      else g = Vs[rr * vld + l];
    });
  };
  // V <- V J_1 ... J_n, the n = nrec steps of `slots` entries each from record `first`: warp w rotates the
  // staged rows w, w + nwarps, ..., each lane with its slots' entries, loaded once for the warp's rows.
  auto apply_log = [&](int first, int nrec, int slots) {
    // (whole warps only: a block of 600 threads ends in a partial warp, which must neither share a row
    // with warp 0 nor meet __syncwarp with lanes missing)
    const int warp = tid >> 5, wl = tid & 31, nwarps = nt >> 5;
    T* const Ls_tau = Ls_s + steps_at_once * slots;
    int* const Ls_ij = reinterpret_cast<int*>(Ls_tau + steps_at_once * slots);
    for (int r0 = 0; r0 < c; r0 += vrows_at_once) {
      const int rows = min(vrows_at_once, c - r0);
      stage_v_rows(r0, rows, true);
      for (int s0 = 0; s0 < nrec; s0 += steps_at_once) {
        const int ns = min(steps_at_once, nrec - s0);
        __syncthreads();  // V's rows staged; the previous steps' entries read
        for (int idx = tid; idx < ns * slots; idx += nt) {
          const LogEntry<T> le = vlog[static_cast<int64_t>(first + s0) * slots + idx];
          Ls_s[idx] = le.s;
          Ls_tau[idx] = le.tau;
          Ls_ij[idx] = le.ij;
        }
        __syncthreads();
        if (warp < nwarps && warp < rows) {
          for (int s = 0; s < ns; ++s) {
            for (int e = s * slots + wl; e < (s + 1) * slots; e += 32) {
              const T sn = Ls_s[e];
              if (sn == T(0)) continue;
              const T tau = Ls_tau[e];
              const int i = Ls_ij[e] & 0xffff, j = Ls_ij[e] >> 16;
              for (int rr = warp; rr < rows; rr += nwarps) rotate_pair(Vs[rr * vld + i], Vs[rr * vld + j], sn, tau);
            }
            __syncwarp();  // the next step's pairs meet columns this one's lanes wrote
          }
        }
      }
      __syncthreads();
      stage_v_rows(r0, rows, false);
      __syncthreads();  // written back before the next chunk is staged
    }
  };
  // The end: V's column l to column rank_s[l] (descending S), in place through the staged rows.
  auto write_v_by_rank = [&] {
    T* Vg = args.V + md.v_off;
    for (int r0 = 0; r0 < c; r0 += vrows_at_once) {
      const int rows = min(vrows_at_once, c - r0);
      stage_v_rows(r0, rows, true);
      __syncthreads();
      for_each_column(c, rows,
                      [&](int l, int rr) { Vg[static_cast<int64_t>(rank_s[l]) * c + r0 + rr] = Vs[rr * vld + l]; });
      __syncthreads();
    }
  };
