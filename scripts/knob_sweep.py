"""Time and accuracy per value of one JSVD_* knob (csrc/tuning_knobs.h), for each case.

Usage: python scripts/knob_sweep.py --knob JSVD_PAIR_WIDTH --values 0,8,16,32,64 [--cases 200x256x256:float32,...] [--reps 3]
Each (case, value) runs scripts/measure.py's measurement in a child process (a knob is read once per process) and
prints its line with the plan's first level (kernel, width). An empty value ("--values ,8,16") leaves the knob
unset: the planner's own choice. For a two-way A/B in alternating rounds use scripts/ab_knob.sh.
"""
import argparse, json, os, subprocess, sys

from measure import line, measure  # scripts/measure.py (scripts/ is sys.path[0])

CASES = "200x256x256:float32,100x512x512:float32,10x1024x1024:float32,1x1536x1536:float32,100x512x512:float64,10x1024x1024:float64"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--knob", default="JSVD_PAIR_WIDTH")
    ap.add_argument("--values", default="0,8,16,32,64")
    ap.add_argument("--cases", default=CASES)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        print(json.dumps(measure(a.child, a.reps)))
        return
    for case in a.cases.split(","):
        for v in a.values.split(","):
            env = dict(os.environ)
            env.pop(a.knob, None)
            if v:
                env[a.knob] = v
            r = subprocess.run([sys.executable, __file__, "--child", case, "--reps", str(a.reps)], env=env,
                               capture_output=True, text=True, timeout=600)
            tag = f"{a.knob}={v or '(unset)'}"
            if r.returncode:
                print(tag, case, "FAILED", r.stderr[-400:], flush=True)
                continue
            d = json.loads(r.stdout.strip().splitlines()[-1])
            lv = d["plan"][0] if d["plan"] else {}
            print(f"{tag} (plan {lv.get('kernel')} w={lv.get('width')}) {line(d)}", flush=True)


if __name__ == "__main__":
    main()
