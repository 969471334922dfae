// Host-side pieces of the CUDA engine that need no GPU: the level selector
// (kernels/planner/planner.cpp) for given device limits, the register kernel's shape
// choice, and the circle-method slot permutation the register kernel relies
// on. Runs in CI, where CUDA tests skip. Exit status: 0 if every check passes.
#include <cstdio>
#include <set>
#include <utility>

#include "../kernels/levels/smem/halving_order.h"
#include "../kernels/levels/blocked/pair_tasks.h"
#include "../kernels/levels/gemm/gemm_level.h"
#include "../kernels/planner/planner.h"
#include "../kernels/qr/qr_precondition.h"
#include "../kernels/common/round_robin.h"
#include "../kernels/levels/warp/svd_warp.h"

namespace {

using namespace jsvd::cuda;

int failures = 0;

void check(bool ok, const char* what) {
  std::printf("  %-68s %s\n", what, ok ? "ok" : "FAIL");
  if (!ok) ++failures;
}

// Every pair of 2P columns meets exactly once in 2P-1 steps, and the columns
// are back in their slots at the end.
bool circle_covers_all_pairs(int P) {
  const int n = 2 * P;
  std::vector<int> col(n);
  for (int s = 0; s < n; ++s) col[s] = s;
  std::set<std::pair<int, int>> met;
  for (int step = 0; step < n - 1; ++step) {
    for (int k = 0; k < P; ++k) {
      const int a = std::min(col[2 * k], col[2 * k + 1]), b = std::max(col[2 * k], col[2 * k + 1]);
      if (!met.insert({a, b}).second) return false;  // met twice
    }
    std::vector<int> next(n);
    for (int s = 0; s < n; ++s) next[s] = col[circle_source(s, P)];
    col = next;
  }
  for (int s = 0; s < n; ++s)
    if (col[s] != s) return false;
  return static_cast<int>(met.size()) == P * (n - 1);
}

// The recursive-halving ordering as the register steps walk it (svd_smem.cu):
// G groups take the slots of each level in passes, and every step of a pass
// each owner meets at most one partner. Every pair (i < j) of the c columns
// must meet exactly once, within a pass no column may be touched twice in one
// step, and an owner's partners lie in its segment's second half.
bool halving_covers_all_pairs(int c, int m0, int G) {
  const HalvingOrder ho{c, m0};
  std::set<std::pair<int, int>> met;
  for (int L = 0; L < ho.levels(); ++L) {
    const int A = ho.owners(L), nslots = ho.slots(L), W = ho.steps(L);
    for (int base = 0; base < nslots; base += G) {
      for (int step = 0; step < W; ++step) {
        std::set<int> busy;
        for (int g = 0; g < G && base + g < nslots; ++g) {
          const int slot = base + g, t = slot / A, o = slot - t * A;
          int lo, mid, hi;
          ho.segment(L, t, lo, mid, hi);
          const int a = mid - lo, b = hi - mid, Ws = a > b ? a : b;
          if (o >= a || b == 0 || step >= Ws) continue;
          if (a > A || Ws > W) return false;
          const int jj = (o + step) % Ws;
          if (jj >= b) continue;
          const int x = lo + o, y = mid + jj;
          if (!busy.insert(x).second || !busy.insert(y).second) return false;
          if (!met.insert({x, y}).second) return false;
        }
      }
    }
  }
  return static_cast<int>(met.size()) == c * (c - 1) / 2;
}

}  // namespace

// One sweep of block-pair tasks for matrices of q columns in blocks of w
// (pair SVD level, intra pairs at step 0 only), queued in step order: every
// column pair of every matrix is rotated exactly once; no block column is in
// two tasks of one step; and each task waits for exactly the tasks queued
// before it on its block columns (so only on earlier tasks: no deadlock).
bool pair_queue_is_sound(const std::vector<int64_t>& qs, int64_t w) {
  std::vector<std::vector<PairTask>> steps;
  int32_t ncols = 0;
  for (size_t k = 0; k < qs.size(); ++k) {
    const int32_t nb = append_pair_tasks(steps, static_cast<int32_t>(k), qs[k], w, ncols, false, true);
    if (nb != (qs[k] + w - 1) / w) return false;  // the block columns it numbered
    ncols += nb;
  }
  std::vector<std::pair<size_t, int>> range;
  const std::vector<PairTask> queue = queue_in_step_order(steps, ncols, range);
  for (const auto& r : range) {
    std::set<int32_t> used;  // block columns of this step
    for (int t = 0; t < r.second; ++t) {
      const PairTask& pt = queue[r.first + t];
      if (!used.insert(pt.b0).second) return false;
      if (pt.b1 != pt.b0 && !used.insert(pt.b1).second) return false;
    }
  }
  // coverage, per matrix: count[k][a * q + b] for columns a < b
  std::vector<std::vector<int>> count(qs.size());
  for (size_t k = 0; k < qs.size(); ++k) count[k].assign(qs[k] * qs[k], 0);
  for (size_t t = 0; t < queue.size(); ++t) {
    const PairTask& pt = queue[t];
    const int64_t q = qs[pt.k];
    const int w0 = pt.w0w1 & 0xffff, w1 = (pt.w0w1 >> 16) & kPairWidthMask;
    const bool intra = (pt.w0w1 & kPairIntra) != 0;
    std::vector<int> cols;
    for (int l = 0; l < w0; ++l) cols.push_back(pt.c0 + l);
    for (int l = 0; l < w1; ++l) cols.push_back(pt.c1 + l);
    for (size_t x = 0; x < cols.size(); ++x)
      for (size_t y = x + 1; y < cols.size(); ++y) {
        const bool cross = (x < static_cast<size_t>(w0)) != (y < static_cast<size_t>(w0));
        if (cross || intra) ++count[pt.k][std::min(cols[x], cols[y]) * q + std::max(cols[x], cols[y])];
      }
    // the counts it waits for: the tasks before it on its block columns
    int32_t n0 = 0, n1 = 0;
    for (size_t u = 0; u < t; ++u) {
      n0 += queue[u].b0 == pt.b0 || queue[u].b1 == pt.b0;
      n1 += queue[u].b0 == pt.b1 || queue[u].b1 == pt.b1;
    }
    if (pt.need0 != n0 || pt.need1 != n1) return false;
  }
  for (size_t k = 0; k < qs.size(); ++k)
    for (int64_t a = 0; a < qs[k]; ++a)
      for (int64_t b = a + 1; b < qs[k]; ++b)
        if (count[k][a * qs[k] + b] != 1) return false;
  return true;
}

int main() {
  std::printf("recursive-halving ordering (register steps)\n");
  bool halving_ok = true;
  for (int c = 1; c <= 200; ++c) {
    for (int G : {1, 7, 16, 64}) {
      halving_ok &= halving_covers_all_pairs(c, (c + 1) / 2, G);  // a whole matrix
      for (int w1 = 0; w1 <= c / 2; w1 += (c > 40 ? 7 : 1))     // a block pair [w0 | w1]
        halving_ok &= halving_covers_all_pairs(c, c - w1, G);
    }
  }
  check(halving_ok, "1..200 columns, any split, 1..64 groups: every pair once per sweep");
  const HalvingOrder h128{128, 64}, h32{32, 16};
  check(h128.levels() == 7 && h128.max_slots(7) == 64, "128 columns: 7 levels, 64 owners at each");
  int steps128 = 0, steps32 = 0;
  for (int L = 0; L < 7; ++L) steps128 += h128.steps(L);
  for (int L = 0; L < h32.levels(); ++L) steps32 += h32.steps(L);
  check(steps128 == 127 && steps32 == 31, "powers of two: c - 1 steps per sweep, as round robin");

  std::printf("block-pair tasks and their queue\n");
  check(pair_queue_is_sound({8 * 16}, 16), "8 blocks of 16: every pair once, waits = earlier tasks");
  check(pair_queue_is_sound({5 * 16, 3 * 16 + 5}, 16), "odd block counts, a partial block, two matrices");
  check(pair_queue_is_sound({37, 64, 100, 7}, 8), "four matrices of 1 to 13 blocks of 8");

  std::printf("circle method on register slots\n");
  for (int P : {2, 4, 8, 16}) {
    char what[80];
    std::snprintf(what, sizeof what, "%d columns: every pair once per sweep, slots restored", 2 * P);
    check(circle_covers_all_pairs(P), what);
  }

  std::printf("register (warp) level shapes\n");
  // The rule: a thread (lanes = 1, rows = p) for at most 4 rows; else lanes =
  // columns rounded up to a power of two (at least 4), rows per lane the least
  // of 1, 2, 4 that covers the rows, and at most 64 (float32) or 32 (float64)
  // values of A per lane; otherwise not this level.
  bool shapes_ok = true;
  for (size_t elem : {sizeof(float), sizeof(double)}) {
    for (int64_t q = 1; q <= 40; ++q) {
      for (int64_t p = q; p <= 80; ++p) {
        int lanes = 4;
        while (lanes < q) lanes *= 2;
        int rows = 0;
        for (int r : {1, 2, 4})
          if (rows == 0 && p <= r * lanes && r * lanes <= (elem == 4 ? 64 : 32)) rows = r;
        if (q > 32 || rows == 0) lanes = rows = 0;
        if (p <= 4) {
          lanes = 1;
          rows = static_cast<int>(p);
        }
        const WarpLaunch w = svd_warp_config(p, q, elem);
        shapes_ok &= w.lanes == lanes && w.rows == rows;
      }
    }
  }
  check(shapes_ok, "p x q up to 80 x 40, both dtypes: lanes and rows per lane as the rule says");
  check(svd_warp_config(32, 32, 4).lanes == 32 && svd_warp_config(32, 32, 4).rows == 1, "32x32 float32: 32 lanes x 1 row");
  check(svd_warp_config(64, 32, 4).rows == 2 && svd_warp_config(64, 32, 8).lanes == 0,
        "64x32: 2 rows per lane in float32, shared memory in float64");
  check(svd_warp_config(32, 8, 4).lanes == 8 && svd_warp_config(32, 8, 4).rows == 4, "32x8: 8 lanes x 4 rows");

  std::printf("level selector (H100 limits: 227 KB shared memory per block, 132 SMs)\n");
  const DeviceLimits h100{232448, 132};
  check(plan_matrix(32, 32, 4, true, 10000, h100).level == Level::kWholeWarp, "10000 x 32x32 float32: registers");
  check(plan_matrix(128, 128, 4, true, 200, h100).level == Level::kWholeSmem, "200 x 128x128 float32: whole in shared memory");
  const MatrixPlan p512 = plan_matrix(512, 512, 4, true, 100, h100);
  check(p512.level == Level::kPairSvd && p512.width == 16 && p512.launch.delta,
        "100 x 512x512 float32: block pairs of 2 x 16 columns, carrying E = J - I");
  // (1024 columns: the GEMM level's by the rule; with the tuner choosing block pairs, these)
  const TunedLevel pairs{true, false, 0, ""};
  const MatrixPlan p1024 = plan_matrix(1024, 1024, 4, true, 10, h100, &pairs);
  check(p1024.width == 16 && p1024.launch.delta && p1024.launch.rows == 1024 + 32,
        "10 x 1024x1024 float32: 2 x 16 carrying E (with V's rows 16 would not fit)");
  // A list of 17 (tests/test_levels.py, test_pair_level_list_all_carrying_delta): its square and its tall
  // (or transposed wide) matrices all carry E, so the launch does, through the descriptor table.
  for (int64_t q : {512, 256}) {
    const MatrixPlan pl = plan_matrix(512, q, 4, true, 17, h100);
    check(pl.level == Level::kPairSvd && pl.width == 16 && pl.launch.delta && pl.launch.rows == 512 + 32,
          q == 512 ? "17 x 512x512 float32 in a list: 2 x 16 carrying E" : "17 x 512x256 float32 in a list: 2 x 16 carrying E");
  }
  check(plan_matrix(1024, 1000, 4, true, 10, h100, &pairs).width == 8,
        "10 x 1024x1000 float32: 2 x 8 (no E: 1000 columns leave a narrow block; 16 would not fit)");
  const MatrixPlan p256 = plan_matrix(256, 256, 4, true, 200, h100);
  check(p256.width == 16 && !p256.launch.delta, "200 x 256x256 float32: 2 x 16 (3 blocks per SM), V's rows");
  check(plan_matrix(600, 600, 4, true, 1, h100).width == 8, "1 x 600x600 float32: 2 x 8 (37 tasks a step, not 18)");
  check(plan_matrix(512, 512, 8, true, 100, h100).width == 8, "100 x 512x512 float64: 2 x 8 (3 blocks per SM)");
  check(plan_matrix(128, 128, 8, true, 500, h100).width == 16, "500 x 128² float64: 2 x 16, not 2 x 32");
  check(plan_matrix(128, 128, 8, true, 20, h100).width == 8, "20 x 128² float64: 2 x 8 (too few tasks)");
  // V by the log (kernel_log_v.cuh; uniform batches ask for it): float64 whole matrices whose V does not fit
  // beside A, where A's rows fit the register steps (16 lanes, 8 rows a lane); block pairs elsewhere
  const MatrixPlan log128 = plan_matrix(128, 128, 8, true, 200, h100, nullptr, 0, /*log_v=*/true);
  check(log128.level == Level::kWholeSmem && log128.launch.log_v && log128.launch.tpp == 16,
        "200 x 128² float64, V by the log: whole, 16 lanes a rotation");
  check(plan_matrix(128, 121, 8, true, 3, h100, nullptr, 0, true).launch.log_v, "3 x 128x121 float64: the log");
  check(plan_matrix(150, 141, 8, true, 64, h100, nullptr, 0, true).level == Level::kPairSvd,
        "64 x 150x141 float64 (8 lanes a rotation): block pairs, not the log");
  check(plan_matrix(200, 117, 8, true, 64, h100, nullptr, 0, true).level == Level::kPairSvd,
        "64 x 200x117 float64 (more rows than 8 a lane): block pairs");
  check(!plan_matrix(100, 100, 8, true, 64, h100, nullptr, 0, true).launch.log_v &&
            !plan_matrix(128, 128, 8, false, 200, h100, nullptr, 0, true).launch.log_v &&
            plan_matrix(128, 128, 4, true, 200, h100, nullptr, 0, true).level == Level::kWholeSmem &&
            !plan_matrix(128, 128, 4, true, 200, h100, nullptr, 0, true).launch.log_v,
        "no log where V fits beside A, without V, or in float32");
  check(!plan_matrix(128, 128, 8, true, 200, h100).launch.log_v, "no log unless asked (lists)");
  // List members: narrower float32 pairs (a list's sweep is its largest member's chain of steps).
  check(plan_matrix(200, 200, 4, true, 243, h100).width == 32, "243 x 200x200 float32, uniform: 2 x 32");
  check(list_width_cap({200, 150}, {200, 120}, 4, true) == 16, "a float32 list to 200 columns: pairs of 16");
  check(list_width_cap({600, 200}, {400, 200}, 4, true) == 8, "a float32 list to 400 columns: pairs of 8");
  check(list_width_cap({600, 512}, {400, 512}, 4, true) == 16, "... but 16 where a member's pairs carry E");
  check(list_width_cap({600}, {400}, 8, true) == 0, "float64 lists: no cap");
  check(plan_matrix(200, 200, 4, true, 243, h100, nullptr, 16).width == 16, "200x200 float32 capped at 16");
  check(plan_matrix(500, 400, 4, true, 458, h100, nullptr, 8).width == 8, "500x400 float32 capped at 8");
  check(plan_matrix(200, 200, 8, true, 243, h100, nullptr, 0).width ==
            plan_matrix(200, 200, 8, true, 243, h100).width, "200x200 float64 in a list: as uniform");
  check(plan_matrix(1024, 1024, 8, true, 10, h100, &pairs).level == Level::kPairSvd,
        "10 x 1024x1024 float64: block pairs (carrying their rotation: V's rows would not fit)");
  check(plan_matrix(2048, 16, 8, true, 2, h100).level == Level::kGramEvd, "2 x 2048x16 float64: Gram EVD");
  // The GEMM level (levels/gemm/gemm_level.h): from 1024 columns by the rule, else as the tuner says.
  const TunedLevel gemm16{true, true, 16, ""};
  const MatrixPlan g4096 = plan_matrix(4096, 4096, 4, true, 1, h100);
  check(g4096.level == Level::kGemm && g4096.width == 32 && g4096.gemm_inner == 1,
        "1 x 4096² float32: GEMM level, blocks of 32, one EVD sweep a pair");
  check(plan_matrix(768, 768, 4, true, 12, h100, &gemm16).width == 16 &&
            plan_matrix(768, 768, 4, true, 12, h100).level == Level::kPairSvd,
        "12 x 768²: the tuner's GEMM width 16; by the rule, block pairs");
  const GemmShape gs = gemm_shape(4096, 4000, 32, 1, 132);
  check(gs.pairs == 63 && gs.n_pad == 4032 && gs.split == 5 && gs.m_pad % gs.split == 0 && gs.m_pad >= 4096 &&
            gs.chunk() % 8 == 0,
        "GEMM layout of 1 x 4096x4000 at w 32: 126 blocks (4032 columns), Gram rows in 5 chunks");
  const GemmShape gb = gemm_shape(1024, 1024, 32, 100, 132);
  check(gb.pairs == 16 && gb.split == 1 && gb.m_pad == 1024, "GEMM layout of 100 x 1024²: no row split");
  // QR preconditioning (kernels/qr/qr_precondition.h): uniform batches of >= 256 columns (float64:
  // 32 where a matrix fits the one-launch QR in shared memory, else 128, and 16 from max(512, 8 cols)
  // rows); blocked panels of 32 columns, narrower where a panel of all the rows would not fit.
  auto panel = [&](int64_t r, int64_t c, size_t e, bool u = true) { return qr_choice(r, c, e, u, 2, h100).panel; };
  auto whole = [&](int64_t r, int64_t c, size_t e) { return qr_choice(r, c, e, true, 2, h100).whole; };
  check(panel(512, 512, 4) == 32 && panel(1536, 1536, 4) == 32, "QR: 512² and 1536² float32 uniform: panels of 32");
  check(panel(1536, 1536, 8) == 16 && panel(3000, 300, 8) == 8, "QR: 1536² float64: 16; 3000x300 float64: 8");
  check(!qr_choice(512, 255, 4, true, 2, h100).on() && !qr_choice(512, 512, 4, false, 2, h100).on() &&
            !qr_choice(200, 200, 4, true, 2, h100).on(),
        "QR: none for 255 float32 columns, a list of shapes, or 200² float32");
  check(qr_choice(4096, 300, 8, true, 2, h100).lapack && qr_choice(7000, 40, 4, true, 2, h100).lapack &&
            !qr_choice(6900, 40, 4, true, 2, h100).lapack && !qr_choice(3400, 300, 8, true, 2, h100).lapack,
        "QR: cuSOLVER's where no 8-column panel fits (float64 beyond 3480 rows, float32 beyond 6960)");
  check(qr_choice(4096, 256, 4, true, 1, h100).lapack && qr_choice(2000, 500, 8, true, 1, h100).lapack &&
            !qr_choice(1999, 500, 8, true, 1, h100).lapack && !qr_choice(4096, 1025, 4, true, 1, h100).lapack &&
            qr_choice(128, 32, 4, true, 1, h100).whole &&
            !qr_choice(128, 32, 4, true, 1, h100).lapack,
        "QR: cuSOLVER's for a single matrix of >= 2000 rows, >= 4 a column, the blocked QR would take; the one "
        "launch stays");
  check(panel(900, 100, 4) == 32 && whole(128, 32, 4) && whole(1024, 16, 4) && !qr_choice(255, 16, 4, true, 2, h100).on() &&
            !qr_choice(1024, 15, 4, true, 2, h100).on() && !qr_choice(299, 100, 4, true, 2, h100).on(),
        "QR: float32 from 32 columns where rows >= 3 cols (900x100 blocked, 128x32 in one launch), from 16 where "
        "rows >= max(256, 16 cols)");
  auto regs = [&](int64_t r, int64_t c, size_t e) { return qr_choice(r, c, e, true, 2, h100).regs; };
  check(regs(1024, 16, 8) && regs(128, 32, 8) && regs(256, 32, 8) && !regs(257, 32, 8) && !regs(64, 32, 8) &&
            !regs(128, 32, 4) && !regs(1024, 16, 4),
        "QR in registers: float64 of <= 32 columns and >= 4 rows a column, where the rows fit its threads");
  check(panel(128, 128, 8) == 32 && !whole(128, 128, 8) && panel(512, 64, 8) == 32 && !qr_choice(511, 64, 8, true, 2, h100).on() &&
            !qr_choice(1024, 15, 8, true, 2, h100).on() && panel(2048, 16, 8) == 8,
        "QR: float64 blocked from 128 columns, or from 16 with rows >= max(512, 8 cols), where not whole");
  check(whole(32, 32, 8) && whole(64, 32, 8) && whole(100, 100, 8) && whole(1024, 16, 8) && !whole(32, 32, 4) &&
            !qr_choice(120, 120, 8, true, 2, h100).on() && !qr_choice(64, 31, 8, true, 2, h100).on() &&
            !qr_choice(511, 16, 8, true, 2, h100).on(),
        "QR: float64 in one launch from 32 columns where p x q + q x q fits (not 120², nor float32 below 256), "
        "and from 16 when tall");
  {
    // A list's block pairs share one launch sized for their maxima: a matrix that would take it past
    // shared memory takes the Gram EVD level; the maxima stay those of the pairs kept.
    PairMerge merged;
    MatrixPlan tall = plan_matrix(3000, 40, 4, true, 100, h100), wide = plan_matrix(260, 250, 4, true, 100, h100);
    const bool both_pairs = tall.level == Level::kPairSvd && wide.level == Level::kPairSvd;
    merge_pair_plan(merged, tall, 3000, 40, 4, true, h100);
    merge_pair_plan(merged, wide, 260, 250, 4, true, h100);
    check(both_pairs && tall.level == Level::kPairSvd && wide.level == Level::kGramEvd && wide.width == 32 &&
              merged.p == 3000 && merged.q == 40,
          "list of 100: 3000x40 then 260x250 float32 block pairs: the second to the Gram EVD level");
  }
  {
    // Pairs that all carry E = J - I at one row count merge under that variant: 1024 x 992 and 1024 x 960
    // (V's 992 rows a column would not fit; E's 32 do).
    PairMerge merged;
    MatrixPlan a = plan_matrix(1024, 992, 4, true, 6, h100), b = plan_matrix(1024, 960, 4, true, 6, h100);
    const bool delta = a.level == Level::kPairSvd && a.launch.delta && b.level == Level::kPairSvd && b.launch.delta;
    merge_pair_plan(merged, a, 1024, 992, 4, true, h100);
    merge_pair_plan(merged, b, 1024, 960, 4, true, h100);
    check(delta && a.level == Level::kPairSvd && b.level == Level::kPairSvd && merged.launch_delta(true),
          "list of 1024x992 and 1024x960 float32: one block-pair launch carrying E");
  }
  const DeviceLimits small{48 * 1024, 80};  // the paper's 48 KB
  check(plan_matrix(128, 128, 4, true, 200, small).level == Level::kPairSvd,
        "48 KB device: 128x128 float32 no longer whole, block pairs");
  std::printf("%s\n", failures ? "FAILED" : "all checks passed");
  return failures ? 1 : 0;
}
