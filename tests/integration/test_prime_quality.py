#!/usr/bin/env python3
"""tests/integration/test_prime_quality.py — issue 8's bar for the primed
policy, end to end with the defaults a user gets: `kernlab corpus` (the
default lua/corpus.lua), `kernlab prime` (the default small model, 300
steps, about three minutes on two cores), then 64 samples of the priming
prompt at temperature 1.0 and min-p 0.1, each evaluated on cpu-emu
(tests/bench/policy_prime_quality.py). Prints the figure; fails below 60%
correct.

usage: test_prime_quality.py KERNLAB SOURCE_DIR

ctest label `slow`: not part of `make test` (CI), run it with
`cd build && ctest -L slow --output-on-failure`.
"""
import os
import re
import subprocess
import sys
import tempfile

KERNLAB, SRC = sys.argv[1], sys.argv[2]
from kltest import check, done  # noqa: E402

with tempfile.TemporaryDirectory() as d:
    corpus = os.path.join(d, "corpus")
    c = subprocess.run([KERNLAB, "corpus", "--script", os.path.join(SRC, "lua", "corpus.lua"),
                        "--out", corpus], capture_output=True, text=True, cwd=SRC)
    check(c.returncode == 0, "corpus exits 0: %s" % c.stderr[-500:])
    ck = os.path.join(d, "policy.ckpt")
    p = subprocess.run([KERNLAB, "prime", "--corpus", os.path.join(corpus, "train"), "--out", ck],
                       capture_output=True, text=True, cwd=SRC)
    check(p.returncode == 0, "prime exits 0: %s" % p.stderr[-500:])
    print(p.stdout.strip())
    q = subprocess.run(["/usr/bin/python3", os.path.join(SRC, "tests", "bench",
                                                         "policy_prime_quality.py"),
                        KERNLAB, ck, "64", "1"], capture_output=True, text=True)
    print(q.stdout.strip())
    m = re.search(r"(\d+) correct \((\d+)%", q.stdout)
    check(q.returncode == 0 and m is not None, "quality script ran: %s" % q.stderr[-500:])
    if m:
        check(int(m.group(1)) >= 0.6 * 64,
              "at least 60%% of 64 samples correct after priming: %s of 64" % m.group(1))
done()
