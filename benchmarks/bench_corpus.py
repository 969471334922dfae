"""Structured matrices (tests/corpus.py): sweeps, accuracy and time of torch_jsvd next to torch.linalg.svd's
default driver and, on CUDA, cuSOLVER's gesvda, on the same inputs in one run.

    python benchmarks/bench_corpus.py --device cpu --sizes 64,256
    python benchmarks/bench_corpus.py --device cuda --sizes 256,1024     # the GPU script's call

Writes results/bench_corpus_<device>.json, a PNG of sweeps relative to a Gaussian matrix of the same
size, and the table between the bench_corpus_<device> markers of RESULTS.md.
Sweeps: svd_ex's info (< 0: not converged or not finite); x Gauss = sweeps / those of a Gaussian matrix of
the same shape and dtype. recon, orth U, orth V: ||A - U S Vh||_F / ||A||_F and ||X^T X - I||_F in units of
max(m, n) eps (the issue-17 goal is <= 10). Times: median ms, full_matrices=False for every method.
"""

import argparse
import json
import os
import sys

import torch

import common

sys.path.insert(0, os.path.join(os.path.dirname(common.HERE), "tests"))
import corpus  # noqa: E402

import torch_jsvd  # noqa: E402
from torch_jsvd._device import device_name  # noqa: E402


def method_row(fn, A, device):
    try:
        ms, out = common.time_ms(fn, device)
    except RuntimeError as e:  # gesvda and the default driver raise on some rank-deficient inputs
        return dict(error=str(e).splitlines()[0][:80])
    U, S, Vh = out[:3]
    if not all(torch.isfinite(t).all() for t in (U, S, Vh)):
        return dict(ms=ms, error="non-finite result")
    recon, ou, ov = common.accuracy(A, U, S, Vh)
    return dict(ms=ms, recon=recon, orth_u=ou, orth_v=ov)


def run_case(name, A, device, with_gesvda):
    row = dict(family=name, shape=list(A.shape), dtype=str(A.dtype).replace("torch.", ""))
    last = {}

    def jsvd():  # svd_ex never raises, and its info is the same on every call: read it off the timed ones
        last["r"] = torch_jsvd.svd_ex(A, full_matrices=False)
        return last["r"]

    row["jsvd"] = method_row(jsvd, A, device)
    row["sweeps"] = info = int(last["r"].info)
    if info < 0:
        row["jsvd"]["error"] = f"info {info}"
    row["torch"] = method_row(lambda: torch.linalg.svd(A, full_matrices=False), A, device)
    if with_gesvda:
        row["gesvda"] = method_row(lambda: torch.linalg.svd(A, full_matrices=False, driver="gesvda"), A, device)
    return row


def cell(r, key):
    if "error" in r:
        return r["error"]
    return f"{r['ms']:.2f} | {r[key]:.1f}"


def markdown(meta, rows, methods):
    out = [f"## Structured matrices ({meta['device_type']}): sweeps and accuracy", "",
           f"- device: {meta['device']}; torch {meta['torch']}; commit {meta['commit']}; {meta['date']}",
           f"- command: `{meta['command']}`",
           "- sweeps: svd_ex's info; x G: relative to a Gaussian matrix of the same shape and dtype",
           "- recon / orth U / orth V of torch_jsvd, and orth U of the others, in units of max(m, n) eps "
           "(goal <= 10); ms: median, full_matrices=False",
           f"- plot: [results/bench_corpus_{meta['device_type']}.png](results/bench_corpus_{meta['device_type']}.png)", ""]
    for key in sorted({(r["dtype"], tuple(r["shape"])) for r in rows}):
        sel = [r for r in rows if (r["dtype"], tuple(r["shape"])) == key]
        worst = max(sel, key=lambda r: r["sweeps"] / max(1, sel[0]["sweeps"]))
        bad = [r["family"] for r in sel if r["sweeps"] < 0]
        out += [f"### {key[0]}, {key[1][0]}x{key[1][1]}: at most {worst['sweeps'] / max(1, sel[0]['sweeps']):.2f}x "
                f"Gaussian sweeps ({worst['family']}); not converged: {', '.join(bad) or 'none'}", "",
                "| matrix | sweeps | x G | jsvd ms | recon | orth U | orth V | "
                + " | ".join(f"{m} ms | {m} orth U" for m in methods) + " |",
                "|---|" + "---|" * (6 + 2 * len(methods))]
        for r in sel:
            j = r["jsvd"]
            ours = (f"{j['ms']:.2f} | {j['recon']:.2f} | {j['orth_u']:.2f} | {j['orth_v']:.2f}" if "error" not in j
                    else f"{j['error']} | | |")
            out.append(f"| {r['family']} | {r['sweeps']} | {r['sweeps'] / max(1, sel[0]['sweeps']):.2f} | {ours} | "
                       + " | ".join(cell(r[m], "orth_u") if "error" not in r[m] else f"{r[m]['error']} |"
                                    for m in methods) + " |")
        out.append("")
    return "\n".join(out)


def plot(rows, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib not installed: no plot")
        return None
    groups = sorted({(r["dtype"], tuple(r["shape"])) for r in rows})
    fams = [r["family"] for r in rows if (r["dtype"], tuple(r["shape"])) == groups[0]]
    fig, ax = plt.subplots(figsize=(12, 4.5))
    width = 0.8 / len(groups)
    for gi, key in enumerate(groups):
        sel = {r["family"]: r for r in rows if (r["dtype"], tuple(r["shape"])) == key}
        base = max(1, sel["gaussian"]["sweeps"])
        ys = [sel[f]["sweeps"] / base if f in sel else 0 for f in fams]
        ax.bar([i + gi * width for i in range(len(fams))], ys, width, label=f"{key[0]} {key[1][0]}x{key[1][1]}")
    ax.axhline(2.0, color="k", lw=0.8, ls="--")
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(fams))], fams, rotation=70, ha="right", fontsize=7)
    ax.set_ylabel("sweeps / sweeps of a Gaussian matrix")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--sizes", default="64,256", help="comma-separated n of the n x n matrices")
    p.add_argument("--dtypes", default="float32,float64")
    p.add_argument("--families", help="comma-separated subset of tests/corpus.py's families")
    p.add_argument("--outdir", default=os.environ.get("OUT") or os.path.join(common.HERE, "results"))
    p.add_argument("--no-md", action="store_true", help="do not touch RESULTS.md")
    args = p.parse_args()
    dev = args.device
    with_gesvda = dev == "cuda"
    methods = ["torch", "gesvda"] if with_gesvda else ["torch"]
    fams = args.families.split(",") if args.families else list(corpus.FAMILIES)
    meta = common.meta(device_name(torch.device(dev)), device_type=dev)
    print(f"{meta['device']}, torch {meta['torch']}, commit {meta['commit']}")
    rows = []
    for dt in [getattr(torch, d) for d in args.dtypes.split(",")]:
        for n in [int(s) for s in args.sizes.split(",")]:
            g = torch.Generator().manual_seed(n)
            cases = [("gaussian", torch.randn(n, n, generator=g, dtype=torch.float64).to(dt))]
            cases += [(f, A) for f in fams if (A := corpus.build(f, n, n, dt)) is not None]
            for name, A in cases:
                row = run_case(name, A.to(dev), dev, with_gesvda)
                rows.append(row)
                j = row["jsvd"]
                print(f"{row['dtype']} {n} {name:26s} sweeps {row['sweeps']:3d} "
                      + (f"{j['ms']:8.2f} ms recon {j['recon']:.2f} orth {j['orth_u']:.2f} {j['orth_v']:.2f}"
                         if "error" not in j else j["error"]), flush=True)
    os.makedirs(args.outdir, exist_ok=True)
    path = os.path.join(args.outdir, f"bench_corpus_{dev}.json")
    with open(path, "w") as f:
        json.dump(dict(meta=meta, rows=rows), f, indent=1)
    print(f"wrote {path}")
    png = plot(rows, os.path.join(args.outdir, f"bench_corpus_{dev}.png"),
               f"torch_jsvd sweeps on structured matrices, {meta['device']}, {meta['commit']}")
    if png:
        print(f"wrote {png}")
    md = markdown(meta, rows, methods)
    if not args.no_md:
        common.update_results_md(f"bench_corpus_{dev}", md)
        print(f"updated {common.RESULTS_MD}")
    else:
        print(md)


if __name__ == "__main__":
    main()
