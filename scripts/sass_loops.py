"""The loops of a compiled kernel's SASS, and the opcode mix of one: where a step's instructions go.

Usage: python scripts/sass_loops.py OBJ FUNC_REGEX [LOOP_START_HEX]
  OBJ: an object or the built extension (torch_jsvd/_C*.so), read with `cuobjdump -sass` (CUDA toolkit; on a
  machine without it, the nvidia-cuda-cuobjdump wheel has the binary, and so does triton's:
  site-packages/triton/backends/nvidia/bin, put on PATH);
  FUNC_REGEX: matched against the mangled names, e.g. 'svd_warp_kernelIfLi32ELi1ELb1' (float, 32 lanes, 1 row,
  with V); every matching function is listed.
Per function: its instruction count, the local-memory loads and stores (spills), and the backward branches
(start address, length in instructions). The opcode mix is printed for the loop starting at LOOP_START_HEX,
or else for the innermost loop that holds a shared-memory store (the warp level's round-robin step).
A one-off object of one file:  nvcc -std=c++17 -O3 -arch=sm_90 --expt-relaxed-constexpr -DJSVD_WITH_CUDA
  <torch include flags> -Icsrc -Ikernels -c kernels/levels/warp/svd_warp.cu -o /tmp/warp.o
(docs/experiments.md, stop 44: the step loop's 429 -> 317 instructions were counted so).
"""
import collections
import re
import subprocess
import sys


def functions(obj):
    sass = subprocess.run(["cuobjdump", "-sass", obj], capture_output=True, text=True, check=True).stdout
    for chunk in re.split(r"\n\s*Function : ", sass)[1:]:
        name = chunk.split("\n", 1)[0].strip()
        ins = []
        for line in chunk.splitlines():
            m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
            if m:
                text = re.sub(r"^@!?U?P[T0-9]+\s+", "", m.group(2).strip())  # drop the predicate
                ins.append((int(m.group(1), 16), text.split()[0], text))
        yield name, ins


def loops(ins):
    out = []
    for addr, op, text in ins:
        if op.startswith("BRA"):
            m = re.search(r"0x([0-9a-f]+)", text)
            if m and int(m.group(1), 16) < addr:
                out.append((int(m.group(1), 16), addr))
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    obj, pattern = sys.argv[1], sys.argv[2]
    want = int(sys.argv[3], 16) if len(sys.argv) > 3 else None
    for name, ins in functions(obj):
        if not re.search(pattern, name):
            continue
        ls = loops(ins)
        spills = sum(op.startswith(("LDL", "STL")) for _, op, _ in ins)
        print(f"{name}\n  {len(ins)} instructions, {spills} local loads/stores; loops (start, length): "
              + ", ".join(f"{hex(s)} {(e - s) // 16 + 1}" for s, e in ls))
        body = [(s, e) for s, e in ls if s == want] if want is not None else \
            [(s, e) for s, e in ls if any(op.startswith("STS") for a, op, _ in ins if s <= a <= e)]
        if not body:
            continue
        s, e = min(body, key=lambda se: se[1] - se[0])
        mix = collections.Counter(op for a, op, _ in ins if s <= a <= e)
        print(f"  loop {hex(s)}: {sum(mix.values())} instructions: "
              + ", ".join(f"{op} {n}" for op, n in mix.most_common(24)))


if __name__ == "__main__":
    main()
