"""GPU benchmark: torch_jsvd.svd against torch.linalg.svd (default, gesvdj, gesvda; gesvd with --skip '') in one run.

Workloads of the W-cycle SVD paper (Fig. 7-8) plus float64 variants; issue 3 item 7 and "Goals".
All methods are called with full_matrices=False on the same seeded inputs.

    python benchmarks/bench_gpu.py                      # full suite (stops starting cases after --budget-s)
    python benchmarks/bench_gpu.py --quick              # the goal cases only
    python benchmarks/bench_gpu.py --cases 512,float64  # cases whose name contains any substring
    python benchmarks/bench_gpu.py --from-json benchmarks/results/bench_gpu_h100.json  # no GPU: section from a run
    python benchmarks/bench_gpu.py --from-json benchmarks/results/bench_gpu_h200.json --readme  # and README's table

Timing: CUDA events, 1 warm-up, then the median of N repeats (repeat until 1 s spent, 1 <= N <= 20);
a torch driver whose warm-up takes > 5 s is reported by that single call.
Quality (float64, max over the batch): recon = ||A - U diag(S) Vh||_F / ||A||_F,
orth = max(||U^T U - I||_F, ||Vh Vh^T - I||_F), s_err = max_i |s_i - s_ref_i| / s_ref_1 with
s_ref = torch.linalg.svdvals of the same input in float64 on the GPU.
Output: table (stdout), JSON + PNG plots in $OUT (if set) or benchmarks/results/ (bench_gpu<suffix>.json,
speedup_{small,big}<suffix>.png), and the run's section of RESULTS.md (device, versions, commit, date, command,
goals, table, links to the plots), written between its <!-- bench_gpu:begin --> / <!-- bench_gpu:end -->
markers by common.update_results_md, replacing the previous run's (--no-md: leave RESULTS.md alone).
On a machine whose working tree does not come back (a device run), fetch bench_gpu.json and the plots from
$OUT, copy them into benchmarks/results/ and write the section there with --from-json (no GPU needed).
--readme also rewrites README.md's results table (README_CASES' rows) and the line above it that names the
run, between their <!-- bench_gpu_readme_run / bench_gpu_readme_table --> markers; the prose around them is
the README's, written by hand from the same run.
"""

import argparse, json, math, os, statistics, sys, time

import torch

import common
from common import fmt

SMALL_SHAPES = [(8, 32), (16, 16), (32, 32), (32, 8)]
BIG_SQUARES = [(200, 64), (200, 100), (200, 128), (200, 256), (100, 512), (10, 1024), (1, 1536)]
F32, F64 = torch.float32, torch.float64
CASES = ([(b, m, n, F32) for b in (100, 500, 10000) for m, n in SMALL_SHAPES]
         + [(b, n, n, F32) for b, n in BIG_SQUARES] + [(100, 512, 64, F32), (1000, 128, 32, F32)]
         + [(10000, 32, 32, F64), (200, 128, 128, F64), (100, 512, 512, F64), (10, 1024, 1024, F64)]
         # issue 20: rotation fits, tall-skinny, float64
         + [(1000000, 3, 3, F32), (100000, 3, 3, F32), (300, 900, 100, F32), (1000, 1024, 16, F32),
            (37, 300, 77, F32), (64, 200, 200, F64), (1000, 1024, 16, F64), (100, 512, 64, F64),
            (1000, 128, 32, F64)])
QUICK = {"10000x32x32 float32", "500x16x16 float32", "200x128x128 float32", "200x256x256 float32",
         "100x512x512 float32", "200x128x128 float64"}
# issue 3 "Goals": minimum speed-up vs torch default (float32, same run)
GOALS = {"10000x32x32 float32": 5, "500x16x16 float32": 3, "200x128x128 float32": 100,
         "200x256x256 float32": 50, "100x512x512 float32": 30}
# issue 20 "Goals": ms of ours at most (H100, same run)
GOALS_MS = {"1000000x3x3 float32": 0.5, "100000x3x3 float32": 0.08, "300x900x100 float32": 4.0,
            "100x512x64 float32": 0.5, "1000x1024x16 float32": 0.45, "1000x128x32 float32": 0.5,
            "37x300x77 float32": 0.6, "10000x32x32 float32": 0.8, "500x16x16 float32": 0.08,
            "200x128x128 float64": 2.5, "64x200x200 float64": 7.0, "1000x1024x16 float64": 0.6,
            "100x512x64 float64": 0.7, "1000x128x32 float64": 0.8, "10000x32x32 float64": 2.0}
TORCH_METHODS = ["torch", "gesvdj", "gesvd", "gesvda"]
SLOW_MS = 5000.0  # torch driver warm-up above this: no repeats


def case_name(b, m, n, dtype):
    return f"{b}x{m}x{n} {str(dtype).replace('torch.', '')}"


def timed(fn):
    """One call timed with CUDA events: (ms, result)."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    out = fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end), out


def bench(fn, skip_repeats_above=None):
    """Warm-up + median of adaptive repeats: (median ms, repeats, warm-up ms, warm-up result)."""
    warm, out = timed(fn)
    if skip_repeats_above is not None and warm > skip_repeats_above:
        return warm, 0, warm, out
    times = []
    while not times or (sum(times) < 1000.0 and len(times) < 20):
        times.append(timed(fn)[0])
    return statistics.median(times), len(times), warm, out


@torch.no_grad()
def quality(A, U, S, Vh, S_ref):
    """Worst-case reconstruction, orthogonality and singular-value error in float64, chunked."""
    b, m, n = A.shape
    k = S.shape[-1]
    chunk = max(1, (1 << 28) // (8 * 4 * max(m, n) * max(m, n)))  # ~256 MB of float64 temporaries
    eye = torch.eye(k, dtype=F64, device=A.device)
    worst = {"recon": 0.0, "orth_u": 0.0, "orth_v": 0.0, "s_err": 0.0}
    for i in range(0, b, chunk):
        a, u, s, vh, sr = (t[i:i + chunk].to(F64) for t in (A, U, S, Vh, S_ref))
        an = torch.linalg.matrix_norm(a).clamp_min(1e-300)
        vals = {"recon": torch.linalg.matrix_norm(a - (u * s.unsqueeze(-2)) @ vh) / an,
                "orth_u": torch.linalg.matrix_norm(u.mT @ u - eye),
                "orth_v": torch.linalg.matrix_norm(vh @ vh.mT - eye),
                "s_err": (s - sr).abs().amax(-1) / sr[..., 0].clamp_min(1e-300)}
        for key, v in vals.items():  # NaN propagates through max()
            x = v.max().item()
            worst[key] = x if math.isnan(x) else max(worst[key], x)
    worst["orth"] = max(worst["orth_u"], worst["orth_v"])
    return worst


def run_case(jsvd, b, m, n, dtype, seed, skip=()):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    A = torch.randn(b, m, n, dtype=dtype, device="cuda", generator=gen)
    S_ref = torch.linalg.svdvals(A.to(F64))
    methods = {"ours": lambda: jsvd.svd(A, full_matrices=False),
               "torch": lambda: torch.linalg.svd(A, full_matrices=False)}
    for drv in TORCH_METHODS[1:]:
        if drv in skip:
            continue
        if drv == "gesvda" and m < n:
            continue  # gesvda: tall or square only
        methods[drv] = lambda drv=drv: torch.linalg.svd(A, full_matrices=False, driver=drv)
    row = {"case": case_name(b, m, n, dtype), "batch": b, "m": m, "n": n,
           "dtype": str(dtype).replace("torch.", ""), "methods": {}}
    for name, fn in methods.items():
        try:
            ms, reps, warm, (U, S, Vh) = bench(fn, None if name == "ours" else SLOW_MS)
            res = {"ms": ms, "repeats": reps, "warmup_ms": warm, **quality(A, U, S, Vh, S_ref)}
            del U, S, Vh
        except Exception as e:  # driver not applicable, out of memory, not converged, ...
            res = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"}
        torch.cuda.empty_cache()
        row["methods"][name] = res
    try:  # sweeps taken by our solver (info >= 0), and how many matrices did not converge
        info = jsvd.svd_ex(A, full_matrices=False)[3]
        row["sweeps_max"], row["not_converged"] = int(info.max()), int((info < 0).sum())
    except Exception as e:
        row["sweeps_error"] = str(e)[:200]
    if hasattr(jsvd, "plan"):
        try:
            # the whole batch's plan (a shape's plan depends on the batch), its first matrix
            plan = jsvd.plan([(m, n)] * b, dtype=dtype, device=A.device)
            plan["matrices"] = plan["matrices"][:1]
            row["plan"] = repr(plan)[:1000]
        except Exception as e:
            row["plan"] = f"error: {e}"[:200]
    mt = row["methods"]
    ours = mt["ours"].get("ms")
    if ours:
        if "ms" in mt["torch"]:
            row["speedup"] = mt["torch"]["ms"] / ours
        timed_torch = {k: mt[k]["ms"] for k in TORCH_METHODS if "ms" in mt.get(k, {})}
        if timed_torch:
            best = min(timed_torch, key=timed_torch.get)
            row["best_torch"], row["speedup_best"] = best, timed_torch[best] / ours
    return row


def vs_gesvda(row):
    """gesvda's time / ours (> 1: ours faster), or None where gesvda did not run (wide) or failed."""
    o, a = row["methods"]["ours"].get("ms"), row["methods"].get("gesvda", {}).get("ms")
    return a / o if o and a else None


def table(rows, md=False):
    head = ["case", "ours ms", "torch ms", "gesvda ms", "speed-up", "vs gesvda", "vs best (driver)", "ours recon",
            "ours orth", "torch recon", "torch orth", "gesvda recon", "gesvda orth", "sweeps"]
    body = []
    for r in rows:
        o, t, a = r["methods"]["ours"], r["methods"]["torch"], r["methods"].get("gesvda", {})
        best = f"{fmt(r.get('speedup_best'), '.2f')} ({r.get('best_torch', '-')})"
        body.append([r["case"], fmt(o.get("ms"), ".3f"), fmt(t.get("ms"), ".3f"), fmt(a.get("ms"), ".3f"),
                     fmt(r.get("speedup"), ".2f"), fmt(vs_gesvda(r), ".2f"), best, fmt(o.get("recon"), ".1e"),
                     fmt(o.get("orth"), ".1e"), fmt(t.get("recon"), ".1e"), fmt(t.get("orth"), ".1e"),
                     fmt(a.get("recon"), ".1e"), fmt(a.get("orth"), ".1e"), str(r.get("sweeps_max", "-"))])
    if md:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in body])
    w = [max(len(x) for x in col) for col in zip(head, *body)]
    return "\n".join("  ".join(c.rjust(wi) for c, wi in zip(line, w)) for line in [head] + body)


def goal_lines(rows):
    by = {r["case"]: r for r in rows}
    out = []
    for case, need in GOALS.items():
        got = by.get(case, {}).get("speedup")
        out.append(f"{case}: speed-up >= {need}x: {fmt(got, '.2f')}x "
                   f"{'(not run)' if got is None else 'MET' if got >= need else 'MISSED'}")
    for case, need in GOALS_MS.items():
        got = by.get(case, {}).get("methods", {}).get("ours", {}).get("ms")
        out.append(f"{case}: ours <= {need} ms (issue 20): {fmt(got, '.3f')} ms "
                   f"{'(not run)' if got is None else 'MET' if got <= need else 'MISSED'}")
    slower = [r["case"] for r in rows if r.get("speedup") is not None and r["speedup"] < 1]
    out.append("never slower than torch default: " + ("MET" if not slower else "MISSED on " + ", ".join(slower)))
    timed = [r for r in rows if vs_gesvda(r) is not None]
    behind = [f"{r['case']} ({vs_gesvda(r):.2f})" for r in timed if vs_gesvda(r) < 1]
    out.append(f"faster than gesvda on {len(timed) - len(behind)} of the {len(timed)} cases it ran"
               + (": slower on " + ", ".join(behind) if behind else ""))
    o = by.get("100x512x512 float32", {}).get("methods", {}).get("ours", {})
    if "recon" in o:
        ok = o["recon"] <= 5e-6 and o["orth"] <= 1e-4
        out.append(f"100x512x512 float32 accuracy: recon {o['recon']:.1e} (<= 5e-6), orth {o['orth']:.1e} "
                   f"(<= 1e-4): {'MET' if ok else 'MISSED'}")
    out += accuracy_goal_lines(rows)
    return out


# issue 20: U and V orthogonal to working precision, ||Q^T Q - I||_F <= 10 n eps, and better than gesvda's on
# every case (as orthogonal within ORTH_ROUNDING: both sides' factors are rounded to the working precision)
ORTH_ROUNDING = 1.05


def accuracy_goal_lines(rows):
    over, worse, worst = [], [], 0.0
    for r in rows:
        o, g = r["methods"]["ours"].get("orth"), r["methods"].get("gesvda", {}).get("orth")
        if o is None:
            continue
        units = o / (min(r["m"], r["n"]) * torch.finfo(getattr(torch, r["dtype"])).eps)
        worst = max(worst, units)
        if units > 10:
            over.append(f"{r['case']} ({units:.1f})")
        if g is not None and o > ORTH_ROUNDING * g:
            worse.append(f"{r['case']} ({o:.1e} against {g:.1e})")
    return [f"orth <= 10 n eps on every case (issue 20): at most {worst:.2f} n eps "
            + ("MET" if not over else "MISSED on " + ", ".join(over)),
            f"orth at most gesvda's (within {ORTH_ROUNDING}x) on every case it ran (issue 20): "
            + ("MET" if not worse else "MISSED on " + ", ".join(worse))]


def markdown(doc, plots=()):
    """The RESULTS.md section of one run (without its markers: common.update_results_md adds them).

    doc: the run's JSON document; plots: file names of its PNGs, linked from benchmarks/results/.
    """
    cuda = f", CUDA {doc['cuda']}" if doc.get("cuda") else ""
    lines = ["## GPU: torch_jsvd (W-cycle CUDA engine) vs torch.linalg.svd", "",
             f"- device: {doc['device']}, torch {doc['torch']}{cuda}",
             f"- date: {doc['date']}, torch_jsvd at git {doc['commit']}"
             + (f" (`benchmarks/results/{doc['json']}`)" if doc.get("json") else ""),
             f"- command: `{doc['command']}`",
             f"- all methods `full_matrices=False`, seed {doc.get('seed', 0)}; median of CUDA-event timings around "
             "one Python call (host time included);",
             "  speed-up = torch default / ours; vs gesvda = gesvda / ours (gesvda: tall or square only);",
             "  vs best = fastest timed torch driver / ours;",
             "  recon = max over the batch of ‖A − U diag(S) Vh‖_F/‖A‖_F, orth = max of ‖UᵀU − I‖_F and "
             "‖VhVhᵀ − I‖_F (float64)"]
    if doc.get("skipped"):
        lines.append(f"- not run (time budget spent): {', '.join(doc['skipped'])}")
    lines += ["", table(doc["rows"], md=True)]
    lines += ["", "Goals (issues 3 and 20):", ""] + [f"- {g}" for g in doc.get("goals", [])]
    lines += common.vs_previous_lines(doc)
    if plots:
        alt = {"small": "speed-up, small matrices (float32)", "big": "speed-up, large squares"}
        lines += [""] + [f"![{alt['small' if 'small' in p else 'big']}](results/{p})" for p in plots]
    return "\n".join(lines) + "\n"


# README.md's results table: these rows, in this order, where the run has them.
README_CASES = ["100x32x32 float32", "500x16x16 float32", "10000x32x32 float32", "1000000x3x3 float32",
                "100000x3x3 float32", "200x64x64 float32", "200x100x100 float32", "200x128x128 float32",
                "200x256x256 float32", "100x512x512 float32", "10x1024x1024 float32", "1x1536x1536 float32",
                "1000x128x32 float32", "100x512x64 float32", "300x900x100 float32", "37x300x77 float32",
                "1000x1024x16 float32", "10000x32x32 float64", "1000x1024x16 float64", "100x512x64 float64",
                "200x128x128 float64", "64x200x200 float64", "100x512x512 float64", "10x1024x1024 float64"]
README_MD = os.path.join(os.path.dirname(common.HERE), "README.md")


def readme_sections(doc):
    """README.md's two generated pieces from one run: the line naming it and the table of README_CASES."""
    cuda = f", CUDA {doc['cuda']}" if doc.get("cuda") else ""
    timed = {k for r in doc["rows"] for k in r["methods"]}
    left = [d for d in ("gesvd", "gesvdj", "gesvda") if d not in timed]
    run = (f"**GPU**: {doc['device']}, torch {doc['torch']}{cuda}; torch_jsvd at git {doc['commit']}, {doc['date']} "
           f"UTC (`{doc['command']}`, one run" + (f"; not timed: {', '.join(left)}" if left else "") + ").")

    def ms(r, k):
        m = r["methods"].get(k)
        return "-" if m is None else fmt(m.get("ms"), ".3f") if m.get("ms") is not None else "error"

    rows = {r["case"]: r for r in doc["rows"]}
    cells = [[c, ms(r, "ours"), ms(r, "torch"), ms(r, "gesvda"), fmt(r.get("speedup"), ".2f"),
              f"{fmt(r.get('speedup_best'), '.2f')} "
              f"({'default' if r.get('best_torch') == 'torch' else r.get('best_torch', '-')})"]
             for c in README_CASES if (r := rows.get(c))]
    head = ["case", "torch_jsvd ms", "torch default ms", "gesvda ms", "speed-up", "vs fastest (driver)"]
    return run, common.render_table(head, cells, md=True)


def write_readme(doc, path=README_MD):
    """Rewrite README.md's generated pieces (their markers must be there: never appended to the README)."""
    text = open(path).read()
    for key in ("bench_gpu_readme_run", "bench_gpu_readme_table"):
        if f"<!-- {key}:begin -->" not in text:
            sys.exit(f"bench_gpu.py: {path} has no <!-- {key}:begin --> marker")
    run, tab = readme_sections(doc)
    common.update_results_md("bench_gpu_readme_run", run, path=path)
    common.update_results_md("bench_gpu_readme_table", tab, path=path)
    print(f"updated the results table of {path}")


def write_md(doc, plots, path):
    common.update_results_md("bench_gpu", markdown(doc, plots), path=path)
    print(f"updated the bench_gpu section of {path}")


def from_json(path, results_md, readme=False):
    """Rewrite the RESULTS.md section from a saved run (bench_gpu<suffix>.json; plots beside it, same suffix)."""
    with open(path) as f:
        doc = json.load(f)
    name = os.path.basename(path)
    # (a run merged from parts: its file's name, and the goals and left-out cases of all its rows)
    doc["json"] = name
    doc["goals"] = goal_lines(doc["rows"])
    ran = {r["case"] for r in doc["rows"]}
    doc["skipped"] = [c for c in doc.get("skipped", []) if c not in ran]
    suffix = os.path.splitext(name)[0][len("bench_gpu"):] if name.startswith("bench_gpu") else ""
    here = os.path.dirname(os.path.abspath(path))
    plot(doc["rows"], here, suffix, doc["device"])  # (redrawn from the saved rows: needs no GPU)
    plots = [p for p in (f"speedup_small{suffix}.png", f"speedup_big{suffix}.png")
             if os.path.exists(os.path.join(here, p))]
    write_md(doc, plots, results_md)
    if readme:
        write_readme(doc)


def plot(rows, outdir, suffix="", device=None):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plots")
        return []
    files = []
    small = [f"{m}x{n}" for m, n in SMALL_SHAPES]
    for kind, title in (("small", "small matrices (float32)"), ("big", "large squares")):
        fname = f"speedup_{kind}.png"
        fig, ax = plt.subplots(figsize=(7, 4.5))
        series = {}
        for r in rows:
            if "speedup" not in r:
                continue
            if fname == "speedup_small.png" and f"{r['m']}x{r['n']}" in small and r["dtype"] == "float32":
                series.setdefault((r["batch"], r["dtype"]), []).append((small.index(f"{r['m']}x{r['n']}"), r["speedup"]))
            elif fname == "speedup_big.png" and r["m"] == r["n"] and r["n"] >= 64:
                series.setdefault((r["batch"], r["dtype"]), []).append((r["n"], r["speedup"]))
        for (b, dt), pts in sorted(series.items()):
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], "o-" if dt == "float32" else "s--",
                    label=f"batch {b}" + ("" if dt == "float32" else f" {dt}"))
        ax.axhline(1.0, color="gray", lw=0.8)
        if fname == "speedup_small.png":
            ax.set_xticks(range(len(small)), small)
            ax.set_xlabel("matrix size m x n")
        else:
            ax.set_xscale("log")
            sizes = [n for _, n in BIG_SQUARES]
            ax.set_xticks(sizes, [str(n) for n in sizes])
            ax.minorticks_off()
            ax.set_xlabel("matrix size n (n x n)")
        ax.set_yscale("log")
        ax.set_ylabel("speed-up vs torch.linalg.svd (default)")
        ax.set_title(f"torch_jsvd speed-up, {title}, {device or torch.cuda.get_device_name()}", fontsize=9)
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
        fig.tight_layout()
        path = os.path.join(outdir, f"speedup_{kind}{suffix}.png")
        fig.savefig(path, dpi=120)
        plt.close(fig)
        files.append(path)
    return files


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="run the goal cases only")
    p.add_argument("--cases", help="comma-separated substrings; run cases whose name contains one (e.g. 512,float64)")
    p.add_argument("--budget-s", type=float, default=400.0, help="start no new case after this many seconds")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip", default="gesvd",
                   help="comma-separated torch drivers not to time (default gesvd: never the fastest, it took 308 of a "
                        "420 s run on the H100 at 58c9cbe; --skip '' times every driver)")
    p.add_argument("--suffix", default="", help="appended to the output files' names (e.g. _h100: bench_gpu_h100.json)")
    p.add_argument("--results-md", default=common.RESULTS_MD,
                   help="file whose bench_gpu section (between its markers) is replaced by this run's (default: %(default)s)")
    p.add_argument("--no-md", action="store_true", help="do not touch RESULTS.md")
    p.add_argument("--from-json", metavar="PATH",
                   help="no benchmark: write the RESULTS.md section of the run saved in PATH (needs no GPU)")
    p.add_argument("--readme", action="store_true", help="also rewrite README.md's results table from the run")
    args = p.parse_args()
    if args.from_json:
        return from_json(args.from_json, args.results_md, args.readme)
    if not torch.cuda.is_available():
        sys.exit("bench_gpu.py: no CUDA device available")
    import torch_jsvd

    cases = [c for c in CASES if not args.quick or case_name(*c) in QUICK]
    if args.cases:
        keys = [s.strip() for s in args.cases.split(",") if s.strip()]
        cases = [c for c in cases if any(k in case_name(*c) for k in keys)]
    meta = common.meta(torch.cuda.get_device_name())
    print(f"device: {meta['device']}\ntorch {meta['torch']} (CUDA {meta['cuda']}), torch_jsvd "
          f"{getattr(torch_jsvd, '__version__', '?')} {meta['commit']}\nseed {args.seed}; full_matrices=False for all "
          f"methods; {len(cases)} cases, budget {args.budget_s:.0f} s")
    x = torch.randn(2, 8, 8, device="cuda")  # create cuSOLVER/cuBLAS handles outside the timings
    for drv in (None, "gesvdj", "gesvd", "gesvda"):
        torch.linalg.svd(x, full_matrices=False, driver=drv)
    torch_jsvd.svd(x, full_matrices=False)
    torch.cuda.synchronize()

    rows, skipped, t0 = [], [], time.time()
    for b, m, n, dtype in cases:
        name = case_name(b, m, n, dtype)
        if time.time() - t0 > args.budget_s:
            skipped.append(name)
            continue
        tc = time.time()
        row = run_case(torch_jsvd, b, m, n, dtype, args.seed, skip=[d for d in args.skip.split(",") if d])
        rows.append(row)
        times = "  ".join(f"{k} {v['ms']:.3f}" if "ms" in v else f"{k} error" for k, v in row["methods"].items())
        print(f"[{time.time() - t0:6.1f} s] {name:22s} ms: {times}  speed-up {fmt(row.get('speedup'), '.2f')} "
              f"({time.time() - tc:.1f} s)", flush=True)
        for k, v in row["methods"].items():
            if "error" in v and k != "gesvda":
                print(f"    {k}: {v['error']}")
    if skipped:
        print(f"budget of {args.budget_s:.0f} s spent: skipped {', '.join(skipped)}")

    outdir = os.environ.get("OUT") or os.path.join(common.HERE, "results")
    os.makedirs(outdir, exist_ok=True)
    doc = {**meta, "json": f"bench_gpu{args.suffix}.json", "seed": args.seed, "full_matrices": False,
           "goals": goal_lines(rows), "skipped": skipped, "rows": rows}
    doc["vs_previous"] = common.vs_previous("bench_gpu", doc)
    print("\n".join(common.vs_previous_lines(doc)))
    path = os.path.join(outdir, doc["json"])
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {path}")
    plots = plot(rows, outdir, args.suffix)
    for fpath in plots:
        print(f"wrote {fpath}")
    if not args.no_md:
        write_md(doc, [os.path.basename(f) for f in plots], args.results_md)
    if args.readme:
        write_readme(doc)
    print("\nfull_matrices=False; times: median ms (CUDA events); speed-up = torch default / ours; "
          "vs best = fastest torch driver / ours; recon, orth: max over batch (float64)")
    print("\n".join(doc["goals"]))
    print(table(rows))


if __name__ == "__main__":
    main()
