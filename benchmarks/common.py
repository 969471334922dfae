"""Shared pieces of the benchmark scripts: run metadata, timing, accuracy, RESULTS.md sections."""

import datetime
import os
import re
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS_MD = os.path.join(HERE, "RESULTS.md")


def git_rev():
    """Short commit of the tree, '+dirty' if tracked files differ from it.

    JSVD_COMMIT overrides it: the GPU machine gets a copy of the working tree whose git metadata can be
    stale, so scripts/gpu_check.sh passes the commit it was called at.
    """
    if os.environ.get("JSVD_COMMIT"):
        return os.environ["JSVD_COMMIT"]
    try:
        root = os.path.dirname(HERE)
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True).stdout.strip()
        return rev + ("+dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def meta(device_name, **extra):
    """What every result file records: device, versions, commit, date and the command line."""
    return dict(device=device_name, torch=torch.__version__, cuda=torch.version.cuda, commit=git_rev(),
                date=datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
                command="python " + " ".join([os.path.relpath(sys.argv[0])] + sys.argv[1:]), **extra)


def time_ms(fn, device, min_time=0.2, max_repeat=20):
    """Median wall time of fn() in ms after one warm-up (CUDA: synchronised), and its last result."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    out = fn()
    sync()
    times = []
    while len(times) < 3 or (len(times) < max_repeat and sum(times) < min_time):
        t0 = time.perf_counter()
        out = fn()
        sync()
        times.append(time.perf_counter() - t0)
    times.sort()
    return times[len(times) // 2] * 1e3, out


def accuracy(A, U, S, Vh):
    """(recon, orth_u, orth_v) in float64, max over the batch; each in units of max(m, n) eps of A's dtype.

    recon = ||A - U diag(S) Vh||_F / ||A||_F, orth = ||X^T X - I||_F.
    """
    m, n = A.shape[-2:]
    unit = max(m, n, 1) * torch.finfo(A.dtype).eps
    A, U, S, Vh = (t.double().cpu() for t in (A, U, S, Vh))
    scale = A.abs().amax((-2, -1), keepdim=True).clamp_min(torch.finfo(torch.float64).tiny)
    A, S = A / scale, S / scale[..., 0]
    nA = torch.linalg.matrix_norm(A).clamp_min(torch.finfo(torch.float64).tiny)
    recon = (torch.linalg.matrix_norm(A - (U * S.unsqueeze(-2)) @ Vh) / nA).max().item()

    def orth(X):
        k = X.shape[-1]
        return torch.linalg.matrix_norm(X.mT @ X - torch.eye(k, dtype=X.dtype)).max().item()

    return recon / unit, orth(U) / unit, orth(Vh.mT) / unit


def update_results_md(key, section, path=RESULTS_MD):
    """Replace the text between <!-- key:begin --> and <!-- key:end --> (append both if absent)."""
    begin, end = f"<!-- {key}:begin -->", f"<!-- {key}:end -->"
    body = f"{begin}\n{section.rstrip()}\n{end}\n"
    text = open(path).read() if os.path.exists(path) else "# Benchmark results\n\n"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end) + "\n?", re.S)
    text = pattern.sub(lambda _: body, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + body
    with open(path, "w") as f:
        f.write(text)


def render_table(head, cells, md=False):
    """A table of strings: Markdown (RESULTS.md) or aligned text columns (the console)."""
    if md:
        return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
                         + ["| " + " | ".join(c) + " |" for c in cells])
    w = [max(len(x[i]) for x in cells + [head]) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(x)) for x in [head] + cells)


def bench_parser(description, budget_s):
    """The options every GPU benchmark takes: --cases, --budget-s, --no-md, --from-json."""
    import argparse
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--cases", help="comma-separated substrings of case names")
    p.add_argument("--budget-s", type=float, default=budget_s, help="start no new case after this many seconds")
    p.add_argument("--no-md", action="store_true", help="do not touch RESULTS.md")
    p.add_argument("--from-json", metavar="PATH", help="no benchmark: RESULTS.md's section from a saved run")
    return p


def fmt(x, spec):
    """x formatted by spec, or "-" for None (a value a case did not produce)."""
    return "-" if x is None else format(x, spec)


def command(script, args):
    """The command line of a benchmark run, as RESULTS.md shows it."""
    return f"python benchmarks/{script}" + (f" --cases {args.cases}" if args.cases else "")


def run_cases(cases, name, budget_s, run, table, after=None):
    """run(*case) for each case, starting none after budget_s seconds (those are reported not run); prints each
    row as table's line, calls after(rows) after each; returns the rows."""
    rows, t0 = [], time.time()
    for c in cases:
        if time.time() - t0 > budget_s:
            print(f"budget spent: {name(*c)} not run")
            continue
        rows.append(run(*c))
        print(f"[{time.time() - t0:6.1f} s] " + table(rows[-1:]).splitlines()[1], flush=True)
        if after is not None:
            after(rows)
    return rows


def ms_goal_lines(rows, goals, spec):
    """For each case: ms goal of `goals`, whether ours (methods.ours.ms) met it, or "(not run)"."""
    by = {r["case"]: r for r in rows}
    out = []
    for case, ms in goals.items():
        got = by.get(case, {}).get("methods", {}).get("ours", {}).get("ms")
        out.append(f"{case} <= {ms} ms: {fmt(got, spec)} ms " + ("(not run)" if got is None else "MET" if got <= ms else "MISSED"))
    return out


def select_cases(cases, name, spec):
    """The cases whose name(*case) contains one of the comma-separated substrings of spec (all if none)."""
    keys = [s.strip() for s in (spec or "").split(",") if s.strip()]
    return [c for c in cases if not keys or any(k in name(*c) for k in keys)]


def pyplot():
    """matplotlib.pyplot on the Agg backend, or None where matplotlib is not installed (no plot then)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt



def section(title, doc, note, table_md, goals_heading, plot_alt=None):
    """A RESULTS.md section: title; device, date and commit, command; the note on method; the table; the
    goals (doc["goals"]); the plot (doc["plot"]), if any."""
    host = f", host CPU {doc['host_cpu']}" if doc.get("host_cpu") else ""
    lines = [title, "", f"- device: {doc['device']}{host}, torch {doc['torch']}, CUDA {doc.get('cuda')}",
             f"- date: {doc['date']}, torch_jsvd at git {doc['commit']} (`benchmarks/results/{doc['json']}`)",
             f"- command: `{doc['command']}`", note, "", table_md, "", goals_heading, ""]
    lines += [f"- {g}" for g in doc["goals"]] + vs_previous_lines(doc)
    if plot_alt and doc.get("plot"):
        lines += ["", f"![{plot_alt}](results/{doc['plot']})"]
    return "\n".join(lines) + "\n"


def results_dir():
    """Where a benchmark writes its JSON and plot: $OUT (the GPU machine's outputs) or benchmarks/results/."""
    d = os.environ.get("OUT") or os.path.join(HERE, "results")
    os.makedirs(d, exist_ok=True)
    return d


# A case whose ours ms moved by this factor against the previous run is listed in the run's section: a
# route change that slows a shape it was not meant for shows in the next run of the benchmark (stop 62: a
# rule for long tall batches had sent 1x4096² through the QR path, 180 -> 277 ms, unnoticed for two stops).
SLOWER, FASTER = 1.25, 0.8


def vs_previous(key, doc):
    """The run against the newest tracked run of the same benchmark (benchmarks/results/<key>*.json), on the
    same device where there is one: {device, commit, date, slower: [(case, old ms, new ms)], faster: [...]},
    or None. Read before a device run's results replace those files, and kept in the run's JSON."""
    import glob, json
    runs = []
    for path in glob.glob(os.path.join(HERE, "results", key + "*.json")):
        try:
            with open(path) as f:
                old = json.load(f)
            runs.append((old.get("device") == doc.get("device"), old.get("date", ""), old))
        except (OSError, ValueError):
            continue
    runs = [r for r in runs if r[2].get("rows") and r[2].get("date") != doc.get("date")]
    if not runs:
        return None
    old = max(runs, key=lambda r: (r[0], r[1]))[2]
    ms = lambda r: r.get("methods", {}).get("ours", {}).get("ms")
    before = {r.get("case"): ms(r) for r in old["rows"]}
    out = dict(device=old.get("device"), commit=old.get("commit"), date=old.get("date"), slower=[], faster=[])
    for r in doc["rows"]:
        a, b = before.get(r.get("case")), ms(r)
        if a and b:
            if b >= SLOWER * a:
                out["slower"].append((r["case"], a, b))
            elif b <= FASTER * a:
                out["faster"].append((r["case"], a, b))
    return out


def vs_previous_lines(doc):
    """RESULTS.md lines for doc["vs_previous"] (none where the run has no previous one)."""
    v = doc.get("vs_previous")
    if not v:
        return []
    at = f"against the previous run ({v['device']}, {v['commit']}, {v['date']})"
    lists = [(f"ours slower by {SLOWER}x or more", v["slower"]), (f"ours faster by {1 / FASTER:.2g}x or more", v["faster"])]
    return [f"- {at}, {what}: " + ("; ".join(f"{c} {a:.3g} -> {b:.3g} ms" for c, a, b in rows) if rows else "none")
            for what, rows in lists]


def save_run(key, doc, outdir, markdown, text_table, no_md=False):
    """doc as outdir/doc["json"], with its comparison to the previous run (vs_previous); the table and goals on
    the console; RESULTS.md's `key` section (unless no_md)."""
    import json
    doc["vs_previous"] = vs_previous(key, doc)
    with open(os.path.join(outdir, doc["json"]), "w") as f:
        json.dump(doc, f, indent=1)
    print(text_table)
    print("\n".join(doc["goals"] + vs_previous_lines(doc)))
    if not no_md:
        update_results_md(key, markdown(doc))
