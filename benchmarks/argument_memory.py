"""Memory a Kernel Tuner script's large argument costs: the same script (a partial sum over one input
array, two settings, verified by `verify`) run through Kernel Tuner and through cltune.kernel_tuner,
each in a fresh process, side by side. Printed per tool: the script's process's peak resident
memory (VmHWM) and its largest child's, both over the input's size. cltune's child is its worker,
which measures; Kernel Tuner measures in the script's process, and its child is a process forked
from it (a fork's peak counts the pages it shares with its parent), not a second copy.

    python benchmarks/argument_memory.py [--mb 381] [--tools cltune,kernel_tuner]

The input is filled in place (no float64 temporary), so the script's own share is the input alone.
A child's peak counts the pages it maps from the file the input was written to (shipping.spilled),
which the kernel may drop under pressure; cltune's worker also holds the device buffer (PoCL's
buffers are host memory).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, resource, sys
import numpy as np
tool, n = sys.argv[1], int(sys.argv[2])
if tool == "cltune":
    from cltune.kernel_tuner import tune_kernel
else:
    from kernel_tuner import tune_kernel
src = '''
__kernel void partial_sums(__global float *out, __global const float *x, int n) {
  int i = get_global_id(0); float s = 0.0f;
  for (int j = i; j < n; j += get_global_size(0)) s += x[j];
  out[i] = s;
}'''
x = np.empty(n, np.float32)
x[:] = 0.5
out = np.zeros(4096, np.float32)
def verify(answer, outputs, atol=None):
    return bool(np.isclose(answer[0], np.sum(outputs[0], dtype=np.float64), rtol=1e-3))
res, _ = tune_kernel("partial_sums", src, 4096, [out, x, np.int32(n)], {"block_size_x": [64, 128]},
                     answer=[np.float32(0.5 * n), None, None], verify=verify, quiet=True, iterations=3)
ok = sum(1 for r in res if isinstance(r.get("time"), float) and r["time"] < float("inf"))
hwm = [int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")][0] // 1024
child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
print(json.dumps({"rows": len(res), "ok": ok, "self_mb": hwm, "child_mb": child}))
"""


def run(tool: str, n: int) -> dict:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, tool, str(n)], capture_output=True, text=True,
                          cwd=ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=381, help="the input's size, MiB (default 381: 100M floats)")
    ap.add_argument("--tools", default="cltune,kernel_tuner")
    a = ap.parse_args()
    n = a.mb * 2**20 // 4
    mb = n * 4 / 2**20
    print(f"input: {n:,} float32 = {mb:.0f} MiB")
    print(f"{'tool':<14}{'rows ok':>8}{'script MiB':>12}{'x input':>9}{'child MiB':>11}{'x input':>9}")
    for tool in a.tools.split(","):
        r = run(tool, n)
        if "error" in r:
            print(f"{tool:<14}{r['error']}")
            continue
        s, c = r["self_mb"], r["child_mb"]
        print(f"{tool:<14}{r['ok']:>4}/{r['rows']:<3}{s:>12,}{s / mb:>9.2f}{c:>11,}{c / mb:>9.2f}")


if __name__ == "__main__":
    main()
