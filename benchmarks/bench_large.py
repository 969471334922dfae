"""Large matrices (issue 19): torch_jsvd against torch.linalg.svd's default and cuSOLVER's gesvda, same run.

Single large matrices and layer shapes (the GEMM level and the auto-tuner) and the batched squares of
issue 19's goals, float32 and float64. Wide layer shapes are run in their tall orientation (768 x 3072 as
3072 x 768: the same SVD; gesvda takes tall or square matrices only, and torch_jsvd transposes wide ones).

    python benchmarks/bench_large.py                 # every case (stops starting cases after --budget-s)
    python benchmarks/bench_large.py --cases 4096    # cases whose name contains a substring
    python benchmarks/bench_large.py --from-json benchmarks/results/bench_large.json   # RESULTS.md from a run

Timing, quality fields and JSON rows as bench_gpu.py (run_case; methods ours, torch, gesvda). The auto-tuner
is calibrated for each shape before it is timed (torch_jsvd.tune), so no timing includes a calibration.
jacobi_gflops: the Jacobi's floating-point work, sweeps x (8 q^3 + 4 q^3 with V) per matrix on the q x q
R^T (a sweep forms every pair's Gram matrix, 4 q^3 flops, and rotates A and V, 4 q^3 each), over ours' time;
the H100 SXM's (and H200's) dense peaks are 67 TFLOP/s FP64 (tensor cores) and FP32, 495 TFLOP/s TF32.
Output: table, bench_large.json + speedup_large.png in $OUT or benchmarks/results/, and RESULTS.md's
bench_large section.
"""

import json, os, sys

import torch

import common
from bench_gpu import F32, F64, case_name, run_case
from common import fmt

CASES = [(1, 4096, 4096, F32), (1, 1536, 1536, F32), (1, 3072, 768, F32), (1, 11008, 4096, F32),
         (1, 1024, 1024, F32), (10, 1024, 1024, F32), (12, 768, 768, F32), (100, 512, 512, F32),
         (200, 256, 256, F32), (100, 512, 512, F64), (1, 2048, 2048, F64), (1, 4096, 4096, F64),
         (1, 1024, 1024, F64), (2, 2048, 2048, F64), (1, 512, 512, F32), (1, 512, 512, F64),
         (1, 11008, 128, F32), (1, 11008, 128, F64), (1, 20000, 200, F64),
         (1, 400000, 16, F32)]  # (the last four: a single tall matrix, issue 20)
# issue 19's goals: ms (float32 unless said), same run
GOALS = {"1x4096x4096 float32": 110, "1x1536x1536 float32": 15, "1x3072x768 float32": 7, "100x512x512 float32": 35,
         "200x256x256 float32": 12, "10x1024x1024 float32": 45, "12x768x768 float32": 40}


def jacobi_gflops(row, ms=None):
    """The Jacobi's GFLOP/s over ms (default: ours' time)."""
    ms = ms or row["methods"]["ours"].get("ms")
    if not ms or "sweeps_max" not in row:
        return None
    q = min(row["m"], row["n"])
    return row["batch"] * row["sweeps_max"] * 12.0 * q ** 3 / (ms * 1e-3) / 1e9


def table(rows, md=False):
    head = ["case", "torch ms", "gesvda ms", "ours ms", "vs gesvda", "sweeps", "GFLOP/s", "orth ours", "orth gesvda",
            "recon ours", "recon gesvda", "level"]
    out = []
    for r in rows:
        mt = r["methods"]
        o, t, g = mt["ours"], mt.get("torch", {}), mt.get("gesvda", {})
        vs = g["ms"] / o["ms"] if "ms" in g and "ms" in o else None
        out.append([r["case"], fmt(t.get("ms"), ".1f"), fmt(g.get("ms"), ".1f") if "ms" in g else "error",
                    fmt(o.get("ms"), ".1f"), fmt(vs, ".2f") + "x" if vs else "-", str(r.get("sweeps_max", "-")),
                    fmt(r.get("jacobi_gflops"), ".0f"), fmt(o.get("orth"), ".1e"), fmt(g.get("orth"), ".1e"),
                    fmt(o.get("recon"), ".1e"), fmt(g.get("recon"), ".1e"), r.get("level", "")])
    return common.render_table(head, out, md)


# issue 19's goals relative to gesvda in the same run: float64 100x512² at most gesvda's float64 time; 4096 x 11008
# faster than gesvda on its transpose (run here as 11008 x 4096, the orientation gesvda takes)
VS_GESVDA = ["100x512x512 float64", "1x11008x4096 float32"]


def goal_lines(rows):
    by = {r["case"]: r["methods"] for r in rows}
    out = common.ms_goal_lines(rows, GOALS, ".1f")
    for case in VS_GESVDA:
        o, g = (by.get(case, {}).get(k, {}).get("ms") for k in ("ours", "gesvda"))
        verdict = "(not run)" if o is None or g is None else "MET" if o <= g else "MISSED"
        out.append(f"{case} <= gesvda's ms: {fmt(o, '.1f')} against {fmt(g, '.1f')} ms {verdict}")
    return out


def markdown(doc):
    note = ("- `full_matrices=False`, seed 0, median of CUDA-event timings of one Python call; orth = max of "
            "‖UᵀU − I‖_F, ‖VhVhᵀ − I‖_F, recon = ‖A − U diag(S) Vh‖_F/‖A‖_F (float64); level: the plan of ours "
            "(after the auto-tuner); GFLOP/s: the Jacobi's work (sweeps × 12 q³) over ours' time; \"eigh start\": svd "
            "runs the Jacobi from the Gram matrix's eigenvectors (kernels/precondition/), and its sweeps column is "
            "svd_ex's, which never takes that start: GFLOP/s is then that of svd_ex alone (its sweeps, max_sweeps "
            "set to them), the Jacobi's rate without the start; peaks (H100 SXM and H200, dense): FP32 67 TFLOP/s, "
            "TF32 495, FP64 67 (tensor cores)")
    return common.section("## GPU, large matrices (issue 19): torch_jsvd vs torch.linalg.svd default and gesvda", doc, note,
                          table(doc["rows"], md=True), "Goals (issue 19, set for the H100; same run, on the device above):", "speed-up vs gesvda, large matrices")


def plot(rows, outdir):
    plt = common.pyplot()
    if plt is None:
        return None
    names, vals = [], []
    for r in rows:
        o, g = r["methods"]["ours"], r["methods"].get("gesvda", {})
        if "ms" in o and "ms" in g:
            names.append(r["case"].replace(" float", " f"))
            vals.append(g["ms"] / o["ms"])
    fig, ax = plt.subplots(figsize=(9, 5))
    ax.bar(range(len(vals)), vals, color=["tab:green" if v >= 1 else "tab:red" for v in vals])
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xticks(range(len(vals)), names, fontsize=7, rotation=50, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("gesvda time / torch_jsvd time")
    ax.set_title(f"large matrices: speed-up vs cuSOLVER gesvda, {torch.cuda.get_device_name()}", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "speedup_large.png"), dpi=120)
    plt.close(fig)
    return "speedup_large.png"


def main():
    args = common.bench_parser(__doc__.splitlines()[0], 420.0).parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            doc = json.load(f)
        return common.update_results_md("bench_large", markdown(doc))
    if not torch.cuda.is_available():
        sys.exit("bench_large.py: no CUDA device available")
    import torch_jsvd
    cases = common.select_cases(CASES, case_name, args.cases)
    meta = common.meta(torch.cuda.get_device_name())
    print(f"device: {meta['device']}, torch {meta['torch']}, torch_jsvd {meta['commit']}; {len(cases)} cases")

    def run(b, m, n, dtype):
        tune = torch_jsvd.tune([(b, m, n)], dtype=dtype)[0]  # (calibration outside the timings)
        row = run_case(torch_jsvd, b, m, n, dtype, 0, skip=["gesvdj", "gesvd"])
        row["level"] = tune["levels"][-1]["kernel"] + (f" w{tune['levels'][0]['width']}" if "width" in tune["levels"][0] else "")
        row["tuner"] = tune.get("tuner", "")
        row["jacobi_gflops"] = jacobi_gflops(row)
        plan = torch_jsvd.plan([(m, n)] * b, dtype=dtype)["matrices"][0]
        if "start_v" in plan:
            # svd takes the eigh start, svd_ex (which gives the sweeps) never does: the Jacobi's rate is
            # that of svd_ex alone, limited to the sweeps it takes (it cannot stop early by itself)
            row["level"] = "eigh start + " + row["level"]
            row["jacobi_gflops"] = None
            if "sweeps_max" in row and row.get("not_converged") == 0:
                A = torch.randn(b, m, n, dtype=dtype, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
                ms, _ = common.time_ms(lambda: torch_jsvd.svd_ex(A, full_matrices=False, max_sweeps=row["sweeps_max"]),
                                       "cuda", max_repeat=5)
                row["jacobi_alone_ms"] = ms
                row["jacobi_gflops"] = jacobi_gflops(row, ms)
                del A
                torch.cuda.empty_cache()
        return row

    rows = common.run_cases(cases, case_name, args.budget_s, run, table)
    outdir = common.results_dir()
    doc = {**meta, "json": "bench_large.json", "rows": rows, "goals": goal_lines(rows),
           "command": common.command("bench_large.py", args)}
    doc["plot"] = plot(rows, outdir)
    common.save_run("bench_large", doc, outdir, markdown, table(rows), args.no_md)


if __name__ == "__main__":
    main()
