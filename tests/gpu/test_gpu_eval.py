#!/usr/bin/env python3
"""tests/gpu/test_gpu_eval.py — the GPU backend end to end (ctest label `gpu`).

usage: test_gpu_eval.py KERNLAB SOURCE_DIR

Where no device answers, it says why (the probe's message) and exits 77,
which ctest reports as skipped. With a device: every seed is correct on
`--backend gpu` at the default shapes (ragged ones included) with a CUDA
timer, cuBLAS is the baseline, and a kernel that faults gets a cuda:* status
while the lab carries on. Standard library only.
"""
import json
import os
import subprocess
import sys

KERNLAB, SRC = sys.argv[1], sys.argv[2]
p = subprocess.run([KERNLAB, "eval", "--backend", "gpu", "--json",
                    os.path.join(SRC, "kernels", "seeds", "01_naive.cu")],
                   capture_output=True, text=True, timeout=600)
if p.returncode == 3:
    print("SKIP: no GPU here: " + (p.stderr.strip().splitlines() or ["(no message)"])[-1])
    sys.exit(77)

passed = failed = 0


def check(cond, what):
    global passed, failed
    passed += bool(cond)
    failed += not cond
    if not cond:
        print("FAIL:", what, file=sys.stderr)


seeds = sorted(os.path.join(SRC, "kernels", "seeds", f)
               for f in os.listdir(os.path.join(SRC, "kernels", "seeds")) if f.endswith(".cu"))
fault = os.path.join(SRC, "tests", "gpu", "fault_null_write.cu")
p = subprocess.run([KERNLAB, "eval", "--backend", "gpu", "--json", "--jobs", "1", fault] + seeds,
                   capture_output=True, text=True, timeout=1200)
rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
check(p.returncode == 0, "eval exits 0 (%d): %s" % (p.returncode, p.stderr[-400:]))
check(len(rows) == len(seeds) + 1, "one row per kernel")
if rows:
    check(rows[0]["status"].startswith("cuda:"), "the faulting kernel: %s" % rows[0]["status"])
for r in rows[1:]:
    name = os.path.basename(r["file"])
    check(r["backend"] == "gpu", "%s: backend gpu" % name)
    check(r["correct"] and r["status"] == "ok", "%s: %s %s" % (name, r["status"], r["error"]))
    check(r["timer"] in ("cupti", "events"), "%s: timer %s" % (name, r["timer"]))
    check(r["baseline_us"] and r["baseline_us"] > 0, "%s: cuBLAS baseline" % name)
print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)
