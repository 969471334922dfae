// The CPU engine's sweep orderings (pointwise and blocked round-robin) and one sweep over them,
// on one thread or several.
//
// Not a standalone header: included by jacobi_cpu_solver.h, inside the instruction-set
// namespace that jacobi_cpu.cpp opens (see there).

// Round-robin (tournament) ordering of n items: with e = n rounded up to even,
// step s pairs slot positions (k, e-1-k); between steps every slot but the
// first moves one place. Each step touches every item once, so its pairs are
// independent, and e-1 steps cover every pair exactly once.
// Appends the pairs of every step (offset by `base`) to `steps`.
inline void round_robin_steps(int64_t n, int64_t base, std::vector<std::vector<std::pair<int32_t, int32_t>>>& steps) {
  const int64_t e = n + (n & 1);
  std::vector<int64_t> pos(e);
  std::iota(pos.begin(), pos.end(), 0);
  if (static_cast<int64_t>(steps.size()) < e - 1) steps.resize(e - 1);
  for (int64_t st = 0; st < e - 1; ++st) {
    for (int64_t k = 0; k < e / 2; ++k) {
      int64_t i = pos[k], j = pos[e - 1 - k];
      if (i > j) std::swap(i, j);
      if (j < n) steps[st].emplace_back(static_cast<int32_t>(base + i), static_cast<int32_t>(base + j));
    }
    std::rotate(pos.begin() + 1, pos.end() - 1, pos.end());
  }
}

// ---------------------------------------------------------------------------
// Sweep schedule.
//
// Columns are grouped into blocks of width w (paper §2, (2.6); W-cycle §II-B).
// A sweep first orthogonalises the pairs inside each block (round-robin in
// every block at once), then runs a round-robin over the blocks: block pair
// (I, J) takes its w*w cross pairs in w steps, step s pairing I[k] with
// J[(k+s) mod w]. Every column pair is visited exactly once per sweep (a
// cyclic strategy, so the usual convergence and accuracy of pointwise
// one-sided Jacobi hold), but while a block pair is processed the working set
// is 2w columns of A and V, which stay in cache. Block pairs of one block
// round-robin step share no column, so they may run on different threads.
// w = 1 is the plain pointwise round-robin.
//
// The schedule is a list of phases; a phase is a list of units that may run
// concurrently; a unit is a list of steps run in order; a step is a list of
// independent pairs.
struct Schedule {
  struct Unit {
    std::vector<int64_t> step_begin;  // into pi/pj, one past the last = pi.size()
    std::vector<int32_t> pi, pj;
    std::vector<int32_t> fz1, ft1, fz2, ft2;  // fusion (see Fusion), indices into pi/pj
    int32_t bi = -1, bj = -1;                 // blocked schedule: the unit's blocks (bj = -1: one)
    int32_t need_i = 0, need_j = 0;           // units on bi / bj earlier in the sweep (see sweep())
  };
  std::vector<std::vector<Unit>> phases;
  int64_t max_unit_pairs = 0;
  int64_t nblocks = 0;  // > 0: blocked schedule, units carry bi/bj
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
  if ((w <= 1 || w >= q) && serial) {
    // pointwise round-robin on one thread: one unit holding every step
    round_robin_steps(q, 0, steps);
    Schedule::Unit u;
    add_steps(u, steps);
    sch.phases.push_back({std::move(u)});
  } else if (w <= 1 || w >= q) {
    // pointwise round-robin: one phase per step, holding one unit of one step
    // (sweep() splits its pairs across threads).
    round_robin_steps(q, 0, steps);
    for (auto& st : steps) {
      Schedule::Unit u;
      add_steps(u, {st});
      sch.phases.push_back({std::move(u)});
    }
  } else {
    const int64_t nb = (q + w - 1) / w;
    auto lo = [&](int64_t b) { return b * w; };
    auto hi = [&](int64_t b) { return std::min(q, (b + 1) * w); };
    // phase 0: inside every block, one unit per block
    std::vector<Schedule::Unit> intra;
    for (int64_t b = 0; b < nb; ++b) {
      steps.clear();
      round_robin_steps(hi(b) - lo(b), lo(b), steps);
      Schedule::Unit u;
      add_steps(u, steps);
      u.bi = static_cast<int32_t>(b);
      if (!u.pi.empty()) intra.push_back(std::move(u));
    }
    sch.phases.push_back(std::move(intra));
    // block round-robin: one phase per step, one unit per block pair
    std::vector<std::vector<std::pair<int32_t, int32_t>>> bsteps;
    round_robin_steps(nb, 0, bsteps);
    for (const auto& bst : bsteps) {
      std::vector<Schedule::Unit> ph;
      for (const auto& bp : bst) {
        int64_t i0 = lo(bp.first), ni = hi(bp.first) - i0, j0 = lo(bp.second), nj = hi(bp.second) - j0;
        const bool sw = ni > nj;  // the wider block takes the cyclic shift
        if (sw) {
          std::swap(i0, j0);
          std::swap(ni, nj);
        }
        steps.assign(nj, {});
        for (int64_t s = 0; s < nj; ++s)
          for (int64_t k = 0; k < ni; ++k) {
            int32_t a = static_cast<int32_t>(i0 + k), b = static_cast<int32_t>(j0 + (k + s) % nj);
            if (a > b) std::swap(a, b);
            steps[s].emplace_back(a, b);
          }
        Schedule::Unit u;
        add_steps(u, steps);
        u.bi = bp.first;
        u.bj = bp.second;
        ph.push_back(std::move(u));
      }
      sch.phases.push_back(std::move(ph));
    }
    sch.nblocks = nb;
    std::vector<int32_t> seen(nb, 0);
    for (auto& ph : sch.phases)
      for (auto& u : ph) {
        u.need_i = seen[u.bi]++;
        if (u.bj >= 0) u.need_j = seen[u.bj]++;
      }
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
bool run_unit(const Work<T>& m, const Schedule::Unit& u) {
  bool any = false;
  const int64_t ns = static_cast<int64_t>(u.step_begin.size());
  thread_local std::vector<double> pre;
  pre.assign(u.pi.size(), std::numeric_limits<double>::quiet_NaN());
  for (int64_t s = 0; s < ns; ++s) {
    const int64_t b = u.step_begin[s], e = s + 1 < ns ? u.step_begin[s + 1] : static_cast<int64_t>(u.pi.size());
    const Fusion fu{u.fz1.data() + b, u.ft1.data() + b, u.fz2.data() + b, u.ft2.data() + b, pre.data(), b};
    any |= process_pairs(m, u.pi.data() + b, u.pj.data() + b, e - b, &fu);
  }
  return any;
}

// One sweep; returns true if any pair rotated above tol (not yet converged).
template <typename T>
bool sweep(const Work<T>& m, const Schedule& sch, bool parallel) {
  bool rotated = false;
  if (!parallel) {
    for (const auto& ph : sch.phases)
      for (const auto& u : ph) rotated |= run_unit(m, u);
    return rotated;
  }
  std::atomic<bool> any{false};
  if (sch.nblocks > 0) {
    // Blocked schedule on several threads: no barrier between round-robin
    // steps. Units are taken in schedule order from a shared counter; a unit
    // waits only until every earlier unit on its blocks has finished (done[b]
    // counts them), so a thread that is slowed down holds up only the units
    // that need its blocks, rather than everyone at every step. Earlier units
    // are always taken before later ones, so the waits cannot deadlock.
    std::vector<const Schedule::Unit*> order;
    for (const auto& ph : sch.phases)
      for (const auto& u : ph) order.push_back(&u);
    const int64_t nu = static_cast<int64_t>(order.size());
    std::unique_ptr<std::atomic<int32_t>[]> done(new std::atomic<int32_t>[sch.nblocks]);
    for (int64_t b = 0; b < sch.nblocks; ++b) done[b].store(0, std::memory_order_relaxed);
    std::atomic<int64_t> next{0};
    const int nt = static_cast<int>(std::min<int64_t>(at::get_num_threads(), sch.phases.back().size()));
    Pool::get().run(std::max(1, nt), [&](int) {
      bool r = false;
      for (int64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < nu;) {
        const Schedule::Unit& u = *order[k];
        while (done[u.bi].load(std::memory_order_acquire) < u.need_i ||
               (u.bj >= 0 && done[u.bj].load(std::memory_order_acquire) < u.need_j))
          Pool::cpu_relax();
        r |= run_unit(m, u);
        done[u.bi].fetch_add(1, std::memory_order_release);
        if (u.bj >= 0) done[u.bj].fetch_add(1, std::memory_order_release);
      }
      if (r) any = true;
    });
    return any.load();
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
        if (process_pairs(m, u.pi.data() + b, u.pj.data() + b, e - b)) any = true;
      });
    } else {
      // units handed out from a shared counter (a slowed thread holds up one unit)
      std::atomic<int64_t> next{0};
      Pool::get().run(static_cast<int>(std::min<int64_t>(nu, at::get_num_threads())), [&](int) {
        bool r = false;
        for (int64_t k; (k = next.fetch_add(1, std::memory_order_relaxed)) < nu;) r |= run_unit(m, ph[k]);
        if (r) any = true;
      });
    }
  }
  return any.load();
}

