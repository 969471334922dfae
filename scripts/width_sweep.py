"""Blocked levels: time and accuracy of torch_jsvd.svd per pair width (JSVD_PAIR_WIDTH), next to torch.linalg.svd.

usage: width_sweep.py [--widths 0,8,16,32,64] [--cases 200x256x256:float32,...]
Width 0 is the planner's own choice. Each width runs in a child process (the knob is read once).
"""
import argparse, json, os, subprocess, sys

from measure import line  # (scripts/measure.py)

CASES = "200x256x256:float32,100x512x512:float32,10x1024x1024:float32,1x1536x1536:float32,100x512x512:float64,10x1024x1024:float64"


def child(case, reps):
    from measure import measure  # (scripts/measure.py)
    print(json.dumps(measure(case, reps)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--widths", default="0,8,16,32,64")
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child", default=None)
    a = ap.parse_args()
    if a.child:
        return child(a.child, a.reps)
    for case in a.cases.split(","):
        for w in a.widths.split(","):
            env = dict(os.environ, JSVD_PAIR_WIDTH=w)
            r = subprocess.run([sys.executable, __file__, "--child", case, "--reps", str(a.reps)], env=env,
                               capture_output=True, text=True, timeout=300)
            if r.returncode:
                print(case, "w", w, "FAILED", r.stderr[-400:], flush=True)
                continue
            d = json.loads(r.stdout.strip().splitlines()[-1])
            width = d["plan"][0].get("width") if d["plan"] else None
            print(f"w={w:>2s} (plan {width}) {line(d)}", flush=True)


if __name__ == "__main__":
    main()
