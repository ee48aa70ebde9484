#!/usr/bin/env python3
"""tests/bench/policy_prime_quality.py — how good is the primed policy?

usage: policy_prime_quality.py KERNLAB CKPT [N=64] [SEED=1]

Samples N completions of the priming prompt (the task header of
lab/prime_cmd.c) at temperature 1.0 and min-p 0.1, evaluates every one with
`kernlab eval` on the CPU emulator (sandboxed), and prints the fraction that
compiles and the fraction that is correct on every check shape. Issue 8's
goal after priming: at least 60% correct. Not a ctest test (priming the
small model takes ~10 minutes); run it after `kernlab prime`.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

kernlab, ckpt = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 64
seed = sys.argv[4] if len(sys.argv) > 4 else "1"
header = ("// task: C = A * B, fp32, row-major; A is MxK, B is KxN\n"
          "// target: 4096x4096x4096 on an H200 (sm_90); correct for every "
          "M, N, K >= 1\n")
p = subprocess.run([kernlab, "generate", "--ckpt", ckpt, "--tok", ckpt + ".tok",
                    "--prompt", header, "-n", str(n), "--max-tokens", "1900",
                    "--temperature", "1.0", "--min-p", "0.1", "--seed", seed],
                   capture_output=True, text=True, errors="replace")
if p.returncode != 0:
    sys.exit("generate failed: " + p.stderr)
parts = re.split(r"^== completion \d+: .*==\n", p.stdout, flags=re.M)[1:]
with tempfile.TemporaryDirectory() as d:
    files = []
    for i, text in enumerate(parts):
        path = os.path.join(d, "sample%02d.cu" % i)
        with open(path, "w") as f:
            f.write(text)
        files.append(path)
    e = subprocess.run([kernlab, "eval", "--json", "--shape", "64x64x64", *files],
                       capture_output=True, text=True)
    rows = [json.loads(l) for l in e.stdout.splitlines() if l.startswith("{")]
compiled = sum(r["compiled"] for r in rows)
correct = sum(r["correct"] for r in rows)
print("primed policy %s: %d samples (T=1.0, min-p 0.1): %d compile (%.0f%%), "
      "%d correct (%.0f%%; goal >= 60%%)" % (ckpt, len(rows), compiled,
      100.0 * compiled / max(len(rows), 1), correct, 100.0 * correct / max(len(rows), 1)))
