// The CPU engine's sweep ordering (row-cyclic, pointwise or by blocks) and one sweep over it,
// on one thread or several.
//
// Not a standalone header: included by jacobi_cpu_solver.h, inside the instruction-set
// namespace that jacobi_cpu.cpp opens (see there).

// The ordering is the row-cyclic one, (0,1), (0,2), ..., (0,q-1), (1,2), ...
// (Forsythe-Henrici; the ordering of LAPACK's xGESVJ before its pivoting),
// executed in an equivalent order: two rotations on disjoint columns commute
// exactly (in floating point too), so any order in which each pair still
// follows every earlier row-cyclic pair sharing a column with it applies the
// same rotations (up to the rounding of inner products that are fused into
// an earlier rotation's pass). Parallel orderings such as the round-robin are
// not equivalent, and on rank-deficient matrices they converge much more
// slowly: 256x256 float64 with duplicated columns took 29 sweeps with the
// blocked round-robin against 10 row-cyclic (docs/robustness.md).

// Row-cyclic as steps of independent pairs. The pairs (a, b), a < b, of
// rows a in [r0, r1) and columns b in [c0, c1) go in steps of equal key
// (a - r0) + b: every earlier row-cyclic pair sharing a column with (a, b)
// has a smaller key or an earlier row block, and no column occurs twice in a
// step. A step holds up to r1 - r0 pairs, and its working set is the row
// block plus a window of r1 - r0 columns sliding to the right.
inline void row_cyclic_steps(int64_t r0, int64_t r1, int64_t c0, int64_t c1,
                             std::vector<std::vector<std::pair<int32_t, int32_t>>>& steps) {
  for (int64_t t = c0; t <= (r1 - 1 - r0) + c1 - 1; ++t) {
    std::vector<std::pair<int32_t, int32_t>> st;
    for (int64_t a = r0; a < r1; ++a) {
      const int64_t b = t - (a - r0);
      if (b > a && b >= c0 && b < c1) st.emplace_back(static_cast<int32_t>(a), static_cast<int32_t>(b));
    }
    if (!st.empty()) steps.push_back(std::move(st));
  }
}

// ---------------------------------------------------------------------------
// Sweep schedule.
//
// Columns are grouped into blocks of width w (paper §2, (2.6); W-cycle §II-B):
// a unit takes the pairs of one block row I (rows in I, columns after them)
// in the steps above, so its working set is 2w columns of A and V, which stay
// in cache. On one thread a unit is a whole block row. On several, a block
// row is cut into its tiles (I, J), and a tile waits only for the earlier
// tiles on its blocks, so tiles of different block rows run concurrently (a
// wavefront, about nblocks / 4 tiles at a time). w = 1 (or w >= q) is the
// pointwise ordering.
//
// The schedule is a list of phases; a phase is a list of units that may run
// concurrently; a unit is a list of steps run in order; a step is a list of
// independent pairs.
struct Schedule {
  struct Unit {
    std::vector<int64_t> step_begin;  // into pi/pj, one past the last = pi.size()
    std::vector<int32_t> pi, pj;
    std::vector<int32_t> fz1, ft1, fz2, ft2;  // fusion (see Fusion), indices into pi/pj
    // blocked schedule: the blocks the unit touches, and for each the number of
    // units on it earlier in the sweep (see sweep())
    std::vector<int32_t> blocks, need;
  };
  std::vector<std::vector<Unit>> phases;
  int64_t max_unit_pairs = 0;
  int64_t nblocks = 0;  // > 0: blocked schedule (one phase, units in a valid order, carrying blocks)
  int64_t max_concurrent = 1;  // blocked: the most units that can run at once
};

inline void add_steps(Schedule::Unit& u, const std::vector<std::vector<std::pair<int32_t, int32_t>>>& steps) {
  for (const auto& st : steps) {
    if (st.empty()) continue;
    u.step_begin.push_back(static_cast<int64_t>(u.pi.size()));
    for (const auto& pr : st) {
      u.pi.push_back(pr.first);
      u.pj.push_back(pr.second);
    }
  }
}

// Fusion targets of a unit's consecutive steps: the next-step pair (u, v)
// gets its dot product from whichever of the two current-step pairs holding
// u and v is rotated last (pairs are rotated in index order), since the
// other column is final by then.
inline void add_fusion(Schedule::Unit& u, int64_t q) {
  const int64_t np = static_cast<int64_t>(u.pi.size()), ns = static_cast<int64_t>(u.step_begin.size());
  u.fz1.assign(np, -1);
  u.ft1.assign(np, -1);
  u.fz2.assign(np, -1);
  u.ft2.assign(np, -1);
  std::vector<int64_t> where(q, -1);  // column -> pair index in the current step
  for (int64_t st = 0; st + 1 < ns; ++st) {
    const int64_t b = u.step_begin[st], e = u.step_begin[st + 1];
    const int64_t e2 = st + 2 < ns ? u.step_begin[st + 2] : np;
    for (int64_t k = b; k < e; ++k) where[u.pi[k]] = where[u.pj[k]] = k;
    for (int64_t t = e; t < e2; ++t) {
      const int32_t cu = u.pi[t], cv = u.pj[t];
      const int64_t au = where[cu], av = where[cv];
      if ((au < 0 && av < 0) || au == av) continue;
      const int64_t a = std::max(au, av);
      const int32_t col = a == au ? cu : cv, z = a == au ? cv : cu;
      if (u.pi[a] == col) {
        u.fz1[a] = z;
        u.ft1[a] = static_cast<int32_t>(t);
      } else {
        u.fz2[a] = z;
        u.ft2[a] = static_cast<int32_t>(t);
      }
    }
    for (int64_t k = b; k < e; ++k) where[u.pi[k]] = where[u.pj[k]] = -1;
  }
}

inline Schedule make_schedule(int64_t q, int64_t w, bool serial) {
  Schedule sch;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> steps;
  if (w <= 1 || w >= q) {
    row_cyclic_steps(0, q, 0, q, steps);
    if (serial) {
      // pointwise on one thread: one unit holding every step
      Schedule::Unit u;
      add_steps(u, steps);
      sch.phases.push_back({std::move(u)});
    } else {
      // pointwise: one phase per step, holding one unit of one step
      // (sweep() splits its pairs across threads).
      for (auto& st : steps) {
        Schedule::Unit u;
        add_steps(u, {st});
        sch.phases.push_back({std::move(u)});
      }
    }
  } else {
    const int64_t nb = (q + w - 1) / w;
    // Rectangles of g column blocks: a whole block row on one thread (full
    // steps); single tiles on several, the widest wavefront (rectangles of
    // 2 and 4 blocks were no faster on 1x256^2 and 1x512^2, 2 threads).
    const int64_t g = serial ? nb : 1;
    struct Rect {
      int64_t row, c0, c1, time;  // time: 1 + the latest rectangle it waits for
      Schedule::Unit u;
    };
    std::vector<Rect> rects;
    std::vector<int64_t> last_time(nb, 0);
    std::vector<int32_t> seen(nb, 0);
    for (int64_t bi = 0; bi < nb; ++bi)
      for (int64_t c0 = bi; c0 < nb; c0 += g) {
        Rect r{bi, c0, std::min(nb, c0 + g), 0, {}};
        steps.clear();
        row_cyclic_steps(bi * w, std::min(q, (bi + 1) * w), r.c0 * w, std::min(q, r.c1 * w), steps);
        add_steps(r.u, steps);
        if (r.u.pi.empty()) continue;  // a one-column last block
        r.u.blocks.push_back(static_cast<int32_t>(bi));
        for (int64_t b = r.c0; b < r.c1; ++b)
          if (b != bi) r.u.blocks.push_back(static_cast<int32_t>(b));
        for (int32_t b : r.u.blocks) {
          r.u.need.push_back(seen[b]++);
          r.time = std::max(r.time, last_time[b] + 1);
        }
        for (int32_t b : r.u.blocks) last_time[b] = r.time;
        rects.push_back(std::move(r));
      }
    // Hand-out order: by the earliest time a rectangle can start (still a valid
    // order, since it waits for rectangles of smaller time only).
    std::stable_sort(rects.begin(), rects.end(), [](const Rect& x, const Rect& y) { return x.time < y.time; });
    std::vector<int64_t> per_time;
    for (auto& r : rects) {
      if (static_cast<int64_t>(per_time.size()) < r.time) per_time.resize(r.time, 0);
      sch.max_concurrent = std::max(sch.max_concurrent, ++per_time[r.time - 1]);
    }
    std::vector<Schedule::Unit> units;
    for (auto& r : rects) units.push_back(std::move(r.u));
    sch.phases.push_back(std::move(units));
    sch.nblocks = nb;
  }
  for (auto& ph : sch.phases)
    for (auto& u : ph) {
      add_fusion(u, q);
      sch.max_unit_pairs = std::max<int64_t>(sch.max_unit_pairs, u.pi.size());
    }
  return sch;
}

// Schedules depend only on (q, w); batches are mostly uniform, so each thread
// keeps the last one it built.
inline const Schedule& schedule_for(int64_t q, int64_t w, bool serial) {
  thread_local int64_t cq = -1, cw = -1;
  thread_local bool cs = false;
  thread_local Schedule cached;
  if (q != cq || w != cw || serial != cs) {
    cached = make_schedule(q, w, serial);
    cq = q;
    cw = w;
    cs = serial;
  }
  return cached;
}

template <typename T>
bool run_unit(const Work<T>& m, const Schedule::Unit& u, SweepStats& st) {
  bool any = false;
  const int64_t ns = static_cast<int64_t>(u.step_begin.size());
  thread_local std::vector<double> pre;
  pre.assign(u.pi.size(), std::numeric_limits<double>::quiet_NaN());
  for (int64_t s = 0; s < ns; ++s) {
    const int64_t b = u.step_begin[s], e = s + 1 < ns ? u.step_begin[s + 1] : static_cast<int64_t>(u.pi.size());
    const Fusion fu{u.fz1.data() + b, u.ft1.data() + b, u.fz2.data() + b, u.ft2.data() + b, pre.data(), b};
    any |= process_pairs(m, u.pi.data() + b, u.pj.data() + b, e - b, st, &fu);
  }
  return any;
}

// One sweep; returns true if any pair rotated above tol (not yet converged). *st: its largest cosine and
// sine (SweepStats), merged over the threads (a slot each).
template <typename T>
bool sweep(const Work<T>& m, const Schedule& sch, bool parallel, SweepStats& st) {
  bool rotated = false;
  if (!parallel) {
    for (const auto& ph : sch.phases)
      for (const auto& u : ph) rotated |= run_unit(m, u, st);
    return rotated;
  }
  std::atomic<bool> any{false};
  std::vector<SweepStats> slots(static_cast<size_t>(std::max(1, at::get_num_threads())));
  const auto merged = [&] {
    for (const SweepStats& s : slots) st.merge(s);
    return any.load();
  };
  if (sch.nblocks > 0) {
    // Blocked schedule on several threads: no barrier between units. Units
    // are taken in schedule order from a shared counter; a unit waits only
    // until every earlier unit on its blocks has finished (done[b] counts them), so a thread that is slowed down holds up only the units
    // that need its blocks, rather than everyone at every step. Earlier units
    // are always taken before later ones, so the waits cannot deadlock.
    std::vector<const Schedule::Unit*> order;
    for (const auto& ph : sch.phases)
      for (const auto& u : ph) order.push_back(&u);
    const int64_t nu = static_cast<int64_t>(order.size());
    std::unique_ptr<std::atomic<int32_t>[]> done(new std::atomic<int32_t>[sch.nblocks]);
    for (int64_t b = 0; b < sch.nblocks; ++b) done[b].store(0, std::memory_order_relaxed);
    std::atomic<int64_t> next{0};
    const int nt = static_cast<int>(std::min<int64_t>(at::get_num_threads(), sch.max_concurrent));
    Pool::get().run(std::max(1, nt), [&](int t) {
      bool r = false;
      for (int64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < nu;) {
        const Schedule::Unit& u = *order[k];
        for (size_t k2 = 0; k2 < u.blocks.size(); ++k2)
          while (done[u.blocks[k2]].load(std::memory_order_acquire) < u.need[k2]) Pool::cpu_relax();
        r |= run_unit(m, u, slots[t]);
        for (int32_t b : u.blocks) done[b].fetch_add(1, std::memory_order_release);
      }
      if (r) any = true;
    });
    return merged();
  }
  const int64_t pair_cost = 8 * (m.p + (m.v ? m.q : 0));  // ~flops of one pair visit
  for (const auto& ph : sch.phases) {
    const int64_t nu = static_cast<int64_t>(ph.size());
    if (nu == 1 && ph[0].step_begin.size() == 1) {
      // one step of independent pairs (pointwise schedule): split its pairs
      const auto& u = ph[0];
      const int64_t n = static_cast<int64_t>(u.pi.size());
      const int64_t grain = std::max<int64_t>(4, 32768 / pair_cost);
      const int64_t nt = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), n / grain));
      Pool::get().run(static_cast<int>(nt), [&](int t) {
        const int64_t b = n * t / nt, e = n * (t + 1) / nt;
        if (process_pairs(m, u.pi.data() + b, u.pj.data() + b, e - b, slots[t])) any = true;
      });
    } else {
      // units handed out from a shared counter (a slowed thread holds up one unit)
      std::atomic<int64_t> next{0};
      Pool::get().run(static_cast<int>(std::min<int64_t>(nu, at::get_num_threads())), [&](int t) {
        bool r = false;
        for (int64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < nu;) r |= run_unit(m, ph[k], slots[t]);
        if (r) any = true;
      });
    }
  }
  return merged();
}

