"""Variable-size lists (issue 21): torch_jsvd.svd_varlen against a loop of torch.linalg.svd, same run.

Each list has `count` matrices whose rows and columns are drawn independently and uniformly from [lo, hi]
(seed 0; tall and wide mixed): issue 21's three lists, and lists in the style of the W-cycle paper's Table VI
(its SuiteSparse groups "m, n <= X" with its batch sizes, here random sides in (X/2, X], since SuiteSparse is
not at hand offline); and two H-matrix-like lists: levels of low-rank blocks, one shape a level (count x m x n),
shuffled (a list's shapes shared by >= 32 members are solved as uniform batches: csrc/core.h, list_shape_groups).

    python benchmarks/bench_varlen.py                  # every list (stops starting lists after --budget-s)
    python benchmarks/bench_varlen.py --cases 300x     # lists whose name contains a substring
    python benchmarks/bench_varlen.py --from-json benchmarks/results/bench_varlen.json   # RESULTS.md from a run

Methods, float32, full_matrices=False, each the median wall time of one Python call (synchronised):
- ours: one torch_jsvd.svd_varlen call on the list.
- nested: one torch_jsvd.svd_varlen call on the same matrices as a (strided) torch.nested tensor, built
  beforehand: solved in place by jsvd.svd_varlen_packed, results nested views, no tensor a matrix.
- loop: torch.linalg.svd (its default driver) on each matrix in a Python loop.
- uniform: the sum, over the list's distinct shapes, of torch_jsvd.svd on a uniform batch of the members of
  that shape (one call each, after a warm-up call of each): what the list costs as separate uniform batches.
- similar: one torch_jsvd.svd call on a uniform batch of `count` matrices of the list's mean shape (the
  issue's "uniform batch of similar work").
recon and orth (max over the list, units of max(m, n) eps): ‖A − U diag(S) Vh‖_F/‖A‖_F and max of ‖UᵀU − I‖_F,
‖VhVhᵀ − I‖_F, in float64 on the device. host_us_per_matrix: the CPU time of the svd_varlen op, less its
waits for the device (CUDA synchronisations and device-to-host copies, torch.profiler) and the profiler's own
"Activity Buffer Request", over the count, median of three calls;
nested_host_us_per_matrix: the same for the nested call (its op, jsvd::svd_varlen_packed, and the Python
around it: the whole call's CPU time less the waits); host_floor_us_per_matrix: torch's own host time for three
tensors a matrix (unbind) on the same host, which tells the host's speed apart from the op's (host_cpu: its model).
Output: table, bench_varlen.json + varlen.png in $OUT or benchmarks/results/, and RESULTS.md's bench_varlen section.
"""

import json, os, statistics, sys, time
from collections import Counter

import torch

import common
from common import fmt

LISTS = [(2000, 4, 64), (300, 16, 256), (40, 100, 600),
         (46, 17, 32), (85, 33, 64), (156, 65, 128), (243, 129, 256),
         # H-matrix-like: levels of low-rank blocks, one shape a level, in random order
         ("hmatrix", ((1000, 256, 16), (300, 512, 64), (100, 900, 100))),
         ("hmatrix", ((2000, 64, 16), (500, 128, 32), (200, 256, 64))),
         # (last: its loop and its 457 uniform shapes took ~310 s of a 349 s run on the H200, stop 87, which
         # left the budget no time for the rows after it)
         (458, 257, 512)]
GOALS = {"varlen 2000x[4,64]": 2.0, "varlen 300x[16,256]": 15.0, "varlen 40x[100,600]": 15.0}


def case_name(count, lo, hi=None):
    if count == "hmatrix":  # (count, m, n) levels
        return "varlen hmatrix " + "+".join(f"{c}x{m}x{n}" for c, m, n in lo)
    return f"varlen {count}x[{lo},{hi}]"


def make_list(count, lo, hi=None, seed=0):
    g = torch.Generator().manual_seed(seed)
    if count == "hmatrix":
        shapes = [(m, n) for c, m, n in lo for _ in range(c)]
        shapes = [shapes[i] for i in torch.randperm(len(shapes), generator=g).tolist()]
    else:
        shapes = torch.randint(lo, hi + 1, (count, 2), generator=g).tolist()
    gd = torch.Generator(device="cuda").manual_seed(seed)
    return [torch.randn(m, n, device="cuda", generator=gd) for m, n in shapes]


def list_accuracy(As, U, S, Vh):
    """(recon, orth) of a list's factors, max over it, in units of max(m, n) eps (float64, on the device)."""
    recon = orth = 0.0
    for A, u, s, vh in zip(As, U, S, Vh):
        unit = max(A.shape) * torch.finfo(A.dtype).eps
        A, u, s, vh = (t.double() for t in (A, u, s, vh))
        na = torch.linalg.matrix_norm(A).item() or 1.0
        recon = max(recon, torch.linalg.matrix_norm(A - (u * s) @ vh).item() / na / unit)
        for X in (u, vh.mT):
            eye = torch.eye(X.shape[-1], dtype=X.dtype, device=X.device)
            orth = max(orth, torch.linalg.matrix_norm(X.mT @ X - eye).item() / unit)
    return recon, orth


def host_us_per_matrix(torch_jsvd, As, count, op_name="jsvd::svd_varlen", reps=3):
    """CPU time of one svd_varlen op (op_name None: the whole call) less its waits for the device, per matrix
    (microseconds): the median of `reps` profiled calls after a profiled warm-up call (one profiled call alone
    moved by 1.4x between two runs of the same list code: 2.36 and 3.25 us at 2000x[4,64], docs/experiments.md,
    stop 82)."""
    from torch.profiler import ProfilerActivity, profile, record_function
    samples = []
    for _ in range(reps + 1):
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as p:
            with record_function("whole call"):
                torch_jsvd.svd_varlen(As)
        ev = p.events()
        op = [e for e in ev if e.name == (op_name or "whole call")]
        if not op:
            return None
        t0, t1 = op[0].time_range.start, op[0].time_range.end
        # (and the profiler's own buffer allocation at its first CUDA activity, ~2 ms inside the op: stop 57)
        waits = sum(e.time_range.end - e.time_range.start for e in ev
                    if ("Synchronize" in e.name
                        or e.name in ("cudaMemcpyAsync", "cudaMemcpy", "Activity Buffer Request"))
                    and t0 <= e.time_range.start and e.time_range.end <= t1)
        samples.append((t1 - t0 - waits) / count)
    return statistics.median(samples[1:])


def host_floor_us_per_matrix(count, reps=5):
    """torch's own host time for what a list's results are, three tensors a matrix, on this host: three
    unbind calls on (count, 2, 2) CUDA tensors (no device work), us a matrix, median of `reps` after a
    warm-up. The same list's host time moved from 1.4-1.8 to 2.7-3.0 us a matrix between two H200 machines
    of one session (docs/experiments.md, stop 83): the host's speed, which this floor measured beside it
    tells apart."""
    x = torch.empty(count, 3, 2, 2, device="cuda")
    ms, _ = common.time_ms(lambda: (x[:, 0].unbind(), x[:, 1].unbind(), x[:, 2].unbind()), "cpu",
                           min_time=float("inf"), max_repeat=reps)
    return ms * 1e3 / count


def host_cpu():
    """The host's CPU model (Linux's /proc/cpuinfo), or None."""
    try:
        with open("/proc/cpuinfo") as f:
            return next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        return None


def uniform_ms(torch_jsvd, As):
    """Sum over distinct shapes of one torch_jsvd.svd call on the uniform batch of that shape's members."""
    groups = {}
    for A in As:
        groups.setdefault(tuple(A.shape), []).append(A)
    batches = [torch.stack(g) for g in groups.values()]
    for B in batches:  # warm-up (first-call work of each shape)
        torch_jsvd.svd(B, full_matrices=False)
    torch.cuda.synchronize()
    total = 0.0
    for B in batches:
        t0 = time.perf_counter()
        torch_jsvd.svd(B, full_matrices=False)
        torch.cuda.synchronize()
        total += time.perf_counter() - t0
    return total * 1e3, len(batches)


def run_list(torch_jsvd, count, lo, hi=None):
    As = make_list(count, lo, hi)
    if count == "hmatrix":
        count = len(As)
        row = {"case": case_name("hmatrix", lo), "batch": count, "m": max(m for _, m, _ in lo),
               "n": max(n for _, _, n in lo), "levels_spec": [list(x) for x in lo], "dtype": "float32", "methods": {}}
    else:
        row = {"case": case_name(count, lo, hi), "batch": count, "m": hi, "n": hi, "sides": [lo, hi],
               "dtype": "float32", "methods": {}}
    ms, out = common.time_ms(lambda: torch_jsvd.svd_varlen(As), "cuda")
    recon, orth = list_accuracy(As, *out)
    row["methods"]["ours"] = {"ms": ms, "recon": recon, "orth": orth}
    nt = torch.nested.nested_tensor(As, layout=torch.strided)
    ms, out = common.time_ms(lambda: torch_jsvd.svd_varlen(nt), "cuda")
    recon, orth = list_accuracy(As, *(t.unbind() for t in out))
    row["methods"]["nested"] = {"ms": ms, "recon": recon, "orth": orth}
    ms, out = common.time_ms(lambda: [torch.linalg.svd(A, full_matrices=False) for A in As], "cuda", max_repeat=3)
    recon, orth = list_accuracy(As, *zip(*out))
    row["methods"]["loop"] = {"ms": ms, "recon": recon, "orth": orth}
    ms, distinct = uniform_ms(torch_jsvd, As)
    row["methods"]["uniform"] = {"ms": ms, "shapes": distinct}
    mean = tuple(round(sum(A.shape[i] for A in As) / count) for i in (0, 1))
    B = torch.randn(count, *mean, device="cuda", generator=torch.Generator(device="cuda").manual_seed(1))
    ms, _ = common.time_ms(lambda: torch_jsvd.svd(B, full_matrices=False), "cuda")
    row["methods"]["similar"] = {"ms": ms, "shape": list(mean)}
    row["host_us_per_matrix"] = host_us_per_matrix(torch_jsvd, As, count)
    row["nested_host_us_per_matrix"] = host_us_per_matrix(torch_jsvd, nt, count, None)
    row["host_floor_us_per_matrix"] = host_floor_us_per_matrix(count)
    row["levels"] = dict(Counter(m["levels"][0]["kernel"] for m in
                                 torch_jsvd.plan([tuple(A.shape) for A in As])["matrices"] if m["levels"]))
    return row


def table(rows, md=False):
    head = ["list", "ours ms", "nested ms", "loop ms", "speed-up", "uniform ms", "ours/uniform", "similar ms", "ours/similar",
            "host us/matrix", "nested host us/matrix", "recon ours", "orth ours", "orth loop", "levels"]
    out = []
    for r in rows:
        o, lp, u, s = (r["methods"][k] for k in ("ours", "loop", "uniform", "similar"))
        nested = r["methods"].get("nested", {}).get("ms")
        out.append([r["case"], fmt(o["ms"], ".2f"), fmt(nested, ".2f"), fmt(lp["ms"], ".1f"), fmt(lp["ms"] / o["ms"], ".0f") + "x",
                    fmt(u["ms"], ".1f") + f" ({u['shapes']})", fmt(o["ms"] / u["ms"], ".2f"),
                    fmt(s["ms"], ".2f") + f" ({s['shape'][0]}x{s['shape'][1]})", fmt(o["ms"] / s["ms"], ".2f"),
                    fmt(r.get("host_us_per_matrix"), ".2f"), fmt(r.get("nested_host_us_per_matrix"), ".2f"),
                    fmt(o["recon"], ".2f"), fmt(o["orth"], ".2f"),
                    fmt(lp["orth"], ".2f"), ", ".join(f"{k} {v}" for k, v in sorted(r["levels"].items()))])
    return common.render_table(head, out, md)


def goal_lines(rows):
    out = common.ms_goal_lines(rows, GOALS, ".2f")
    by = {r["case"]: r for r in rows}
    for case, ms in GOALS.items():  # the same lists as nested tensors
        got = by.get(case, {}).get("methods", {}).get("nested", {}).get("ms")
        if got is not None:
            out.append(f"{case} as a nested tensor <= {ms} ms: {got:.2f} ms " + ("MET" if got <= ms else "MISSED"))
    for r in rows:
        # (an H-matrix list's reference: the uniform batches of its few shapes; a random list's, one uniform
        # batch of its mean shape, since its hundreds of shapes' batches cost mostly calls)
        ref = "uniform" if r["case"].startswith("varlen hmatrix") else "similar"
        verdicts = []
        for key, what in (("ours", "list"), ("nested", "nested tensor")):
            if key in r["methods"]:
                ratio = r["methods"][key]["ms"] / r["methods"][ref]["ms"]
                verdicts.append(f"{what} {ratio:.2f}x " + ("MET" if ratio <= 1.5 else "MISSED"))
        what_ref = "the uniform batches of its shapes" if ref == "uniform" else "a uniform batch of similar work"
        out.append(f"{r['case']} within 1.5x of {what_ref}: " + ", ".join(verdicts))
    # (per matrix on lists of >= 1000: on a list of 40 the quotient is the call's fixed cost, not a matrix's)
    for r in (r for r in rows if r["batch"] >= 1000):
        for key, what, m in (("host_us_per_matrix", "list", "ours"),
                             ("nested_host_us_per_matrix", "nested tensor", "nested")):
            host = r.get(key)
            if host is not None:
                # (the unprofiled call's wall time a matrix, the device's work included: an upper bound on its
                # host time)
                wall = r["methods"][m]["ms"] * 1e3 / r["batch"] if m in r["methods"] else None
                floor = r.get("host_floor_us_per_matrix")
                notes = ["profiled"]
                if wall:
                    notes.append(f"the unprofiled call's wall time a matrix: {wall:.2f} us")
                if floor is not None:
                    notes.append(f"torch's own three tensors a matrix by unbind on this host: {floor:.2f} us")
                out.append(f"host time per matrix <= 2 us ({r['case']}, {what}): {host:.2f} us "
                           + ("MET" if host <= 2 else "MISSED") + " (" + "; ".join(notes) + ")")
    return out


def markdown(doc):
    note = ("- float32, `full_matrices=False`, sides uniform in [lo, hi] (seed 0); the last five lists follow the W-cycle "
            "paper's Table VI groups (its batch sizes, sides in (X/2, X]); hmatrix = levels of one shape each (count x m x n), "
            "shuffled, whose shapes are solved as uniform batches; median wall time of one call; nested = the "
            "same matrices as one strided torch.nested tensor (built beforehand), whose host time is the whole call's; loop = "
            "torch.linalg.svd per matrix; uniform = sum over distinct shapes (count in brackets) of one torch_jsvd.svd "
            "of that shape's members; similar = one uniform batch of the list's mean shape; recon / orth in units of "
            "max(m, n) eps, max over the list; levels = the first level of each matrix's plan (benchmarks/bench_varlen.py)")
    return common.section("## GPU, variable-size lists (issue 21): torch_jsvd.svd_varlen vs a loop of torch.linalg.svd", doc, note,
                          table(doc["rows"], md=True), "Goals (issue 21, set for the H100; same run, on the device above):", "variable-size lists")


def plot(rows, outdir, device):
    plt = common.pyplot()
    if plt is None:
        return None
    names = [r["case"].replace("varlen ", "").replace("hmatrix ", "").replace("+", "+\n") for r in rows]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    width = 0.2
    for i, (k, color) in enumerate([("ours", "tab:green"), ("similar", "tab:olive"), ("uniform", "tab:blue"),
                                    ("loop", "tab:red")]):
        ax.bar([x + (i - 1.5) * width for x in range(len(rows))], [r["methods"][k]["ms"] for r in rows], width,
               label=k, color=color)
    ax.set_xticks(range(len(rows)), names, fontsize=7, rotation=30, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("ms (log)")
    ax.legend(fontsize=8)
    ax.set_title(f"variable-size lists, float32, {device}", fontsize=9)
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "varlen.png"), dpi=120)
    plt.close(fig)
    return "varlen.png"


def main():
    args = common.bench_parser(__doc__.splitlines()[0], 300.0).parse_args()
    if args.from_json:
        with open(args.from_json) as f:
            doc = json.load(f)
        doc["goals"] = goal_lines(doc["rows"])  # (the goals are a function of the rows)
        return common.update_results_md("bench_varlen", markdown(doc))
    if not torch.cuda.is_available():
        sys.exit("bench_varlen.py: no CUDA device available")
    import torch_jsvd
    lists = common.select_cases(LISTS, case_name, args.cases)
    meta = common.meta(torch.cuda.get_device_name(), host_cpu=host_cpu())
    print(f"device: {meta['device']}, torch {meta['torch']}, torch_jsvd {meta['commit']}; {len(lists)} lists")
    rows = common.run_cases(lists, case_name, args.budget_s, lambda *c: run_list(torch_jsvd, *c), table)
    outdir = common.results_dir()
    doc = {**meta, "json": "bench_varlen.json", "rows": rows, "goals": goal_lines(rows),
           "command": common.command("bench_varlen.py", args)}
    doc["plot"] = plot(rows, outdir, meta["device"])
    common.save_run("bench_varlen", doc, outdir, markdown, table(rows), args.no_md)


if __name__ == "__main__":
    main()
