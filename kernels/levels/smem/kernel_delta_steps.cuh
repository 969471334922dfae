// svd_smem_kernel's kDelta variant: float32 block pairs of 512 rows carrying E = J - I (two
// columns a warp in the cross steps), and [V_i V_j] <- [V_i V_j] (I + E) as a GEMM after the task
// (W-cycle paper §IV-B's update).
//
// Not a standalone header: pasted by the preprocessor into svd_smem_kernel's body
// (svd_smem_kernel.cuh), where it defines lambdas over the kernel's locals. The
// kernel is one function so that ptxas allocates it as before the split (moving these
// into functions of their own changed the register allocation of most variants).

  // kDelta's cross tasks: group g owns two columns of the first block, g and
  // g + G, and each step does both rotations at once (two independent chains
  // a warp: x^T y, the shuffles, the rotation and the rows interleave), with
  // half the warps a block, so three blocks share an SM. Column o meets
  // column (o + s) mod W of the second block in step s, as
  // cross_steps_in_registers; the arithmetic is register_step's, exact rows.
  auto cross_steps_delta = [&] {
    if constexpr (kTwoChains) {
      constexpr int R = kRegRows, H = kRegA;
      const int xa = g, xb = g + G;  // (2G == w0 == W == w1: rows split exactly)
      // A lane's rows of A are quads, 4 lane + 128 k (register h = 4 k + i),
      // so that each shared load and store moves 16 bytes: the step's LDS and
      // STS were 102 of its 423 instructions (cuobjdump) with a row a lane.
      // E's rows stay a row a lane (row p + lane: register H, eq. (6)'s shifts).
      static_assert(TPP == 32 && H % 4 == 0, "rows split exactly in quads");
      auto quad = [&](T* col, int k) -> float4& { return *reinterpret_cast<float4*>(col + 4 * lane + 4 * TPP * k); };
      T ra[R], rb[R];
#pragma unroll
      for (int k = 0; k < H / 4; ++k) {
        const float4 va = quad(As + xa * ld, k), vb = quad(As + xb * ld, k);
        ra[4 * k] = va.x, ra[4 * k + 1] = va.y, ra[4 * k + 2] = va.z, ra[4 * k + 3] = va.w;
        rb[4 * k] = vb.x, rb[4 * k + 1] = vb.y, rb[4 * k + 2] = vb.z, rb[4 * k + 3] = vb.w;
      }
      ra[H] = As[xa * ld + lane + H * TPP];
      rb[H] = As[xb * ld + lane + H * TPP];
      // Lanes 0-15 carry column xa's squared norm and decide its rotation,
      // lanes 16-31 xb's: the two decisions are one instruction stream.
      const bool hi = lane >= 16;
      double dx = d[hi ? xb : xa];
      bool any_rot = false, above_tol = false;
      auto rotate = [&](T (&xr)[R], T* y, T ss, T tau, int xi, int yi) {
#pragma unroll
        for (int k = 0; k < H / 4; ++k) {
          float4 v = quad(y, k);
          rotate_pair(xr[4 * k], v.x, ss, tau);
          rotate_pair(xr[4 * k + 1], v.y, ss, tau);
          rotate_pair(xr[4 * k + 2], v.z, ss, tau);
          rotate_pair(xr[4 * k + 3], v.w, ss, tau);
          quad(y, k) = v;
        }
        T yv = y[lane + H * TPP];  // E's row `lane` (register_step)
        rotate_pair_shifted(xr[H], yv, ss, tau, lane == xi ? T(1) : T(0), lane == yi ? T(1) : T(0));
        y[lane + H * TPP] = yv;
      };
      int ja = xa, jb = xb;  // partners (o + step) mod W, counted
      for (int step = 0; step < W; ++step) {
        T* ya = As + (w0 + ja) * ld;
        T* yb = As + (w0 + jb) * ld;
        double* const slot = d + w0 + (hi ? jb : ja);
        const double dy = *slot;
        // x^T y in float32, four chains of four rows a lane, then the tree:
        // its rounding, a few ulp of sum |x_r y_r| <= |x| |y|, stays below
        // the test's sqrt(p) eps |x| |y|, and it issues half the instructions
        // of products summed in double (F2F and DADD, 64 of the step's 361).
        float pa[4], pb[4];
#pragma unroll
        for (int k = 0; k < H / 4; ++k) {
          const float4 u = quad(ya, k), v = quad(yb, k);
          const float us[4] = {u.x, u.y, u.z, u.w}, vs[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int i = 0; i < 4; ++i) {
            pa[i] = k == 0 ? ra[i] * us[i] : fmaf(ra[4 * k + i], us[i], pa[i]);
            pb[i] = k == 0 ? rb[i] * vs[i] : fmaf(rb[4 * k + i], vs[i], pb[i]);
          }
        }
        const float ga = (pa[0] + pa[1]) + (pa[2] + pa[3]), gb = (pb[0] + pb[1]) + (pb[2] + pb[3]);
        // Both sums in one reduction: each half keeps its own and sends the
        // other (offset 16), then four levels within the half: x^T y of xa
        // in lanes 0-15, of xb in 16-31.
        float sxy = (hi ? gb : ga) + __shfl_xor_sync(0xffffffffu, hi ? ga : gb, 16);
#pragma unroll
        for (int off = 8; off > 0; off /= 2) sxy += __shfl_xor_sync(0xffffffffu, sxy, off);
        const Acc axy = sxy;
        __syncwarp();  // every lane has read dy before lanes 0 and 16 update it
        // This half's rotation (the same decision as register_step's).
        T ss = T(0), tau = T(0);
        if (dx > tiny2 && dy > tiny2)
          decide_rotation(axy, dy, dx, slot, (lane & 15) == 0, [] {}, ss, tau, any_rot, above_tol);
        const T ssa = __shfl_sync(0xffffffffu, ss, 0), taua = __shfl_sync(0xffffffffu, tau, 0);
        const T ssb = __shfl_sync(0xffffffffu, ss, 16), taub = __shfl_sync(0xffffffffu, tau, 16);
        if (ssa != T(0)) rotate(ra, ya, ssa, taua, xa, w0 + ja);
        if (ssb != T(0)) rotate(rb, yb, ssb, taub, xb, w0 + jb);
        __syncthreads();  // y and its norm pass to the next group
        ja = ja + 1 == W ? 0 : ja + 1;
        jb = jb + 1 == W ? 0 : jb + 1;
      }
#pragma unroll
      for (int k = 0; k < H / 4; ++k) {
        quad(As + xa * ld, k) = make_float4(ra[4 * k], ra[4 * k + 1], ra[4 * k + 2], ra[4 * k + 3]);
        quad(As + xb * ld, k) = make_float4(rb[4 * k], rb[4 * k + 1], rb[4 * k + 2], rb[4 * k + 3]);
      }
      As[xa * ld + lane + H * TPP] = ra[H];
      As[xb * ld + lane + H * TPP] = rb[H];
      if ((lane & 15) == 0) d[hi ? xb : xa] = dx;
      publish_flags(any_rot, above_tol);
    }
  };
  // kDelta, after A's rows are written out: [V_i V_j] <- [V_i V_j] (I + E)
  // (§IV-B's update, as a GEMM). V's rows are staged in A's rows (p >= q, the
  // engine's tall orientation). A warp item is 128 rows (four consecutive a
  // lane: 16-byte reads, conflict-free) by 8 output columns; E's entries are
  // read four rows at a time, broadcast to the warp (a column of E is
  // contiguous): 12 shared loads a 128 FFMA, with every offset known at
  // compile time (kLd). The loop it replaces (two rows a lane, its bounds
  // tested on each load, offsets computed at run time) issued 35k
  // instructions a task for 16k FFMA (ncu, 100x512²), a third of the kernel's.
  // c == 32 here, and q a multiple of 32 (pair_delta_fits).
  auto update_v_by_delta = [&] {
    if constexpr (kDelta) {
      static_assert(sizeof(T) == sizeof(float), "kDelta is float32's");
      constexpr int kC = 32, kJ = 8, kItemRows = 128;
      constexpr int kLd = kRegRows * 32;  // == ld: rows split exactly, checked on entry
      __syncthreads();  // A's rows are all read before V's overwrite them
      float* Vg = args.Vw + md.v_off;
      const int q = md.q;
      const bool vquads = ((q | md.v_off) & 3) == 0;
      const int wid = tid >> 5, ln = tid & 31, nwarps = nt >> 5;
      for (int r0 = 0; r0 < q; r0 += p) {
        const int rows = min(p, q - r0);  // (a multiple of 32)
        if (vquads) {
          auto piece = [&](int l, int r) {
            __pipeline_memcpy_async(As + l * kLd + r, Vg + static_cast<int64_t>(gcol(l)) * q + r0 + r, 16);
          };
          if (rows == (kRegRows - 1) * 32)  // (square pairs)
            for_each_column<4, (kRegRows - 1) * 32>(kC, rows, piece);
          else
            for_each_column<4>(kC, rows, piece);
        } else {
          for_each_column(kC, rows,
                          [&](int l, int r) { copy_async(As + l * kLd + r, Vg + static_cast<int64_t>(gcol(l)) * q + r0 + r); });
        }
        __pipeline_commit();
        __pipeline_wait_prior(0);
        __syncthreads();
        const int tiles = (rows + kItemRows - 1) / kItemRows;
        for (int item = wid; item < tiles * (kC / kJ); item += nwarps) {
          const int jg = item % (kC / kJ), r = (item / (kC / kJ)) * kItemRows + 4 * ln;
          if (r >= rows) continue;
          float acc[kJ][4];
#pragma unroll
          for (int u = 0; u < kJ; ++u) acc[u][0] = acc[u][1] = acc[u][2] = acc[u][3] = 0.0f;
          const float* xs = As + r;                    // V's rows r .. r + 3 of column l: xs[l * kLd]
          const float* es = As + jg * kJ * kLd + p;    // E[l][jg kJ + u]: es[u * kLd + l]
#pragma unroll
          for (int l4 = 0; l4 < kC; l4 += 4) {
            float4 x[4];
#pragma unroll
            for (int i = 0; i < 4; ++i) x[i] = *reinterpret_cast<const float4*>(xs + (l4 + i) * kLd);
#pragma unroll
            for (int u = 0; u < kJ; ++u) {
              const float4 e = *reinterpret_cast<const float4*>(es + u * kLd + l4);  // E[l4 .. l4 + 3][j]
              const float ev[4] = {e.x, e.y, e.z, e.w};
#pragma unroll
              for (int i = 0; i < 4; ++i) {
                acc[u][0] = fmaf(x[i].x, ev[i], acc[u][0]);
                acc[u][1] = fmaf(x[i].y, ev[i], acc[u][1]);
                acc[u][2] = fmaf(x[i].z, ev[i], acc[u][2]);
                acc[u][3] = fmaf(x[i].w, ev[i], acc[u][3]);
              }
            }
          }
          // V (I + E) = V + V E: V's entries round once, at the end. The
          // item's 8 columns lie in one block (w0 = 16): consecutive in V.
          float* out = Vg + static_cast<int64_t>(gcol(jg * kJ)) * q + r0 + r;
#pragma unroll
          for (int u = 0; u < kJ; ++u) {
            const float4 v = *reinterpret_cast<const float4*>(As + (jg * kJ + u) * kLd + r);
            const float4 o = make_float4(v.x + acc[u][0], v.y + acc[u][1], v.z + acc[u][2], v.w + acc[u][3]);
            float* dst = out + static_cast<int64_t>(u) * q;
            if (vquads) {
              *reinterpret_cast<float4*>(dst) = o;
            } else {
              dst[0] = o.x, dst[1] = o.y, dst[2] = o.z, dst[3] = o.w;
            }
          }
        }
        __syncthreads();
      }
    }
  };
