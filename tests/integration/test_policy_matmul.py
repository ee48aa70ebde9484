#!/usr/bin/env python3
"""tests/integration/test_policy_matmul.py — --policy-matmul RUN.h5 end to
end, on the CPU (the kernel runs on the emulator; lab/policy_matmul.c).

usage: test_policy_matmul.py KERNLAB SOURCE_DIR

A results file made by `kernlab eval kernels/seeds/05_blocktile_2d.cu
--out`: `kernlab prime` through its kernel gives the losses the default
path gives (within 1e-4 relative; the printed losses have four decimals),
`kernlab generate` the same greedy completion, and one step of `kernlab
run` completes through it. Refused with exit 2 and a sentence naming the
file: a results file with only a wrong kernel (`eval` of
tests/kernels/broken/wrong_index.cu), a missing file, for prime, run and
generate. A kernel wrong only at M == 2 (a shape neither eval nor the
check before the first step of `run` try) is caught at the first such
GEMM and dropped, BLAS's product kept. (A wrong kernel marked correct, one that does not compile and
one that raises a flag are refused in tests/unit/test_policy_matmul.c,
which writes such files through the results API.)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

KERNLAB, SRC = sys.argv[1], sys.argv[2]
from kltest import check, done  # noqa: E402


def run(*args):
    return subprocess.run([KERNLAB, *args], capture_output=True, text=True,
                          errors="replace", timeout=600)


def losses(out):
    m = re.search(r"loss ([0-9.]+) -> ([0-9.]+)", out)
    return m and (float(m.group(1)), float(m.group(2)))


def close(a, b, tol=1e-4):
    return a and b and all(abs(x - y) <= tol * max(1.0, abs(y))
                           for x, y in zip(a, b))


with tempfile.TemporaryDirectory() as d:
    corpus = os.path.join(d, "corpus")
    os.mkdir(corpus)
    for f in os.listdir(os.path.join(SRC, "kernels/seeds")):
        if f.endswith(".cu"):
            shutil.copy(os.path.join(SRC, "kernels/seeds", f), corpus)
    good, bad = os.path.join(d, "good.h5"), os.path.join(d, "bad.h5")
    e = run("eval", "--backend", "cpu-emu", "--out", good,
            os.path.join(SRC, "kernels/seeds/05_blocktile_2d.cu"))
    check(e.returncode == 0 and os.path.exists(good),
          "eval of seed 05 --out: %s" % e.stderr[-300:])
    e = run("eval", "--backend", "cpu-emu", "--out", bad,
            os.path.join(SRC, "tests/kernels/broken/wrong_index.cu"))
    check(e.returncode == 0 and os.path.exists(bad),
          "eval of a wrong kernel --out: %s" % e.stderr[-300:])

    base = ["prime", "--corpus", corpus, "--size", "tiny", "--steps", "3",
            "--batch", "2", "--seq", "48"]
    ck = os.path.join(d, "p.ckpt")
    p0 = run(*base, "--out", ck)
    p1 = run(*base, "--out", os.path.join(d, "m.ckpt"), "--policy-matmul",
             good)
    check(p0.returncode == 0 and p1.returncode == 0,
          "prime with and without --policy-matmul: %d %d %s" %
          (p0.returncode, p1.returncode, p1.stderr[-400:]))
    check("policy GEMMs through kernel 0 (" in p1.stderr and
          "05_blocktile_2d.cu" in p1.stderr
          and "agreed with the default path" in p1.stderr,
          "prime names the kernel and its check: %s" % p1.stderr[-600:])
    m = re.search(r"--policy-matmul: (\d+) GEMMs ran through", p1.stderr)
    check(m and int(m.group(1)) == 3 * 27,
          "3 steps x 27 GEMMs went through it: %s" % (m and m.group(0)))
    check(close(losses(p1.stdout), losses(p0.stdout)),
          "the same losses through the kernel: %s vs %s" %
          (losses(p1.stdout), losses(p0.stdout)))

    gen = ["generate", "--ckpt", ck, "--tok", ck + ".tok", "--prompt",
           "// task", "-n", "2", "--max-tokens", "12", "--temperature", "0"]
    g0, g1 = run(*gen), run(*gen, "--policy-matmul", good)
    lp = r"mean logprob (-?[0-9.]+)"
    check(g0.returncode == 0 and g1.returncode == 0 and "completion 1" in
          g0.stdout and re.sub(lp, "", g0.stdout) == re.sub(lp, "", g1.stdout),
          "generate: the same greedy completions through the kernel: %r vs %r"
          % (g0.stdout[:300], g1.stdout[:300] + g1.stderr[-300:]))
    check(close([float(x) for x in re.findall(lp, g1.stdout)],
                [float(x) for x in re.findall(lp, g0.stdout)], 2e-3),
          "generate: the same mean log-probs (printed to 3 decimals)")

    with open(os.path.join(d, "c.lua"), "w") as f:
        f.write("""return {
  task = {M = 32, N = 32, K = 32}, backend = "cpu-emu", checkpoint = %r,
  group_size = 2, steps = 1, sampling = {max_tokens = 24},
  grpo = {mask_truncated = false}, optim = {lr = 1e-4}, seed = 7,
  reward = %r, out = %r,
}
""" % (ck, os.path.join(SRC, "lua", "reward", "default.lua"),
       os.path.join(d, "c.h5")))
    r = run("run", os.path.join(d, "c.lua"), "--policy-matmul", good)
    check(r.returncode == 0 and "policy GEMMs through kernel 0" in r.stderr
          and re.search(r"--policy-matmul: \d+ GEMMs ran through", r.stderr),
          "one campaign step through the kernel: %d %s" %
          (r.returncode, r.stderr[-600:]))

    # A kernel right at every shape the harness and run's check before the
    # first step try, wrong when M == 2 (the decode of two rows): the
    # first such GEMM is checked against BLAS, keeps BLAS's product, and
    # the kernel is dropped, said once
    # (its name, the file's label, holds an escape sequence: never shown raw)
    m4 = os.path.join(d, "m4\x1b[31m.cu")
    with open(os.path.join(SRC, "kernels/seeds/01_naive.cu")) as f:
        text = f.read()
    with open(m4, "w") as f:
        f.write(text.replace("    C[row * N + col] = acc;",
                             "    if (M == 2) acc = -acc;\n    C[row * N + col] = acc;"))
    m4h5 = os.path.join(d, "m4.h5")
    e = run("eval", "--backend", "cpu-emu", "--out", m4h5, m4)
    check(e.returncode == 0 and " yes " in e.stdout,
          "the M == 2 kernel passes eval: %s" % e.stdout[-300:])
    r2 = run("run", os.path.join(d, "c.lua"), "--out", os.path.join(d, "m4run.h5"),
             "--policy-matmul", m4h5)
    check(r2.returncode == 0 and "agreed with the default path" in r2.stderr and
          re.search(r"then it was dropped mid-run: it disagrees with the default path "
                    r"at 2x\d+x\d+ .*a shape the check before the first step did not "
                    r"cover; BLAS took that GEMM and the rest", r2.stderr) and
          r2.stderr.count("policy-matmul: kernel 0") == 0 and
          r2.stderr.count("disagrees") == 1,
          "run through a kernel wrong at M = 2 (two rows decoding): caught at "
          "its first such GEMM, dropped: %s" % r2.stderr[-800:])
    check("\x1b" not in r2.stderr and "m4?[31m.cu" in r2.stderr,
          "the kernel's label is shown without its escape byte: %r" % r2.stderr[-400:])
    # and the greedy completions of generate (checked at 2 rows before
    # its first step) are refused there
    g2 = run(*gen, "--policy-matmul", m4h5)
    check(g2.returncode == 2 and "disagrees with the default path at 2x" in g2.stderr,
          "generate -n 2: the check before the first step covers 2 rows: %s" %
          g2.stderr[-300:])
    check(re.search(r"the first call of each of \d+ shapes met was checked", g1.stderr),
          "the report counts the shapes checked: %s" % g1.stderr[-300:])

    # refusals: exit 2 before any training, the file named
    missing = os.path.join(d, "missing.h5")
    for path, what in ((bad, "no correct, unflagged kernel"),
                       (missing, "No such file")):
        p = run(*base, "--out", os.path.join(d, "x.ckpt"), "--policy-matmul",
                path)
        check(p.returncode == 2 and what in p.stderr and path in p.stderr and
              not os.path.exists(os.path.join(d, "x.ckpt")),
              "prime --policy-matmul %s: exit 2 '%s': %d %s" %
              (os.path.basename(path), what, p.returncode, p.stderr[-400:]))
        g = run(*gen, "--policy-matmul", path)
        check(g.returncode == 2 and what in g.stderr and not g.stdout,
              "generate --policy-matmul %s: exit 2: %d %s" %
              (os.path.basename(path), g.returncode, g.stderr[-300:]))
        r = run("run", os.path.join(d, "c.lua"), "--out",
                os.path.join(d, "x.h5"), "--policy-matmul", path)
        check(r.returncode == 2 and what in r.stderr and
              not re.search(r"^step ", r.stdout, re.M),
              "run --policy-matmul %s: exit 2 before a step: %d %s" %
              (os.path.basename(path), r.returncode, r.stderr[-300:]))
    p = run("prime", "--corpus", corpus, "--policy-matmul")
    check(p.returncode == 2 and "usage" in p.stderr,
          "--policy-matmul without a file: usage, exit 2")
done()
