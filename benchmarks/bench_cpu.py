"""CPU benchmark: the Jacobi CPU engine (torch_jsvd.svd) vs torch.linalg.svd (LAPACK) in one run.

    python benchmarks/bench_cpu.py                    # all cases, writes JSON and updates RESULTS.md
    python benchmarks/bench_cpu.py --cases 512 --no-md

Both use every core (torch.set_num_threads(os.cpu_count())) and full_matrices=False
on the same seeded inputs. Timing: 1 warm-up, then the best of N runs (repeated until --min-time-s is
spent, --min-repeat <= N <= --max-repeat): the minimum is the figure least disturbed by
other work on a shared machine.
Quality (float64, max over the batch): recon = ||A - U diag(S) Vh||_F / ||A||_F,
s_err = max_i |s_i - s_ref_i| / s_ref_1 with s_ref = torch.linalg.svdvals in float64.
ratio = torch time / torch_jsvd time (> 1: torch_jsvd is faster).
Issue 2 goal: ratio >= 1 on the batched small cases, >= 1/3 on 1x512x512.
"""

import argparse
import json
import os
import time

import torch

import common
import torch_jsvd
from torch_jsvd._device import cpu_name

CASES = [(1000, 8, 8), (1000, 32, 32), (100, 128, 128), (1, 128, 128), (4, 96, 96), (1, 512, 512), (1, 1024, 1024), (16, 512, 64), (1, 4000, 300)]
DTYPES = [torch.float32, torch.float64]
MD_KEY = "bench_cpu"  # RESULTS.md section: between <!-- bench_cpu:begin --> and <!-- bench_cpu:end -->


def timed(fn, min_time, min_repeat, max_repeat):
    fn()
    times = []
    while len(times) < min_repeat or (len(times) < max_repeat and sum(times) < min_time):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return out, min(times), len(times)


def quality(A, U, S, Vh):
    A, U, S, Vh = (t.double() for t in (A, U, S, Vh))
    R = (U * S.unsqueeze(-2)) @ Vh
    recon = (torch.linalg.matrix_norm(A - R) / torch.linalg.matrix_norm(A)).max().item()
    ref = torch.linalg.svdvals(A)
    s_err = ((S - ref).abs().amax(-1) / ref[..., 0]).max().item()
    return recon, s_err


def run(cases, min_time, min_repeat, max_repeat, seed):
    rows = []
    for b, m, n in cases:
        for dtype in DTYPES:
            g = torch.Generator().manual_seed(seed)
            A = torch.randn(b, m, n, generator=g, dtype=dtype)
            reps = (min_time, min_repeat, max_repeat)
            (U, S, Vh), t_j, r_j = timed(lambda: torch_jsvd.svd(A, full_matrices=False), *reps)
            q_j = quality(A, U, S, Vh)
            (U, S, Vh), t_t, r_t = timed(lambda: torch.linalg.svd(A, full_matrices=False), *reps)
            q_t = quality(A, U, S, Vh)
            row = dict(case=f"{b}x{m}x{n}", dtype=str(dtype).replace("torch.", ""), jsvd_ms=t_j * 1e3,
                       torch_ms=t_t * 1e3, ratio=t_t / t_j, jsvd_recon=q_j[0], jsvd_s_err=q_j[1],
                       torch_recon=q_t[0], torch_s_err=q_t[1], repeats=[r_j, r_t])
            rows.append(row)
            print(fmt_row(row), flush=True)
    return rows


HEADER = ("| case | dtype | torch_jsvd ms | torch.linalg.svd ms | ratio | jsvd recon | jsvd s_err "
          "| torch recon | torch s_err |")


def fmt_row(r):
    return (f"| {r['case']} | {r['dtype']} | {r['jsvd_ms']:.2f} | {r['torch_ms']:.2f} | {r['ratio']:.2f}x "
            f"| {r['jsvd_recon']:.1e} | {r['jsvd_s_err']:.1e} | {r['torch_recon']:.1e} | {r['torch_s_err']:.1e} |")


def markdown(meta, rows):
    """The RESULTS.md section (without its markers: common.update_results_md adds them)."""
    lines = ["## CPU: torch_jsvd (Jacobi CPU engine) vs torch.linalg.svd", "",
             f"- device: {meta['device']}, {meta['threads']} threads for both",
             f"- date: {meta['date']}; torch {meta['torch']}; torch_jsvd at git {meta['commit']}",
             f"- command: `{meta['command']}`",
             "- ratio = torch time / torch_jsvd time (> 1: torch_jsvd faster); best of repeats after a "
             "warm-up; full_matrices=False"] + ([f"- note: {meta['note']}"] if meta.get("note") else []) + ["",
             HEADER, "|" + "---|" * 9]
    lines += [fmt_row(r) for r in rows]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", help="comma-separated substrings of case names to run (default: all)")
    p.add_argument("--min-time-s", type=float, default=1.0)
    p.add_argument("--min-repeat", type=int, default=3)
    p.add_argument("--max-repeat", type=int, default=10)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", default=os.path.join(common.HERE, "results", "bench_cpu.json"))
    p.add_argument("--results-md", default=common.RESULTS_MD,
                   help="file whose bench_cpu section (between its markers) is replaced by this run's table")
    p.add_argument("--no-md", action="store_true", help="do not touch RESULTS.md")
    p.add_argument("--note", help="a caveat to record with the results (e.g. a machine shared with other work)")
    args = p.parse_args()

    torch.set_num_threads(os.cpu_count())
    cases = CASES
    if args.cases:
        keys = args.cases.split(",")
        cases = [c for c in CASES if any(k in "x".join(map(str, c)) for k in keys)]
    meta = common.meta(cpu_name(), threads=torch.get_num_threads(), note=args.note)
    print(f"CPU: {meta['device']}, {meta['threads']} threads, torch {meta['torch']}")
    print(HEADER)
    rows = run(cases, args.min_time_s, args.min_repeat, args.max_repeat, args.seed)
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump(dict(meta=meta, results=rows), f, indent=1)
    print(f"wrote {args.json}")
    if not args.no_md:
        common.update_results_md(MD_KEY, markdown(meta, rows), path=args.results_md)
        print(f"updated {args.results_md}")


if __name__ == "__main__":
    main()
