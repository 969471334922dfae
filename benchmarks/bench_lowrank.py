"""Batched randomized SVD (issue 22): torch_jsvd.svd_lowrank against torch.svd_lowrank, same run.

Inputs have a decaying spectrum (A = X diag(1/(1+j)) Y / sqrt(k), X and Y Gaussian, k = min(m, n), seed 0),
where a rank-q approximation means something (a Gaussian matrix's flat spectrum leaves every method's error
near 1). Both methods take the same q and niter = 2 and the same seed; err = max over the batch of
‖A − U diag(S) Vᴴ‖_F / ‖A‖_F. gesvda: cuSOLVER's full batched SVD (torch.linalg.svd(driver="gesvda"), on
the tall orientation), its rank-q truncation's err beside it, for reference.

    python benchmarks/bench_lowrank.py [--cases 4096] [--budget-s 240] [--no-md]

Output: table, bench_lowrank.json in $OUT or benchmarks/results/, and RESULTS.md's bench_lowrank section.
"""

import json, os, sys, time

import torch

import common
from common import fmt

CASES = [(1000, 256, 256, 16), (64, 1024, 1024, 32), (12, 768, 3072, 64), (1, 4096, 4096, 64), (1, 4096, 11008, 128)]
GOALS = {"lowrank 1000x256x256 q=16": 5.0, "lowrank 64x1024x1024 q=32": 10.0, "lowrank 12x768x3072 q=64": 6.0}


def case_name(b, m, n, q):
    return f"lowrank {b}x{m}x{n} q={q}"


def make(b, m, n):
    g = torch.Generator(device="cuda").manual_seed(0)
    k = min(m, n)
    X = torch.randn(b, m, k, device="cuda", generator=g)
    Y = torch.randn(b, k, n, device="cuda", generator=g)
    d = 1.0 / (1.0 + torch.arange(k, device="cuda", dtype=torch.float32))
    return (X * d) @ Y / k ** 0.5


def err(A, U, S, V):
    return (torch.linalg.matrix_norm(A - (U * S.unsqueeze(-2)) @ V.mT) / torch.linalg.matrix_norm(A)).max().item()


def seeded(fn):
    def run():
        torch.manual_seed(1)
        return fn()
    return run


def run_case(torch_jsvd, b, m, n, q):
    A = make(b, m, n)
    row = {"case": case_name(b, m, n, q), "batch": b, "m": m, "n": n, "q": q, "niter": 2, "dtype": "float32",
           "methods": {}}
    ours = seeded(lambda: torch_jsvd.svd_lowrank(A, q=q, niter=2))
    row["first_calls_ms"] = first_calls(ours)
    for name, fn in (("ours", ours), ("torch_svd_lowrank", seeded(lambda: torch.svd_lowrank(A, q=q, niter=2)))):
        ms, out = common.time_ms(fn, "cuda", max_repeat=10)
        row["methods"][name] = {"ms": ms, "err": err(A, *out)}
    os.environ["JSVD_LOWRANK_GRAPHS"] = "0"
    try:
        ms, out = common.time_ms(ours, "cuda", max_repeat=10)
        row["methods"]["ours_eager"] = {"ms": ms, "err": err(A, *out)}
    finally:
        del os.environ["JSVD_LOWRANK_GRAPHS"]
    At = A if m >= n else A.mT
    try:
        ms, (U, S, Vh) = common.time_ms(lambda: torch.linalg.svd(At, full_matrices=False, driver="gesvda"), "cuda",
                                        max_repeat=5)
        row["methods"]["gesvda"] = {"ms": ms, "err": err(At, U[..., :q], S[..., :q], Vh[..., :q, :].mT)}
    except RuntimeError as e:
        row["methods"]["gesvda"] = {"error": str(e)[:80]}
    return row


def first_calls(fn):
    """Wall ms of a shape's first call (eager) and second (its sketch captured as a CUDA graph, then
    replayed: torch_jsvd/_lowrank_graphs.py), each alone."""
    from torch_jsvd import _lowrank_graphs
    _lowrank_graphs.clear()
    out = []
    for _ in range(2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        out.append(1e3 * (time.perf_counter() - t0))
    return out


def table(rows, md=False):
    head = ["case", "ours ms", "torch.svd_lowrank ms", "speed-up", "ours eager ms", "1st / 2nd call ms", "ours err",
            "torch err", "gesvda ms", "gesvda rank-q err"]
    out = []
    for r in rows:
        o, t, g = r["methods"]["ours"], r["methods"]["torch_svd_lowrank"], r["methods"].get("gesvda", {})
        e, fc = r["methods"].get("ours_eager", {}), r.get("first_calls_ms") or [None, None]
        out.append([r["case"], fmt(o["ms"], ".2f"), fmt(t["ms"], ".2f"), fmt(t["ms"] / o["ms"], ".2f") + "x",
                    fmt(e.get("ms"), ".2f"), f"{fmt(fc[0], '.1f')} / {fmt(fc[1], '.1f')}",
                    fmt(o["err"], ".4f"), fmt(t["err"], ".4f"), fmt(g.get("ms"), ".1f") if "ms" in g else "error",
                    fmt(g.get("err"), ".4f")])
    return common.render_table(head, out, md)


def goal_lines(rows):
    out = []
    for r in rows:
        o, t = r["methods"]["ours"], r["methods"]["torch_svd_lowrank"]
        ok_err = o["err"] <= 1.05 * t["err"]
        goal = GOALS.get(r["case"])
        speed = (f"<= {goal} ms: {o['ms']:.2f} ms " + ("MET" if o["ms"] <= goal else "MISSED")) if goal else \
            (f"no slower than torch.svd_lowrank: {o['ms']:.2f} vs {t['ms']:.2f} ms " + ("MET" if o["ms"] <= t["ms"] else "MISSED"))
        out.append(f"{r['case']} {speed}; err within 5% of torch's: {o['err']:.4f} vs {t['err']:.4f} "
                   + ("MET" if ok_err else "MISSED"))
    return out


def markdown(doc):
    note = ("- float32, niter = 2, same q and seed for both; inputs with singular values 1/(1+j) (benchmarks/bench_lowrank.py); "
            "median wall time of one call after a warm-up, so ours is the replay of its sketch's CUDA graph "
            "(torch_jsvd/_lowrank_graphs.py; ours eager: JSVD_LOWRANK_GRAPHS=0; 1st / 2nd call: a shape's first "
            "call, eager, and second, which captures the graph); err = ‖A − U diag(S) Vᴴ‖_F/‖A‖_F, max over the "
            "batch; gesvda: the full SVD (cuSOLVER) and its rank-q truncation's err, for reference")
    return common.section("## GPU, batched randomized SVD (issue 22): torch_jsvd.svd_lowrank vs torch.svd_lowrank", doc, note,
                          table(doc["rows"], md=True), "Goals (issue 22, H100, same run):")


def main():
    args = common.bench_parser(__doc__.splitlines()[0], 240.0).parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            return common.update_results_md("bench_lowrank", markdown(json.load(f)))
    if not torch.cuda.is_available():
        sys.exit("bench_lowrank.py: no CUDA device available")
    import torch_jsvd
    cases = common.select_cases(CASES, case_name, args.cases)
    meta = common.meta(torch.cuda.get_device_name())
    outdir = common.results_dir()

    def document(rows):
        return {**meta, "json": "bench_lowrank.json", "rows": rows, "goals": goal_lines(rows),
                "command": common.command("bench_lowrank.py", args)}

    def keep(rows):  # (the JSON after every case: a cut run keeps its rows)
        with open(os.path.join(outdir, "bench_lowrank.json"), "w") as f:
            json.dump(document(rows), f, indent=1)

    rows = common.run_cases(cases, case_name, args.budget_s, lambda *c: run_case(torch_jsvd, *c), table, keep)
    common.save_run("bench_lowrank", document(rows), outdir, markdown, table(rows), args.no_md)


if __name__ == "__main__":
    main()
