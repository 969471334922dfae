// svd_smem_kernel's end: a block pair's rotated columns (and V's rows, or J / E applied) back to
// global memory; a whole matrix's S (descending), U, V and info.
//
// Not a standalone header: pasted by the preprocessor into svd_smem_kernel's body
// (svd_smem_kernel.cuh), where it defines lambdas over the kernel's locals. The
// kernel is one function so that ptxas allocates it as before the split (moving these
// into functions of their own changed the register allocation of most variants).

  if constexpr (kPair) {
    // Write the rotated pair (and its V columns) back.
    if (!applied) return;  // nothing moved
    if (tid == 0 && first_rotated) args.state[k].rotated = 1;
    T* Ab = args.A + md.a_off;
    if constexpr (sizeof(T) == sizeof(float)) {
      if (pair_quads) {
        auto put = [&](T* dst, const T* src) { *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src); };
        auto piece = [&](int l, int r) { put(Ab + static_cast<int64_t>(gcol(l)) * p + r, As + l * ld + r); };
        for_each_column<4, kDelta ? (kRegRows - 1) * 32 : 0>(c, p, piece);
        if constexpr (kWithV && !kCarryJ) {
          T* Vg = args.Vw + md.v_off;
          for_each_column<4>(c, vr,
                               [&](int l, int r) { put(Vg + static_cast<int64_t>(gcol(l)) * vr + r, As + l * ld + p + r); });
        }
        if constexpr (kDelta) update_v_by_delta();
        return;
      }
    }
    for_each_column(c, p, [&](int l, int r) { Ab[static_cast<int64_t>(gcol(l)) * p + r] = As[l * ld + r]; });
    if constexpr (kWithV && !kCarryJ) {
      T* Vg = args.Vw + md.v_off;
      for_each_column(c, vr,
                      [&](int l, int r) { Vg[static_cast<int64_t>(gcol(l)) * vr + r] = As[l * ld + p + r]; });
    }
    if constexpr (kDelta) {
      update_v_by_delta();
    } else if constexpr (kCarryJ) {
      // [V_i V_j] <- [V_i V_j] J. A's rows in shared memory are free now:
      // they stage V's rows (p >= q: one pass for the engine's tall matrices).
      __syncthreads();
      T* Vg = args.Vw + md.v_off;
      const int q = md.q;
      constexpr int kJ = 4;  // output columns per thread: each staged V entry is read once per kJ FMAs
      const int jgroups = (c + kJ - 1) / kJ;
      for (int r0 = 0; r0 < q; r0 += p) {
        const int rows = min(p, q - r0);
        for_each_column(c, rows,
                        [&](int l, int r) { copy_async(As + l * ld + r, Vg + static_cast<int64_t>(gcol(l)) * q + r0 + r); });
        __pipeline_commit();
        __pipeline_wait_prior(0);
        __syncthreads();
        for (int idx = tid; idx < jgroups * rows; idx += nt) {
          const int jg = idx / rows, r = idx - jg * rows;  // lanes of a warp share jg: J reads broadcast
          T acc[kJ];
#pragma unroll
          for (int u = 0; u < kJ; ++u) acc[u] = T(0);
          for (int l = 0; l < c; ++l) {
            const T x = As[l * ld + r];
#pragma unroll
            for (int u = 0; u < kJ; ++u) {
              const int j = jg * kJ + u;
              if (j < c) acc[u] += x * As[j * ld + p + l];  // J[l][j]
            }
          }
#pragma unroll
          for (int u = 0; u < kJ; ++u) {
            const int j = jg * kJ + u;
            if (j < c) Vg[static_cast<int64_t>(gcol(j)) * q + r0 + r] = acc[u];
          }
        }
        __syncthreads();
      }
    }
    return;
  }

  if constexpr (!kPair) {  // (the pair instantiations returned above)
    // Whole mode: finalise. Exact norms, descending order by rank counting.
    exact_norms();
    if (tid == 0) s_rank = 0;
    __syncthreads();
    write_descending_s(d, c, p, scale, args.S + md.s_off, rank_s, &s_rank, args.info + k, args.rank + k,
                       converged ? sweeps : -1);
    const double tiny = tiny_norm<T>(p);
    if constexpr (kLogV) {  // (rank_s written: write_descending_s's barrier)
      if (args.vlog_nrec) {  // deferred: the pending records and the ranks for log_v_apply.cu
        for (int l = tid; l < c; l += nt) args.vlog_rank[static_cast<int64_t>(blockIdx.x) * c + l] = rank_s[l];
        if (tid == 0) {
          args.vlog_nrec[2 * blockIdx.x] = lpending;
          args.vlog_nrec[2 * blockIdx.x + 1] = 2 * lhead + (vinit ? 1 : 0);
        }
      } else {
        write_v_by_rank();
      }
    }
    if (!args.U) return;
    T* Ug = args.U + md.u_off;
    for (int l = tid; l < c; l += nt) {  // 1 / ||a_l||, once per column (in the free pair slots)
      const double nrm = sqrt(d[l]);
      ps[l] = nrm > tiny ? static_cast<T>(1.0 / nrm) : T(0);  // zero columns are completed later
    }
    __syncthreads();
    for_each_column(c, p, [&](int l, int r) { Ug[static_cast<int64_t>(rank_s[l]) * p + r] = As[l * ld + r] * ps[l]; });
    if constexpr (kWithV) {
      T* Vg = args.V + md.v_off;
      for_each_column(c, c, [&](int l, int r) { Vg[rank_s[l] * c + r] = As[l * ld + pa + r]; });
    }
  }
