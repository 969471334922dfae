// svd_smem_kernel's register steps (kRegRows > 0): the recursive-halving levels of a whole
// matrix or a block pair's intra task, and the cross tasks of a block pair, one column a lane group in
// registers (W-cycle paper §IV-B; halving_order.h).
//
// Not a standalone header: pasted by the preprocessor into svd_smem_kernel's body
// (svd_smem_kernel.cuh), where it defines lambdas over the kernel's locals. The
// kernel is one function so that ptxas allocates it as before the split (moving these
// into functions of their own changed the register allocation of most variants).

  // Register steps (kRegRows > 0): the recursive-halving ordering
  // (halving_order.h). At each level a group owns one column x of every pair
  // it does and keeps x in registers for all of the level's steps, so a step
  // reads and writes only the partner y in shared memory (2 instead of 5
  // accesses per row, plus A's rows once for x^T y in the phased steps), and
  // the rotation is computed by every lane of the group at once: one barrier
  // per step instead of three, and no step waits on a single thread. A block
  // pair's cross task (not intra) is level 0 alone: [A_i A_j]'s cross pairs.
  const int nrows = pa + vr;
  const HalvingOrder order{c, w1 > 0 ? w0 : (c + 1) / 2};
  // (kDelta's cross tasks skip levels(), a loop of integer divisions, 1.3k
  // instructions a task in ncu at 100x512². Not moved for the others: that
  // changed ptxas's allocation of most kernels, the 256² pair kernel's spills
  // 14 -> 50 bytes.)
  const int nlevels = kDelta && !intra ? 1 : order.levels();
  // Rows split exactly (rows_exact): A's rows are the lanes' first kRegA
  // registers and the rest fill all kRegRows, so the steps' loops need no
  // per-row bounds (each cost two integer instructions and predicated the
  // row's work: ~455 instructions a step in the SASS of the 256² pair kernel,
  // which ncu found issue-bound, 77% of issue slots), and x^T y sums in two
  // chains instead of one.
  // Square pairs and whole matrices (V's rows under A's: p = q) and svdvals
  // (A's rows alone) of a size that fills the bucket take it.
  // (kRegA: svd_smem_kernel.cuh; whole matrices may be padded to it, pa.)
  const bool rows_exact = kRegRows > 0 && pa == kRegA * TPP && nrows == kRegRows * TPP;
  // Block pairs: their cross tasks in cross_steps_in_registers (below); their
  // first (intra) task of a sweep in registers, by the halving order, where
  // the rows split exactly (faster; with bounded rows it was slower, from
  // register pressure: docs/kernel-notes.md). Float32 with V only: float64
  // pairs carry J, whose rows rarely split exactly, and compiling the path
  // into their kernels, or into the svdvals ones, cost registers and time.
  constexpr bool kIntraRegs = !kPair || (sizeof(T) == sizeof(float) && kWithV);
  // kDelta at 512 rows: a group owns two columns of the first block
  // (cross_steps_delta; delta_threads in svd_smem.h).
  constexpr bool kTwoChains = kDelta && delta_two_columns(kRegRows * 32);
  const int owners = kTwoChains ? 2 * G : G;
  const bool regs = kRegRows > 0 && nrows <= kRegRows * TPP &&
                    !(kPair && (owners < w0 || (intra && !(kIntraRegs && rows_exact))));
  // kDelta has only the register steps on exactly split rows, E's shifts
  // written for them (the launcher takes it only for such tasks:
  // pair_delta_fits, svd_smem.h).
  if (kDelta && !(regs && rows_exact && (kTwoChains ? 2 * G == w0 : G >= w0))) __trap();
  // The rotation decision of a register step (phase 2 of the shared-memory
  // steps, below): x^T y = axy, the squared norms dx (the caller's column,
  // updated here) and dy (*dy_slot, which the writer lane updates by eq. (6)
  // after before_write()), sin and tau for rotate_pair (left 0 if none), and
  // the sweep's flags. register_step and cross_steps_delta share it.
  auto decide_rotation = [&](Acc axy, double dy, double& dx, double* dy_slot, bool writer, auto before_write,
                             T& ss, T& tau, bool& any_rot, bool& above_tol) {
    const double gabs = fabs(axy);
    if (gabs * gabs > apply2 * dx * dy) {
      const StepRotation<T> rot = step_rotation(static_cast<T>(dy - dx), static_cast<T>(axy));
      if (rot.t != T(0)) {
        ss = rot.s;
        tau = rot.tau;
        if (writer) track_bound(gabs, dx, dy, rot.s);
        const double t = static_cast<double>(rot.t);
        before_write();
        if (writer) *dy_slot = dy + t * axy;  // eq. (6)
        any_rot = true;
        above_tol |= gabs * gabs > tol2 * dx * dy;
        dx = fmax(dx - t * axy, 0.0);
      }
    }
  };
  // One register step (levels_in_registers, cross_steps_in_registers): the
  // group's column x (its rows xr in registers, squared norm dx) against
  // column y in shared memory, whose squared norm is *dy_slot: x^T y, the
  // rotation decision of phase 2 of the shared-memory steps (below), eq. (6),
  // and the rotation of x and y; the caller's barrier then passes y on. xi,
  // yi: the two columns' indices in the block (kDelta: E's identity part).
  auto register_step = [&](auto& xr, T* y, double* dy_slot, double& dx, bool& any_rot, bool& above_tol,
                           int xi, int yi, auto exact) {
    constexpr int R = kRegRows > 0 ? kRegRows : 1;
    const double dy = *dy_slot;
    T ss = T(0), tau = T(0);
    if (dx > tiny2 && dy > tiny2) {
      Acc axy = 0;
      if constexpr (decltype(exact)::value) {
        constexpr int H = kRegA > 0 ? kRegA : 1;
        Acc part[2] = {0, 0};
        if constexpr (sizeof(T) == sizeof(float) && H % 2 == 0) {
          // Float32: two rows' products summed in one FFMA before the
          // conversion, which halves the conversions (the XU pipe) and double
          // additions; two roundings per two rows, as one per product before.
#pragma unroll
          for (int h = 0; h < H; h += 2)
            part[(h / 2) & 1] += Acc(fmaf(xr[h + 1], y[lane + (h + 1) * TPP], xr[h] * y[lane + h * TPP]));
        } else {
#pragma unroll
          for (int h = 0; h < H; ++h) part[h & 1] += Acc(xr[h] * y[lane + h * TPP]);
        }
        axy = part[0] + part[1];
      } else {
#pragma unroll
        for (int h = 0; h < R; ++h) {
          const int r = lane + h * TPP;
          if (r < pa) axy += Acc(xr[h] * y[r]);
        }
      }
      axy = group_sum<TPP>(axy);
      decide_rotation(axy, dy, dx, dy_slot, lane == 0,
                      [&] { __syncwarp(group_mask<TPP>()); },  // every lane of the group has read dy
                      ss, tau, any_rot, above_tol);
    }
    if constexpr (kLogV) {
      if (lane == 0) log_put(lrec * G + g, ss, tau, xi, yi);
    }
    if (ss != T(0)) {
#pragma unroll
      for (int h = 0; h < R; ++h) {
        const int r = lane + h * TPP;
        if (decltype(exact)::value || r < nrows) {
          T yv = y[r];
          if (kDelta && h == kRegA) {
            // E's row `lane` (rows split exactly: one per lane): J = I + E is
            // rotated, and I's ones at (xi, xi) and (yi, yi) enter the update
            // as shifts, never added to E's small entries.
            rotate_pair_shifted(xr[h], yv, ss, tau, lane == xi ? T(1) : T(0), lane == yi ? T(1) : T(0));
          } else {
            rotate_pair(xr[h], yv, ss, tau);
          }
          y[r] = yv;
        }
      }
    }
  };
  // The register steps' end: the groups' rotation flags (a rotation; one
  // above tol), or-ed over the block into the sweep's s_any and s_rot.
  auto publish_flags = [&](bool any_rot, bool above_tol) {
    const int any_block = __syncthreads_or(any_rot), above_block = __syncthreads_or(above_tol);
    if (tid == 0) {
      if (any_block) s_any = 1;
      if (above_block) s_rot = 1;
    }
    __syncthreads();
  };
  auto levels_in_registers = [&](auto exact) {
    constexpr int R = kRegRows > 0 ? kRegRows : 1;
    bool any_rot = false, above_tol = false;  // this group's rotations (flags set once, below)
    for (int L = 0; L < nlevels; ++L) {
      const int A = order.owners(L), nslots = order.slots(L), W = order.steps(L);
      for (int base = 0; base < nslots; base += G) {  // more owners than groups: in passes
        // This group's column x, and its partners: columns y0 + (o + s) mod Ws below y0 + b.
        int x = 0, y0 = 0, b = 0, Ws = 1, o = 0;
        const int slot = base + g;
        if (slot < nslots) {
          const int t = slot / A;
          o = slot - t * A;
          int lo, mid, hi;
          order.segment(L, t, lo, mid, hi);
          if (o < mid - lo && hi > mid) {
            x = lo + o;
            y0 = mid;
            b = hi - mid;
            Ws = max(mid - lo, b);
          }
        }
        T* xs = As + x * ld;
        T xr[R];
#pragma unroll
        for (int h = 0; h < R; ++h) {
          const int r = lane + h * TPP;
          xr[h] = (b > 0 && r < nrows) ? xs[r] : T(0);
        }
        double dx = b > 0 ? d[x] : 0.0;
        int jj = o;  // (o + step) mod Ws
        for (int step = 0; step < W; ++step, jj = (jj + 1 == Ws) ? 0 : jj + 1) {
          if (step < Ws && jj < b)
            register_step(xr, As + (y0 + jj) * ld, d + y0 + jj, dx, any_rot, above_tol, x, y0 + jj, exact);
          else if (kLogV && lane == 0)
            log_put(lrec * G + g, T(0), T(0), 0, 0);
          if constexpr (kLogV) ++lrec;
          __syncthreads();  // y and its norm pass to the next owner
        }
        if (b > 0) {
#pragma unroll
          for (int h = 0; h < R; ++h) {
            const int r = lane + h * TPP;
            if (r < nrows) xs[r] = xr[h];
          }
          if (lane == 0) d[x] = dx;  // the next level may pair x as a partner
        }
        __syncthreads();
      }
    }
    publish_flags(any_rot, above_tol);
  };
  // Cross tasks with kRegRows > 0: group g (one per column of the first
  // block) keeps its column x in registers for all W steps, so a step reads
  // and writes only the partner column y in shared memory (2.5 instead of 5
  // accesses per row), and the rotation is computed by every lane of the
  // group at once: one barrier per step instead of three. The partner of x in
  // step s is column (g + s) mod W of the second block: one group per column.
  // Its step is register_step, as in levels_in_registers; its own loop, not
  // levels_in_registers' with one level, because that changed the pair
  // kernels' register allocation (ptxas: spills in the 64-row bucket).
  auto cross_steps_in_registers = [&] {
    constexpr int R = kRegRows > 0 ? kRegRows : 1;
    const bool owner = g < w0;
    T* xs = As + (owner ? g : 0) * ld;
    T xr[R];
#pragma unroll
    for (int h = 0; h < R; ++h) {
      const int r = lane + h * TPP;
      xr[h] = (owner && r < nrows) ? xs[r] : T(0);
    }
    double dx = owner ? d[g] : 0.0;
    bool any_rot = false, above_tol = false;  // this group's rotations (flags set once, below)
    auto steps = [&](auto exact) {
      int jj = g;  // (g + step) mod W, counted (no integer division per step)
      for (int step = 0; step < W; ++step) {
        if (owner && jj < w1)
          register_step(xr, As + (w0 + jj) * ld, d + w0 + jj, dx, any_rot, above_tol, g, w0 + jj, exact);
        __syncthreads();  // y and its norm pass to the next group
        jj = jj + 1 == W ? 0 : jj + 1;
      }
    };
    if constexpr (kDelta)
      steps(std::true_type{});  // (kDelta: rows split exactly, checked on entry)
    else if (rows_exact)
      steps(std::true_type{});
    else
      steps(std::false_type{});
    if (owner) {
#pragma unroll
      for (int h = 0; h < R; ++h) {
        const int r = lane + h * TPP;
        if (r < nrows) xs[r] = xr[h];
      }
    }
    publish_flags(any_rot, above_tol);
  };
