#!/usr/bin/env python3
"""tests/integration/test_run.py — `kernlab run`: the GRPO campaign loop.

usage: test_run.py KERNLAB SOURCE_DIR

Primes a tiny policy on the seed and honest kernels, then runs tiny
campaigns (G 2, 32x32x32, 64 tokens) on cpu-emu. A tiny model writes
garbage (compile errors, flags): the loop must still score, update, record
and print. Checks: one line per step, every candidate recorded once with its
step/group/sample, --resume after a finished run and after a kill records
nothing twice and keeps the file's baseline (timed again, and said, when the
file's was timed on another device), --resume of a missing file is
refused, Ctrl-C finishes the step in flight and exits 130 (twice: at
once), an existing results file needs --resume, bad campaign files exit 2
naming the file:line or the field, and --policy-device gpu exits 3 with
the reason where no device answers while auto falls back.
"""
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

KERNLAB, SRC = sys.argv[1], sys.argv[2]
from kltest import check, done, interrupted  # noqa: E402


def run(*args, cwd=None):
    return subprocess.run([KERNLAB, *args], capture_output=True, text=True, errors="replace", timeout=600,
                          cwd=cwd)


def err_tail(err, n=300):
    """The end of stderr, and a sanitizer's own lines wherever they are
    (its report ends in a legend that says nothing about which error):
    the error, its stack frames (a heap-use-after-free in memcmp came with
    none, once, and could not be found again) and the summary."""
    lines = [l for l in err.splitlines()
             if "ERROR: AddressSanitizer" in l or "SUMMARY:" in l
             or "runtime error:" in l or re.match(r"\s+#\d+ 0x", l)
             or "is located" in l or "freed by thread" in l
             or "previously allocated by" in l]
    return "\n".join(lines[:60] + [err[-n:]])


def candidates(h5):
    e = run("export", h5, "--format", "jsonl")
    if e.returncode != 0:
        print(e.stderr, file=sys.stderr)
        return []
    return [json.loads(l) for l in e.stdout.splitlines() if l.strip()]


def n_steps(h5):
    # Debian's python3 has h5py (scripts/deps.sh); the one running this may
    # not, and the checks were skipped (None) with it
    q = subprocess.run(["/usr/bin/python3", "-c", """
import sys, h5py
with h5py.File(sys.argv[1], "r", swmr=True) as f:
    print(len(f["steps"]))
""", h5], capture_output=True, text=True)
    return int(q.stdout) if q.returncode == 0 else "unreadable: " + q.stderr[-300:]


def h5edit(path, code):
    """Runs code on path opened r+ with h5py as f (Debian's python3-h5py,
    hence /usr/bin/python3), rec_crc (tests/python/h5fixture.py) at hand to
    fix the crc of an edited candidate record. Returns the process."""
    return subprocess.run(["/usr/bin/python3", "-c", """
import sys, h5py
sys.path.insert(0, sys.argv[2])
from h5fixture import rec_crc
with h5py.File(sys.argv[1], "r+") as f:
""" + "".join("    " + l + "\n" for l in code.strip().splitlines()),
                           path, os.path.join(SRC, "tests", "python")],
                          capture_output=True, text=True)


def campaign(path, ckpt, steps, extra=""):
    with open(path, "w") as f:
        f.write("""-- a tiny campaign for tests
return {
  task = {M = 32, N = 32, K = 32},
  backend = "cpu-emu",
  checkpoint = %r,
  group_size = 2,
  steps = %d,
  sampling = {max_tokens = 64},
  grpo = {mask_truncated = false},
  optim = {lr = 1e-4},
  reward = %r,
  seed = 7,
  %s
}
""" % (ckpt, steps, os.path.join(SRC, "lua", "reward", "default.lua"), extra))


with tempfile.TemporaryDirectory() as d:
    corpus = os.path.join(d, "corpus")
    os.mkdir(corpus)
    for sub in ("kernels/seeds", "tests/kernels/honest"):
        for f in os.listdir(os.path.join(SRC, sub)):
            if f.endswith(".cu"):
                shutil.copy(os.path.join(SRC, sub, f), os.path.join(corpus, f))
    ck = os.path.join(d, "p.ckpt")
    p = run("prime", "--corpus", corpus, "--out", ck, "--size", "tiny", "--steps", "30",
            "--lr", "3e-3")
    check(p.returncode == 0, "prime exits 0: %s" % p.stderr[-500:])

    # A whole campaign: 2 steps of G = 2.
    c2 = os.path.join(d, "tiny.lua")
    campaign(c2, ck, 2)
    out = os.path.join(d, "runs", "tiny.h5")
    r = run("run", c2, "--out", out)
    check(r.returncode == 0, "run exits 0: %s" % r.stderr[-800:])
    lines = [l for l in r.stdout.splitlines() if re.match(r"step \d+/2 ", l)]
    check(len(lines) == 2, "one line per step: %s" % r.stdout)
    for l in lines:
        check(all(k in l for k in ("reward mean", "max", "correct", "best", "kl", "clip", "gnorm",
                                   "tok/s", "ETA")), "step line fields: %s" % l)
    check("\r" not in r.stdout and "\033[" not in r.stdout,
          "no progress bar when stdout is not a terminal")
    # the best time reads as a speed-up over the baseline (x, not a share)
    mb = re.search(r"baseline \([^)]*\): ([0-9.]+) us", r.stdout)
    for l in lines:
        m = re.search(r"best ([0-9.]+) us \(([0-9.]+)x baseline speed\)", l)
        check(m or " best - " in l, "best as a speed-up: %s" % l)
        if m and mb:
            want = float(mb.group(1)) / float(m.group(1))
            check(abs(float(m.group(2)) - want) <= 0.01 + 0.01 * want,
                  "speed-up is baseline / best: %s (%s)" % (l, mb.group(0)))
    # gnorm is the step's gradient norm as the file records it (the loss is
    # near 0 by construction, the norm says whether anything was learnt)
    gn = [re.search(r"gnorm (\S+) ", l) for l in lines]
    check(all(g and re.match(r"^[0-9][0-9.e+-]*$", g.group(1)) for g in gn),
          "gnorm is a number: %s" % lines)
    # Debian's python3 has h5py (scripts/deps.sh); the one running this may not
    q = subprocess.run(["/usr/bin/python3", "-c", """
import json, sys, h5py
with h5py.File(sys.argv[1], "r", swmr=True) as f:
    print(json.dumps([float(x) for x in f["steps"]["grad_norm"]]))
""", out], capture_output=True, text=True)
    recorded = json.loads(q.stdout) if q.returncode == 0 else None
    shown = [float(g.group(1)) for g in gn if g]
    check(recorded is not None and len(shown) == len(recorded) and
          all(abs(a - b) <= 6e-3 * abs(b) + 1e-12 for a, b in zip(shown, recorded)),
          "gnorm shown %s is the recorded grad_norm %s %s" % (shown, recorded, q.stderr[-300:]))
    cands = candidates(out)
    check(len(cands) == 4, "4 candidates recorded: %d" % len(cands))
    check(sorted((c["step"], c["group"], c["sample"]) for c in cands) ==
          [(0, 0, 0), (0, 0, 1), (1, 0, 0), (1, 0, 1)], "step/group/sample recorded")
    check(all(c["reward"] is not None and "reward_components" in c for c in cands),
          "every candidate scored with components")
    ns = n_steps(out)
    check(ns == 2, "2 step records: %s" % ns)
    check(os.path.exists(os.path.join(d, "runs", "tiny.ckpt")), "checkpoint next to results")
    t = run("top", out, "--by", "reward")
    check(t.returncode == 0 and "4 candidates" in t.stdout, "kernlab top reads it: %s" % t.stdout)

    # The same seed samples the same kernels.
    r2 = run("run", c2, "--out", os.path.join(d, "runs", "again.h5"))
    again = candidates(os.path.join(d, "runs", "again.h5"))
    check(r2.returncode == 0 and [c["src_sha256"] for c in again] ==
          [c["src_sha256"] for c in cands], "same seed, same samples")

    # --policy-device: without a device, gpu exits 3 with the reason before
    # any compute and writes nothing; auto falls back to the CPU, says so,
    # and samples what cpu does.
    c1 = os.path.join(d, "one.lua")
    campaign(c1, ck, 1)
    gout = os.path.join(d, "runs", "gpu.h5")
    rg = run("run", c1, "--out", gout, "--policy-device", "gpu")
    aout = os.path.join(d, "runs", "auto.h5")
    ra = run("run", c1, "--out", aout, "--policy-device", "auto")
    check(ra.returncode == 0, "--policy-device auto exits 0: %s" % ra.stderr[-800:])
    if "no device for the policy" in ra.stderr:
        check(rg.returncode == 3 and "--policy-device gpu" in rg.stderr and
              "no device for the policy" in rg.stderr,
              "gpu without a device: exit 3 with the reason: %d %s" % (rg.returncode, rg.stderr))
        check(not os.path.exists(gout), "gpu without a device writes no results file")
        check("--policy-device auto" in ra.stderr and "runs on the CPU" in ra.stderr,
              "auto says it falls back: %s" % ra.stderr[-300:])
        check([c["src_sha256"] for c in candidates(aout)] ==
              [c["src_sha256"] for c in cands if c["step"] == 0],
              "auto on the CPU samples what cpu does")
    else:
        check(rg.returncode == 0, "gpu with a device runs: %s" % rg.stderr[-800:])
    r = run("run", c1, "--out", gout, "--policy-device", "tpu")
    check(r.returncode == 2 and "expected cpu, gpu or auto" in r.stderr,
          "--policy-device tpu: exit 2: %s" % r.stderr)

    # On a terminal: the progress bar, redrawn in place, and the step lines;
    # two groups per step go through the evaluation queue.
    import pty
    cp = os.path.join(d, "tty.lua")
    campaign(cp, ck, 2, "prompts_per_step = 2,")
    tout = os.path.join(d, "runs", "tty.h5")
    pid, fd = pty.fork()
    if pid == 0:
        os.execv(KERNLAB, [KERNLAB, "run", cp, "--out", tout])
    buf = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        buf += chunk
    _, status = os.waitpid(pid, 0)
    text = buf.decode("utf-8", "replace")
    check(os.WEXITSTATUS(status) == 0, "run on a tty exits 0: %s" % text[-800:])
    check(re.search(r"\r\[[#.]{30}\] +\d+%  step 1/2  sampled \d/4  evaluated \d/4", text),
          "progress bar drawn on a tty: %r" % text[-800:])
    check(re.search(r"evaluated 4/4", text), "bar counts evaluations to 4/4: %r" % text[-800:])
    check(len(re.findall(r"step \d/2  reward mean", text)) == 2, "step lines on a tty too")
    tc = candidates(tout)
    check(sorted((c["step"], c["group"], c["sample"]) for c in tc) ==
          [(s_, g, i) for s_ in range(2) for g in range(2) for i in range(2)],
          "2 groups x 2 samples x 2 steps recorded once each: %s" % len(tc))

    # An existing results file is not appended to without --resume.
    r = run("run", c2, "--out", out)
    check(r.returncode == 2 and "--resume" in r.stderr, "existing file needs --resume: %s" % r.stderr)
    # --resume of a file that does not exist (a typo in --out): refused,
    # naming it, nothing made; it ran a whole fresh campaign, said by one
    # line on stderr
    typo = os.path.join(d, "runs", "tyop.h5")
    r = run("run", c2, "--out", typo, "--resume")
    check(r.returncode == 2 and
          ("--resume: %s does not exist; nothing to resume" % typo) in r.stderr and
          not r.stdout and not os.path.exists(typo) and
          not os.path.exists(typo[:-3] + ".ckpt"),
          "--resume of a missing file: exit 2 naming it, nothing run: %d %s %s" %
          (r.returncode, r.stderr[-300:], r.stdout[-300:]))

    # --resume after a finished run with more steps: only the new step.
    c3 = os.path.join(d, "tiny3.lua")
    campaign(c3, ck, 3)
    dout = os.path.join(d, "runs", "elsewhere.h5")  # for the baseline below
    shutil.copy(out, dout)
    shutil.copy(out[:-3] + ".ckpt", dout[:-3] + ".ckpt")
    r = run("run", c3, "--out", out, "--resume")
    check(r.returncode == 0, "resume exits 0: %s" % r.stderr[-800:])
    # the resumed step is against the file's baseline, said on the start
    # line; it was timed again, and the file held two baselines
    first = [c["baseline_us"] for c in cands]
    mr = re.search(r"^baseline \(naive seed\): ([0-9.]+) us \(CPU-emulator time, "
                   r"not GPU\), from %s's records;" % re.escape(out), r.stdout, re.M)
    every = [c["baseline_us"] for c in candidates(out)]
    check(mr and len(set(first)) == 1 and first[0] > 0 and
          mr.group(1) == "%.1f" % first[0] and set(every) == set(first),
          "resume reuses the file's baseline %s: records %s, start line %s" %
          (first, every, r.stdout[:400]))
    # records timed on another device (its attribute says so): timed again,
    # said with where the file's was timed
    e = h5edit(dout, 'f.attrs["device"] = "NVIDIA H100"')
    r = run("run", c3, "--out", dout, "--resume")
    check(e.returncode == 0 and r.returncode == 0 and
          re.search(r"^baseline \(naive seed\): [0-9.]+ us \(CPU-emulator time, not "
                    r"GPU\), timed again: %s's records hold one timed on cpu-emu "
                    r"\(NVIDIA H100\), this run is on cpu-emu \(cpu" % re.escape(dout),
                    r.stdout, re.M),
          "another device's baseline is timed again, and said: %s %s %s" %
          (e.stderr[-300:], r.stderr[-300:], r.stdout[:400]))
    check(len(re.findall(r"^step \d+/3 ", r.stdout, re.M)) == 1, "one new step: %s" % r.stdout)
    check("is not the campaign text" in r.stdout and "the edits apply from step 3" in r.stdout,
          "resume with an edited campaign (steps 2 -> 3) says so: %s" % r.stdout[:600])
    cands = candidates(out)
    check(len(cands) == 6, "6 candidates after resume, not 8: %d" % len(cands))
    check(sorted(c["step"] for c in cands) == [0, 0, 1, 1, 2, 2], "steps 0,1,2 once each")
    check(n_steps(out) == 3, "3 step records")
    r = run("run", c3, "--out", out, "--resume")
    check(r.returncode == 0 and len(candidates(out)) == 6 and
          "nothing to do: the campaign has 3 steps and 3 are recorded" in r.stdout and
          "resuming at" not in r.stdout, "resume of a finished campaign: no-op: %s" % r.stdout)
    # --resume with another campaign's file: refused, the file untouched
    before = open(out, "rb").read()
    for name, edit, says in (("shape.lua", ("M = 32", "M = 48"), "task"),
                             ("seed.lua", ("seed = 7", "seed = 8"), "seed"),
                             ("group.lua", ("group_size = 2", "group_size = 3"), "holds 2")):
        path = os.path.join(d, name)
        campaign(path, ck, 4)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace(*edit))
        r = run("run", path, "--out", out, "--resume")
        check(r.returncode == 2 and "written by another campaign" in r.stderr and
              says in r.stderr, "%s: --resume refused: %d %s" % (name, r.returncode, r.stderr))
    check(open(out, "rb").read() == before, "the file is untouched by refused resumes")
    # The same task spelled as older files spell a cube's ("fp32_32", not
    # "fp32_32x32x32"): the same campaign, continued; it was refused as
    # another task's
    oout = os.path.join(d, "runs", "oldnames.h5")
    shutil.copy(out, oout)
    shutil.copy(out[:-3] + ".ckpt", oout[:-3] + ".ckpt")
    ed = h5edit(oout, """
c = f["candidates"][...]
c["task"] = b"fp32_32"
for i in range(len(c)):
    c[i]["crc"] = rec_crc(c[i])
f["candidates"][...] = c
""")
    c4 = os.path.join(d, "tiny4.lua")
    campaign(c4, ck, 4)
    r = run("run", c4, "--out", oout, "--resume")
    oc = candidates(oout)
    check(ed.returncode == 0 and r.returncode == 0 and
          len(re.findall(r"^step \d+/4 ", r.stdout, re.M)) == 1 and
          [c["task"] for c in oc] == ["fp32_32"] * 6 + ["fp32_32x32x32"] * 2,
          "--resume of a file naming the task fp32_32: continued: %d %s %s %s" %
          (r.returncode, ed.stderr[-300:], r.stderr[-300:], [c["task"] for c in oc]))
    # --resume into a file `kernlab eval` or `kernlab search` wrote, of the
    # same task and seed: refused (a run once took the search's step for
    # its own step 0 and appended to the file), the file untouched
    eout = os.path.join(d, "eval.h5")
    r = run("eval", os.path.join(SRC, "kernels", "seeds", "01_naive.cu"),
            "--backend", "cpu-emu", "--shape", "32x32x32", "--seed", "7",
            "--out", eout)
    sout = os.path.join(d, "search.h5")
    r2 = run("search", "exhaustive", c3, "--limit", "1", "--out", sout, cwd=SRC)
    check(r.returncode == 0 and r2.returncode == 0,
          "eval and search files made: %s %s" % (r.stderr[-300:], r2.stderr[-300:]))
    for path, writer in ((eout, "kernlab eval"), (sout, "kernlab search")):
        before = open(path, "rb").read()
        r = run("run", c3, "--out", path, "--resume")
        check(r.returncode == 2 and ("written by %s" % writer) in r.stderr,
              "--resume into a %s file refused: %d %s" % (writer, r.returncode, r.stderr))
        check(open(path, "rb").read() == before, "%s's file untouched" % writer)
    # `kernlab eval --out` into a campaign's own file (a record of step
    # -1), then --resume: continued, the eval's record kept and no part of
    # the run (no step's, not the best time of the step lines); it was
    # refused as "written by another campaign (step differs)"
    vout = os.path.join(d, "runs", "withevals.h5")
    shutil.copy(out, vout)
    shutil.copy(out[:-3] + ".ckpt", vout[:-3] + ".ckpt")
    ev = run("eval", os.path.join(SRC, "kernels", "seeds", "01_naive.cu"),
             "--backend", "cpu-emu", "--shape", "32x32x32", "--out", vout)
    r = run("run", c4, "--out", vout, "--resume")
    vc = candidates(vout)
    evals = [c for c in vc if c["step"] == -1]
    best = [c["time_us"] for c in vc if c["step"] >= 0 and c["correct"] and c["flags"] == []]
    line = re.findall(r"^step 4/4 .*$", r.stdout, re.M)
    check(ev.returncode == 0 and r.returncode == 0 and len(line) == 1 and
          len(evals) == 1 and evals[0]["correct"] and
          sorted(c["step"] for c in vc) == [-1, 0, 0, 1, 1, 2, 2, 3, 3],
          "--resume of a campaign's file holding an eval record: continued: %d %d %s %s" %
          (ev.returncode, r.returncode, r.stderr[-300:], sorted(c["step"] for c in vc)))
    check(line and ("best -  " in line[0] if not best else
                    "best %.1f us" % min(best) in line[0]),
          "the eval'd kernel (%s us) is not the run's best: %s" %
          (evals[0]["time_us"] if evals else None, line))
    # nor the closing comparison's best, nor one of its evaluations
    cmp_line = re.findall(r"^compare: (?:best correct kernel of|%s holds no).*$"
                          % re.escape(vout), r.stdout, re.M)
    said = cmp_line[0] if len(cmp_line) == 1 else ""
    check(("(8 evaluations)" in said and not best) or
          ("; 8 evaluations)" in said and best and "%.1f us" % min(best) in said),
          "the comparison leaves the eval'd kernel out: %s" % cmp_line)
    # A campaign's file that holds no candidates yet (as a run stopped
    # before its first record leaves it; here a finished one cut to
    # nothing with h5py): its task is in its config attribute only, and is
    # checked from there, with the group shape and the seed attribute.
    # Any campaign was taken, and the file's config then named another
    # shape than its records.
    zout = os.path.join(d, "runs", "norecords.h5")
    shutil.copy(out, zout)
    ed = h5edit(zout, """
for name in ("candidates", "reward_components", "steps"):
    f[name].resize((0,) + f[name].shape[1:])
""")
    check(ed.returncode == 0 and candidates(zout) == [],
          "h5py cuts a file to no records: %s" % ed.stderr[-300:])
    before = open(zout, "rb").read()
    for name, says in (("shape.lua", "task differs"), ("seed.lua", "its seed is 7"),
                       ("group.lua", "group_size differs")):
        r = run("run", os.path.join(d, name), "--out", zout, "--resume")
        check(r.returncode == 2 and "written by another campaign" in r.stderr and
              "holds no candidates of a step yet" in r.stderr and says in r.stderr and
              "remove it to start afresh" in r.stderr and
              open(zout, "rb").read() == before,
              "%s: --resume of a file without records refused: %d %s" %
              (name, r.returncode, r.stderr[-400:]))
    r = run("run", c3, "--out", zout, "--resume")
    check(r.returncode == 0 and
          sorted(c["step"] for c in candidates(zout)) == [0, 0, 1, 1, 2, 2],
          "the same campaign continues a file without records: %d %s" %
          (r.returncode, r.stderr[-300:]))
    # A corpus whose MANIFEST.tsv is a FIFO: the finished run's comparison
    # says so instead of waiting on it for ever
    fifo_corpus = os.path.join(d, "fifo_corpus")
    os.mkdir(fifo_corpus)
    os.mkfifo(os.path.join(fifo_corpus, "MANIFEST.tsv"))
    cfifo = os.path.join(d, "fifo_c.lua")
    campaign(cfifo, ck, 1, "corpus = %r," % fifo_corpus)
    try:
        r = subprocess.run([KERNLAB, "run", cfifo, "--out", os.path.join(d, "fifo.h5")],
                           capture_output=True, text=True, errors="replace", timeout=120)
        check(r.returncode == 0 and "compare: corpus:" in r.stdout and
              "not a regular file" in r.stdout,
              "a FIFO manifest is refused: %d %s" % (r.returncode, r.stdout[-400:]))
    except subprocess.TimeoutExpired:
        check(False, "a FIFO manifest blocked the run's comparison")
    # A manifest with an over-long line whose tail looks like a record, a
    # name reaching out of train/, and one holding an escape sequence (it
    # reached the terminal raw): none is the corpus's best
    lc = os.path.join(d, "long_corpus")
    os.makedirs(os.path.join(lc, "train"))
    with open(os.path.join(lc, "MANIFEST.tsv"), "w") as f:
        f.write("A" * 2047 + "evil\tc\ttrain\tok\t0.001\n" +
                "../escape\tc\ttrain\tok\t0.002\n" +
                "\x1b]0;PWNED\x07\tc\ttrain\tok\t0.003\n" +
                "01_naive\tc\ttrain\tok\t5.0\n")
    for name in ("01_naive", "evil", "\x1b]0;PWNED\x07"):
        shutil.copy(os.path.join(SRC, "kernels", "seeds", "01_naive.cu"),
                    os.path.join(lc, "train", name + ".cu"))
    clc = os.path.join(d, "long_corpus.lua")
    campaign(clc, ck, 1, "corpus = %r," % lc)
    r = run("run", clc, "--out", os.path.join(d, "long_corpus.h5"))
    check(r.returncode == 0 and "MANIFEST.tsv): 01_naive," in r.stdout and
          "\x1b" not in r.stdout,
          "the manifest's best is a listed train kernel: %r" % r.stdout[-400:])
    # A fractional timeout the baseline misses: said as it is (it read
    # "the 0 s deadline"), and no baseline time of -1.0 us
    cto = os.path.join(d, "timeout_half.lua")
    campaign(cto, ck, 1, "timeout = 0.5,")
    with open(cto) as f:
        text_to = f.read()
    with open(cto, "w") as f:
        f.write(text_to.replace("M = 32, N = 32, K = 32", "M = 1024, N = 1024, K = 1024"))
    r = run("run", cto, "--out", os.path.join(d, "timeout_half.h5"))
    check(r.returncode == 0 and "within the 0.5 s deadline" in r.stderr and
          "baseline (naive seed): none" in r.stdout and "-1.0 us" not in r.stdout,
          "a missed 0.5 s deadline said as such: %d %s %s" % (r.returncode, r.stdout[-300:],
                                                             r.stderr[-300:]))
    # A step whose update cannot fit this machine's memory is refused at
    # the start, naming the fields, not after a step of sampling
    cbig = os.path.join(d, "big_batch.lua")
    campaign(cbig, ck, 1, "prompts_per_step = 256,")
    with open(cbig) as f:
        text_big = f.read()
    with open(cbig, "w") as f:
        f.write(text_big.replace("group_size = 2,", "group_size = 1024,")
                .replace("max_tokens = 64", "max_tokens = 4096"))
    r = run("run", cbig, "--out", os.path.join(d, "big.h5"))
    check(r.returncode == 2 and "activations" in r.stderr and "group_size 1024" in r.stderr and
          "sampling.max_tokens 4096" in r.stderr and "baseline" not in r.stdout and
          not os.path.exists(os.path.join(d, "big.h5")),
          "an update too large for memory refused at once: %d %s" % (r.returncode, r.stderr[-400:]))
    # A formula that passes its load-time check (the fixture's candidates
    # are "gpu") but fails on every candidate of the campaign: the step
    # says so, nothing is scored, and the policy is not updated (AdamW
    # would move it along its momentum with all advantages 0)
    failing = os.path.join(d, "fails.lua")
    with open(failing, "w") as f:
        f.write("return { score = function(c, ctx)\n"
                "  if c.backend ~= 'gpu' then error('no formula for ' .. c.backend) end\n"
                "  return {x = 1} end }\n")
    cf = os.path.join(d, "fails_c.lua")
    campaign(cf, ck, 1, "reward = %r," % failing)
    fout = os.path.join(d, "fails.h5")
    r = run("run", cf, "--out", fout)
    def params(path):
        raw = open(path, "rb").read()
        n = struct.unpack_from("<Q", raw, 56)[0]
        return raw[256:256 + 4 * n]
    check(r.returncode == 0 and "no candidate was scored; the policy is not updated" in r.stderr
          and "2 of 2 candidates unscored" in r.stderr and
          "no candidate was scored in any of the 1 step(s) run" in r.stderr and
          params(fout[:-3] + ".ckpt") == params(ck),
          "a step with no candidate scored leaves the policy as it was: %d %s"
          % (r.returncode, r.stderr[-400:]))
    # Every group's rewards equal (a constant formula; so too when nothing
    # compiles and each failure scores alike): every advantage is 0 and,
    # with no KL term, so is the gradient. AdamW still moved the weights
    # (weight decay here; its momentum after a step with signal); now the
    # step says there was nothing to learn and leaves the policy as it was
    flat = os.path.join(d, "flat.lua")
    with open(flat, "w") as f:
        f.write("return { score = function(c, ctx) return {x = 1} end }\n")
    cfl = os.path.join(d, "flat_c.lua")
    campaign(cfl, ck, 2, "reward = %r, optim = {lr = 1e-3, weight_decay = 0.1}," % flat)
    flout = os.path.join(d, "flat.h5")
    r = run("run", cfl, "--out", flout)
    check(r.returncode == 0 and r.stderr.count("every group's rewards are equal") == 2 and
          "the policy is not updated this step" in r.stderr and
          "every group's rewards were equal in all of the 2 step(s) run" in r.stderr and
          params(flout[:-3] + ".ckpt") == params(ck),
          "steps whose every group's rewards are equal leave the policy as it was: %d %s"
          % (r.returncode, r.stderr[-400:]))
    # A formula returning 1e150 (the largest total allowed, RW_MAX_TOTAL):
    # the step line shows it with an exponent, not as a 151-digit number
    huge = os.path.join(d, "huge.lua")
    with open(huge, "w") as f:
        f.write("return { score = function(c, ctx) return {x = 1e150} end }\n")
    ch = os.path.join(d, "huge_c.lua")
    campaign(ch, ck, 1, "reward = %r," % huge)
    r = run("run", ch, "--out", os.path.join(d, "huge.h5"))
    step_lines = [l for l in r.stdout.splitlines() if l.startswith("step 1/1")]
    check(r.returncode == 0 and step_lines and "reward mean 1e+150 max 1e+150" in step_lines[0]
          and len(step_lines[0]) < 300,
          "a 1e150 reward on the step line: %r" % step_lines)
    # --resume reads the file, then sets up (tokenizer, model, evaluator)
    # before it opens the file to append: another writer appending in
    # between (strace holds the tokenizer's open 5 s) is noticed, and the
    # resume stops instead of recording over a file it no longer knows
    strace = shutil.which("strace")
    check(strace is not None, "strace is installed (scripts/deps.sh)")
    if strace:
        c4h = os.path.join(d, "tiny4h.lua")
        campaign(c4h, ck, 4)
        moved = os.path.join(d, "moved.h5")
        shutil.copy(out, moved)
        shutil.copy(out[:-3] + ".ckpt", moved[:-3] + ".ckpt")
        held = subprocess.Popen([strace, "-o", os.devnull, "-P", ck + ".tok", "-e",
                                 "inject=openat:delay_exit=5000000", KERNLAB, "run", c4h,
                                 "--out", moved, "--resume"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, ASAN_OPTIONS=(os.environ.get(
                                    "ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")))
        time.sleep(1.0)
        e = run("eval", os.path.join(SRC, "kernels", "seeds", "01_naive.cu"), "--shape",
                "32x32x32", "--out", moved)
        hout, herr = held.communicate(timeout=600)
        check(e.returncode == 0 and held.returncode == 3 and
              "changed while this run set up" in herr and "step" not in hout,
              "a file appended to while --resume set up: stopped: eval %d, run %d %r"
              % (e.returncode, held.returncode, herr[-300:]))
    # --resume where the checkpoint cannot be written (a read-only folder):
    # said before anything runs, the results untouched. Root ignores folder
    # modes, so as root the run drops to nobody (setpriv) over a copy the
    # file's owner may append to but whose folder it may not write.
    ro = os.path.join(d, "ro")
    os.mkdir(ro)
    shutil.copy(out, os.path.join(ro, "r.h5"))
    shutil.copy(out[:-3] + ".ckpt", os.path.join(ro, "r.ckpt"))
    as_user = []
    if os.geteuid() == 0:
        os.chmod(d, 0o755)
        for f in ("r.h5", "r.ckpt"):
            os.chown(os.path.join(ro, f), 65534, 65534)
        as_user = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    os.chmod(ro, 0o555)
    ro_before = open(os.path.join(ro, "r.h5"), "rb").read()
    c4 = os.path.join(d, "tiny4.lua")
    campaign(c4, ck, 4)
    p = subprocess.run(as_user + [KERNLAB, "run", c4, "--out", os.path.join(ro, "r.h5"),
                                  "--resume"], capture_output=True, text=True, timeout=600)
    check(p.returncode == 3 and "the checkpoint: cannot write" in p.stderr and
          os.path.join(ro, "r.ckpt") in p.stderr and "step" not in p.stdout,
          "read-only folder: said before any step: %d %r %r" % (p.returncode, p.stdout, p.stderr))
    check(open(os.path.join(ro, "r.h5"), "rb").read() == ro_before and
          sorted(os.listdir(ro)) == ["r.ckpt", "r.h5"], "read-only folder: nothing changed")
    os.chmod(ro, 0o755)
    # a folder without room for a checkpoint (a 256 KiB tmpfs; root only):
    # said before any step, no results file made
    small = os.path.join(d, "small")
    os.mkdir(small)
    if os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs",
                                             small], capture_output=True).returncode == 0:
        try:
            r = run("run", c4, "--out", os.path.join(small, "s.h5"))
            check(r.returncode == 3 and "free some space first" in r.stderr and
                  "step" not in r.stdout and not os.listdir(small),
                  "no room for a checkpoint: said first: %d %r" % (r.returncode, r.stderr[-300:]))
        finally:
            subprocess.run(["umount", small])
    else:
        print("run into a full folder: not tested (mounting a tmpfs needs root)")

    # Kill mid-campaign, resume: every (step, sample) exactly once.
    c5 = os.path.join(d, "kill.lua")
    campaign(c5, ck, 5)
    kout = os.path.join(d, "runs", "kill.h5")
    proc = subprocess.Popen([KERNLAB, "run", c5, "--out", kout], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, errors="replace")
    for line in proc.stdout:
        if line.startswith("step 1/"):
            break
    time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    # what a kill mid-save leaves: the checkpoint's temporary file, named
    # by the dead process's pid; the resume removes it
    stale = kout[:-3] + ".ckpt.tmp.%d" % proc.pid
    with open(stale, "wb") as f:
        f.write(b"\0" * 4096)
    r = run("run", c5, "--out", kout, "--resume")
    check(r.returncode == 0, "resume after kill exits 0: %s" % r.stderr[-800:])
    check(not os.path.exists(stale) and "removed the temporary files" in r.stderr,
          "the killed run's temporary checkpoint is removed: %s" % r.stderr[-300:])
    kc = candidates(kout)
    keys = sorted((c["step"], c["sample"]) for c in kc)
    check(keys == [(s, i) for s in range(5) for i in range(2)],
          "after kill + resume each (step, sample) once: %s" % keys)
    check(n_steps(kout) == 5, "5 step records after kill + resume")

    # Ctrl-C, as a terminal sends it: SIGINT to the whole process group.
    # The step in flight finishes and is recorded, the run exits 130 naming
    # the --resume command, nothing of the step is lost or disturbed (its
    # candidates are those the uninterrupted run recorded, with the same
    # outcomes: no worker was killed by it), no temporary file is left.
    def interrupted_run(camp, out, signals, after="step 1/", extra=(), delay=0):
        return interrupted([KERNLAB, "run", camp, "--out", out, *extra], after,
                           signals=signals, delay=delay)

    def outcome(c):
        return (c["step"], c["sample"], c["src_sha256"], c["status"], c["compiled"], c["correct"])

    iout = os.path.join(d, "runs", "int.h5")
    rc, text, err = interrupted_run(c5, iout, 1)
    m = re.search(r"interrupted: (\d) of 5 steps done", text)
    k = int(m.group(1)) if m else -1
    check(rc == 130 and k in (1, 2) and "interrupted: the step in flight finishes" in err,
          "Ctrl-C: exit 130 after the step in flight: %d %s %s" % (rc, text[-300:], err[-300:]))
    check(("--out %s --resume" % iout) in text, "it names the resume command: %s" % text[-300:])
    ic = candidates(iout)
    check(sorted(outcome(c) for c in ic) ==
          sorted(outcome(c) for c in kc if c["step"] < k) and n_steps(iout) == k,
          "the interrupted run recorded its %d steps whole, as the uninterrupted did" % k)
    def stray():  # SIGKILL's run above may leave kill.ckpt.tmp.PID: nothing can help that
        return [f for f in os.listdir(os.path.join(d, "runs")) if f.startswith("int") and ".tmp." in f]
    check(not stray(), "no temporary file left: %s" % stray())
    r = run("run", c5, "--out", iout, "--resume")
    check(r.returncode == 0 and sorted((c["step"], c["sample"]) for c in candidates(iout)) ==
          [(s_, i) for s_ in range(5) for i in range(2)], "resume after Ctrl-C: each once")
    # The printed command continues the run as given: a campaign and a
    # results path with spaces and a quote, and a flag, survive a shell
    odd = os.path.join(d, "my runs")
    os.mkdir(odd)
    oddc = os.path.join(odd, "it's a camp.lua")
    shutil.copy(c5, oddc)
    oddo = os.path.join(odd, "int 3.h5")
    rc, text, err = interrupted_run(oddc, oddo, 1, extra=("--policy-device", "cpu"))
    cmd = next((l[len("continue with: "):] for l in text.splitlines()
                if l.startswith("continue with: ")), "")
    check(rc == 130 and cmd.startswith("kernlab run ") and "--policy-device cpu" in cmd,
          "the resume command keeps the flags: %r" % cmd)
    r = subprocess.run(cmd.replace("kernlab", "'%s'" % KERNLAB, 1), shell=True,
                       capture_output=True, text=True, errors="replace", timeout=600)
    check(r.returncode == 0 and sorted((c["step"], c["sample"]) for c in candidates(oddo)) ==
          [(s_, i) for s_ in range(5) for i in range(2)],
          "the printed command, pasted into a shell, finishes the run: %s" % r.stderr[-300:])
    check("is not the campaign text" not in r.stdout,
          "resume with the same campaign: no note of edits: %s" % r.stdout[:400])
    # Killed after step 1's records, before its checkpoint (as when the
    # checkpoint is lost): --resume runs step 1 again from the campaign's
    # checkpoint without recording it, then goes on
    c1out = os.path.join(d, "runs", "nock.h5")
    r = run("run", c1, "--out", c1out)
    first = candidates(c1out)
    os.unlink(os.path.join(d, "runs", "nock.ckpt"))
    r = run("run", c5, "--out", c1out, "--resume")
    check(r.returncode == 0 and "step 1 was recorded but not checkpointed" in r.stderr,
          "resume without the first step's checkpoint: %d %s" % (r.returncode, r.stderr[-300:]))
    nc = candidates(c1out)
    check(sorted((c["step"], c["sample"]) for c in nc) ==
          [(s_, i) for s_ in range(5) for i in range(2)] and
          [c["src_sha256"] for c in nc[:2]] == [c["src_sha256"] for c in first],
          "each (step, sample) once, step 1's kept")
    # the summary's best kernel is one of the file (step 1's re-run samples
    # are not recorded and must not be named)
    m = re.search(r"best correct kernel: ([0-9.]+) us", r.stdout)
    best = [c["time_us"] for c in nc if c["correct"] and not c["flags"] and c["time_us"] > 0]
    check((m is None and not best) or
          (m is not None and best and abs(float(m.group(1)) - min(best)) <= 0.05 + 1e-6 * min(best)),
          "the summary names the file's best kernel: %s vs %s" % (m and m.group(1), best and min(best)))

    # The starting checkpoint re-primed (here: replaced by another of the
    # same tokenizer) between a run and its --resume: with a KL term, the
    # reference would be another model, and where nothing is checkpointed
    # the steps would run again from it: refused, naming both hashes, the
    # file untouched; put back, the resume goes on
    ckb = os.path.join(d, "start.ckpt")
    shutil.copy(ck, ckb)
    shutil.copy(ck + ".tok", ckb + ".tok")
    kl1, kl2 = os.path.join(d, "kl1.lua"), os.path.join(d, "kl2.lua")
    campaign(kl1, ckb, 1)
    campaign(kl2, ckb, 2)
    for f in (kl1, kl2):
        with open(f) as fh:
            t = fh.read()
        with open(f, "w") as fh:
            fh.write(t.replace("grpo = {mask_truncated = false}",
                               "grpo = {mask_truncated = false, beta = 0.04}"))
    klout = os.path.join(d, "runs", "kl.h5")
    r = run("run", kl1, "--out", klout)
    check(r.returncode == 0, "a run with a KL term: %s" % err_tail(r.stderr))
    shutil.copy(ckb, ckb + ".orig")
    shutil.copy(os.path.join(d, "runs", "kl.ckpt"), ckb)  # other weights, same tokenizer
    before = candidates(klout)
    r = run("run", kl2, "--out", klout, "--resume")
    check(r.returncode == 2 and "is not the checkpoint this run started from" in r.stderr and
          "reference" in r.stderr and candidates(klout) == before and n_steps(klout) == 1,
          "--resume with another starting checkpoint and beta > 0: refused: %d %s" %
          (r.returncode, err_tail(r.stderr)))
    shutil.copy(ckb + ".orig", ckb)
    r = run("run", kl2, "--out", klout, "--resume")
    check(r.returncode == 0 and n_steps(klout) == 2,
          "the starting checkpoint put back: the resume goes on: %d %s" %
          (r.returncode, err_tail(r.stderr)))
    # No KL term, step 1 recorded but its checkpoint lost: step 1 runs again
    # from the starting checkpoint, so a re-primed one is refused there too
    # (it was taken: steps_done 1 read as 'continues from its own')
    nk1, nk2 = os.path.join(d, "nk1.lua"), os.path.join(d, "nk2.lua")
    campaign(nk1, ckb, 1)
    campaign(nk2, ckb, 2)
    nkout = os.path.join(d, "runs", "nk.h5")
    r = run("run", nk1, "--out", nkout)
    check(r.returncode == 0, "a run without a KL term: %s" % err_tail(r.stderr))
    os.unlink(os.path.join(d, "runs", "nk.ckpt"))
    shutil.copy(os.path.join(d, "runs", "kl.ckpt"), ckb)  # other weights, same tokenizer
    before = candidates(nkout)
    r = run("run", nk2, "--out", nkout, "--resume")
    check(r.returncode == 2 and "is not the checkpoint this run started from" in r.stderr and
          "the steps run again from it" in r.stderr and candidates(nkout) == before and
          n_steps(nkout) == 1,
          "--resume re-running step 1 from another starting checkpoint: refused: %d %s" %
          (r.returncode, err_tail(r.stderr)))
    shutil.copy(ckb + ".orig", ckb)

    # Twice: stops at once, by SIGINT; resume still records each once (a
    # campaign with longer steps, so that the second comes within one)
    c6 = os.path.join(d, "long.lua")
    campaign(c6, ck, 4, "prompts_per_step = 2,")
    with open(c6) as f:
        text = f.read()
    with open(c6, "w") as f:
        f.write(text.replace("max_tokens = 64", "max_tokens = 600").replace(
            "group_size = 2", "group_size = 4"))
    iout2 = os.path.join(d, "runs", "int2.h5")
    rc, text, err = interrupted_run(c6, iout2, 2)
    check(rc == -signal.SIGINT and "interrupted again: stopping now" in err,
          "a second Ctrl-C stops at once, by SIGINT: %d %s" % (rc, err[-300:]))
    check(not stray(), "no temporary file left after the second: %s" % stray())
    r = run("run", c6, "--out", iout2, "--resume")
    check(r.returncode == 0 and sorted((c["step"], c["group"], c["sample"])
                                       for c in candidates(iout2)) ==
          [(s_, g, i) for s_ in range(4) for g in range(2) for i in range(4)],
          "resume after two Ctrl-C: each once (exit %d): %s" %
          (r.returncode, err_tail(r.stderr)))
    # During the last (here the only) step: it finishes, is recorded, and
    # the comparison with the baselines is skipped; or, if the signal came
    # before the step began, none is run: exit 130 either way
    c7 = os.path.join(d, "last.lua")
    with open(c6) as f:
        text = f.read()
    with open(c7, "w") as f:
        f.write(text.replace("steps = 4", "steps = 1"))
    iout3 = os.path.join(d, "runs", "int3.h5")
    rc, text, err = interrupted_run(c7, iout3, 1, after="baseline", delay=0.3)
    n = len(candidates(iout3))
    check(rc == 130 and "compare:" not in text and
          (("interrupted: all 1 steps done" in text and n == 8) or
           ("interrupted: 0 of 1 steps done" in text and n == 0)),
          "Ctrl-C in the last step: exit 130, no comparison: %d %d %s %s" %
          (rc, n, text[-400:], err_tail(err)))
    line = next((l for l in text.splitlines() if l.startswith("interrupted:")), "")
    ck3 = os.path.join(d, "runs", "int3.ckpt")
    check(("checkpoint " + ck3 in line) == os.path.exists(ck3) and
          ("no checkpoint written yet" in line) != os.path.exists(ck3),
          "the line names the checkpoint when there is one: %r" % line)

    # Before the first step (Ctrl-C while the run loads its policy and
    # times the baseline): none is run, and the line says no checkpoint was
    # written, where it named RUN.ckpt as if there were one. The signal
    # goes as soon as the run catches SIGINT (SigCgt in /proc), a fraction
    # of a second before its first step can start.
    def interrupt_at_setup(argv):
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                errors="replace")
        deadline = time.time() + 60
        while proc.poll() is None and time.time() < deadline:
            try:
                with open("/proc/%d/status" % proc.pid) as f:
                    caught = next((int(l.split()[1], 16) for l in f
                                   if l.startswith("SigCgt:")), 0)
            except OSError:
                break
            if caught >> (signal.SIGINT - 1) & 1:
                break
            time.sleep(0.001)
        proc.send_signal(signal.SIGINT)
        out_, err_ = proc.communicate(timeout=600)
        return proc.returncode, out_, err_

    iout0 = os.path.join(d, "runs", "int0.h5")
    ck0 = os.path.join(d, "runs", "int0.ckpt")
    rc, text, err = interrupt_at_setup([KERNLAB, "run", c1, "--out", iout0])
    line = next((l for l in text.splitlines() if l.startswith("interrupted:")), "")
    check(rc == 130 and line.startswith("interrupted: 0 of 1 steps done") and
          "step 1/" not in text and not os.path.exists(ck0),
          "Ctrl-C before the first step: none is run: %d %s %s" % (rc, text[-400:], err_tail(err)))
    check("no checkpoint written yet" in line and ck0 not in line,
          "Ctrl-C before the first step: no checkpoint named: %r" % line)
    r = run("run", c1, "--out", iout0, "--resume")
    check(r.returncode == 0 and len(candidates(iout0)) == 2 and os.path.exists(ck0),
          "--resume after Ctrl-C before the first step runs it: %d %s" %
          (r.returncode, err_tail(r.stderr)))

    # Two runs on one output: the one whose set-up (timing a 768^3
    # baseline) takes longer finds the file the other made meanwhile and is
    # refused, instead of appending its steps to the other's
    cbig = os.path.join(d, "big.lua")
    campaign(cbig, ck, 1)
    with open(cbig) as f:
        text = f.read()
    with open(cbig, "w") as f:
        f.write(text.replace("M = 32, N = 32, K = 32", "M = 768, N = 768, K = 768"))
    both = os.path.join(d, "runs", "both.h5")
    slow = subprocess.Popen([KERNLAB, "run", cbig, "--out", both], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, errors="replace")
    time.sleep(0.2)
    fast = run("run", c1, "--out", both)
    _, serr = slow.communicate(timeout=600)
    bc = candidates(both)
    check(fast.returncode == 0 and slow.returncode == 2 and "not replaced" in serr and
          all(c["task"] == "fp32_32x32x32" for c in bc) and len(bc) == 2,
          "two runs on one output: the second to open is refused: %d %d %s %s" %
          (fast.returncode, slow.returncode, serr[-300:], [c["task"] for c in bc]))

    # Another run's checkpoint under this file's name (the same campaign,
    # the same step count: only the run id tells them apart), and prime's:
    # --resume refuses both, the files untouched
    for other, says in ((os.path.join(d, "runs", "again.ckpt"), "its run id is"),
                        (ck, "written by prime or an older kernlab")):
        mix = os.path.join(d, "runs", "mix.h5")
        shutil.copy(os.path.join(d, "runs", "tiny.h5"), mix)
        shutil.copy(other, mix[:-3] + ".ckpt")
        before = open(mix, "rb").read()
        r = run("run", c3, "--out", mix, "--resume")
        check(r.returncode == 2 and "is not the checkpoint of the run" in r.stderr and
              says in r.stderr and open(mix, "rb").read() == before,
              "--resume with %s: refused: %d %s" % (os.path.basename(other), r.returncode,
                                                   r.stderr[-300:]))
        os.unlink(mix)
        os.unlink(mix[:-3] + ".ckpt")

    # A checkpoint whose results file was removed: not overwritten by a
    # new run, not continued by --resume
    lone = os.path.join(d, "runs", "lone.h5")
    shutil.copy(os.path.join(d, "runs", "tiny.ckpt"), lone[:-3] + ".ckpt")
    before = open(lone[:-3] + ".ckpt", "rb").read()
    for extra in ((), ("--resume",)):
        r = run("run", c1, "--out", lone, *extra)
        check(r.returncode == 2 and "its results file" in r.stderr and
              open(lone[:-3] + ".ckpt", "rb").read() == before and not os.path.exists(lone),
              "a lone checkpoint %s: refused, untouched: %s" % (extra, r.stderr[-300:]))

    # Bad campaign files: exit 2, naming the place.
    bad = {
        "syntax.lua": ("return {\n  steps = 2,\n  group_size = ,\n}\n", "syntax.lua:3:"),
        "type.lua": ("return {group_size = 'four', checkpoint = %r}\n" % ck, "group_size"),
        "enum.lua": ("return {grpo = {loss_type = 'foo'}, checkpoint = %r}\n" % ck,
                     "grpo.loss_type: expected one of grpo|bnpo|dr_grpo|dapo"),
        "unknown.lua": ("return {group_sise = 3, checkpoint = %r}\n" % ck, "group_sise"),
        "timeout.lua": ("return {timeout = 0, checkpoint = %r}\n" % ck, "timeout"),
        "eps_low.lua": ("return {grpo = {eps_low = 1}, checkpoint = %r}\n" % ck,
                        "grpo.eps_low: expected a number in [0, 1), got 1"),
        "nockpt.lua": ("return {checkpoint = %r}\n" % os.path.join(d, "nope.ckpt"), "nope.ckpt"),
        "notable.lua": ("return 5\n", "table"),
        # a byte-order mark and a "#!" line are skipped as Lua's loader does,
        # the line numbers kept
        "shebang.lua": ("\ufeff#!/usr/bin/env kernlab\nreturn {\n  group_size = ,\n}\n",
                        "shebang.lua:3:"),
        "slashname.lua": ("return {name = 'sub/../x', checkpoint = %r}\n" % ck,
                          "name: expected a file-name part"),
        "warmup.lua": ("return {steps = 2, optim = {warmup = 5}, checkpoint = %r}\n" % ck,
                       "optim.warmup: 5 exceeds steps (2)"),
        # NaN (0/0) was said as "-nan", and an integer field did not say
        # its range; every numeric field goes through one description
        "nan_steps.lua": ("return {steps = 0/0, checkpoint = %r}\n" % ck,
                          "steps: expected an integer in [1, 1000000], got nan"),
        "nan_timeout.lua": ("return {timeout = 0/0, checkpoint = %r}\n" % ck,
                            "timeout: expected a number in [0.5, 3600], got nan"),
        "nan_top_p.lua": ("return {sampling = {top_p = 0/0}, checkpoint = %r}\n" % ck,
                          "sampling.top_p: expected a number in [1e-06, 1], got nan"),
        "nan_task.lua": ("return {task = {M = 0/0, N = 64, K = 64}, checkpoint = %r}\n" % ck,
                         "task.M: expected an integer in [1, 65536], got nan"),
        "inf_warmup.lua": ("return {optim = {warmup = -1/0}, checkpoint = %r}\n" % ck,
                           "optim.warmup: expected an integer in [0, 1000000], got -inf"),
        # a partial task was completed from the default shape (64x64x256)
        "partial_task.lua": ("return {task = {M = 64, N = 64}, checkpoint = %r}\n" % ck,
                             "task.K: missing; a task table gives M, N and K"),
        # a metatable whose __index errs: fields are read raw, never through it
        "meta.lua": ("return setmetatable({group_sise = 3, checkpoint = %r}, "
                     "{__index = function() error('boom') end})\n" % ck, "group_sise"),
        # The reward scripts' sandbox: limits a script cannot catch. Each of
        # these hung or aborted the lab in the state campaigns had before.
        "pcall_loop.lua": ("while true do pcall(function() while true do end end) end\n",
                           "pcall_loop.lua:1: instruction budget exceeded"),
        "xpcall_loop.lua": ("xpcall(function() while true do end end,\n"
                            "       function() while true do end end)\nreturn {}\n",
                            "instruction budget exceeded"),
        "gc_loop.lua": ("setmetatable({}, {__gc = function() while true do end end})\n"
                        "return {}\n", "__gc finalizers are not allowed in campaign files"),
        "memory.lua": ("local t = {}\nfor i = 1, 1e8 do t[i] = ('x'):rep(1000) .. i end\n"
                       "return {}\n", "memory cap exceeded"),
        "random.lua": ("return {seed = math.random(100), checkpoint = %r}\n" % ck,
                       "math.random is disabled in campaign files"),
        "errtable.lua": ("error({})\n", "errtable.lua:1: (error object is a table value)"),
        "escape.lua": ("error('\\27[2J\\27]0;title\\7 oops')\n", "escape.lua:1: ?[2J?]0;title? oops"),
        "backtrack.lua": ("string.find(string.rep('a', 20000), string.rep('a-', 30) .. 'b')\n"
                          "return {}\n", "pattern too expensive for campaign files"),
    }
    for name, (text, want) in bad.items():
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        r = run("run", path, "--out", os.path.join(d, "runs", "bad.h5"))
        check(r.returncode == 2 and want in r.stderr and name in r.stderr,
              "%s: exit 2 naming %r: %d %s" % (name, want, r.returncode, r.stderr))
    check(not os.path.exists(os.path.join(d, "runs", "bad.h5")), "bad campaigns write nothing")
    # A tokenizer named on its own that is missing: no hint to prime one
    # over the checkpoint; a checkpoint that is a symlink loop: bad input
    path = os.path.join(d, "tokmiss.lua")
    with open(path, "w") as f:
        f.write("return {checkpoint = %r, tokenizer = %r}\n" % (ck, os.path.join(d, "no.tok")))
    r = run("run", path, "--out", os.path.join(d, "runs", "bad.h5"))
    check(r.returncode == 2 and "no.tok" in r.stderr and "kernlab prime --out" not in r.stderr,
          "a missing custom tokenizer: no prime hint: %s" % r.stderr[-300:])
    loop = os.path.join(d, "loop.ckpt")
    os.symlink(loop, loop)
    r = run("generate", "--ckpt", loop, "--tok", ck + ".tok", "--prompt", "x")
    check(r.returncode == 2 and "symbolic links" in r.stderr,
          "a symlink-loop checkpoint is bad input: %d %s" % (r.returncode, r.stderr[-300:]))
    # A long path: the message keeps the field and the reason (a 1 KB
    # path filled it); one too long for the lab is refused as such
    deep = os.path.join(d, "d" * 250, "e" * 250, "f" * 250)
    os.makedirs(deep)
    with open(os.path.join(deep, "x.lua"), "w") as f:
        f.write("return {stpes = 1}\n")
    r = run("run", os.path.join(deep, "x.lua"))
    check(r.returncode == 2 and "x.lua: stpes: unknown field" in r.stderr,
          "a long path keeps the field in the message: %s" % r.stderr[-300:])
    # a checkpoint path of 1020..1023 bytes fitted the field, but its
    # default tokenizer CKPT.tok did not: it was cut to another name
    ck_long = os.path.join(d, "d" * 250, "e" * 250, "f" * 250, "g" * (1021 - len(deep) - 1))
    with open(os.path.join(deep, "ck.lua"), "w") as f:
        f.write("return {checkpoint = %r}\n" % ck_long)
    r = run("run", os.path.join(deep, "ck.lua"))
    check(len(ck_long) == 1021 and r.returncode == 2 and
          "checkpoint: expected a non-empty string under 1020 bytes" in r.stderr,
          "a checkpoint path with no room for its .tok: refused as such: %s" % r.stderr[-300:])
    r = run("run", os.path.join(deep, "..", "..", "..", "d" * 250, "e" * 250, "f" * 250, "x.lua"))
    check(r.returncode == 2 and "path is" in r.stderr and "at most 1023" in r.stderr,
          "a path over 1023 bytes refused as such: %s" % r.stderr[-300:])
    # The 1 MiB limit on a campaign file: 1 MiB is read (and its typo
    # named), one byte more is refused
    for size, want in ((1 << 20, "stpes"), ((1 << 20) + 1, "larger than 1 MiB")):
        path = os.path.join(d, "size%d.lua" % size)
        head = "return {stpes = 1}\n--"
        with open(path, "w") as f:
            f.write(head + "x" * (size - len(head) - 1) + "\n")
        check(os.path.getsize(path) == size, "file of %d bytes" % size)
        r = run("run", path, "--out", os.path.join(d, "runs", "bad.h5"))
        check(r.returncode == 2 and want in r.stderr,
              "a %d-byte campaign: exit 2 naming %r: %s" % (size, want, r.stderr[-300:]))

    # A step a killed run left partly recorded: --resume records the rest,
    # and the step's /steps record describes the candidates the file holds
    # (the killed run's first one with its recorded reward), not the
    # re-run's. The reward is the baseline, timed again by each run, so the
    # two runs' rewards differ.
    rb = os.path.join(d, "baseline_reward.lua")
    with open(rb, "w") as f:
        f.write("return {score = function(c, ctx) return {b = c.baseline_us or 0} end}\n")
    cps = []
    for n in (1, 2):
        path = os.path.join(d, "part%d.lua" % n)
        campaign(path, ck, n)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace(os.path.join(SRC, "lua", "reward", "default.lua"), rb))
        cps.append(path)
    pout = os.path.join(d, "runs", "part.h5")
    pck = os.path.join(d, "runs", "part.ckpt")
    r1 = run("run", cps[0], "--out", pout)
    shutil.copy(pck, pck + ".step1")
    r2 = run("run", cps[1], "--out", pout, "--resume")
    check(r1.returncode == 0 and r2.returncode == 0,
          "the two-step run: %s %s" % (r1.stderr[-300:], r2.stderr[-300:]))
    # as a kill after step 2's first record leaves it: 3 candidates, 1 step
    # record, step 1's checkpoint
    cut = subprocess.run(["/usr/bin/python3", "-c", """
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    f["candidates"].resize((3,))
    f["reward_components"].resize((3, f["reward_components"].shape[1]))
    f["steps"].resize((1,))
""", pout], capture_output=True, text=True)
    check(cut.returncode == 0, "h5py cuts the file to a partly recorded step: %s" % cut.stderr)
    os.replace(pck + ".step1", pck)
    kept = [c for c in candidates(pout) if c["step"] == 1]
    r = run("run", cps[1], "--out", pout, "--resume")
    check(r.returncode == 0, "resume of a partly recorded step: %s" % r.stderr[-500:])
    pc = [c for c in candidates(pout) if c["step"] == 1]
    check(len(kept) == 1 and sorted(c["sample"] for c in pc) == [0, 1] and
          pc[0]["reward"] == kept[0]["reward"],
          "step 2: the killed run's record kept, one added: %s -> %s" % (kept, pc))
    st = subprocess.run(["/usr/bin/python3", "-c", """
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    s = f["steps"][1]
    print(s["reward_mean"], s["reward_max"], s["correct_frac"])
""", pout], capture_output=True, text=True)
    got = [float(x) for x in st.stdout.split()] if st.returncode == 0 else []
    want = [c["reward"] for c in pc]
    check(len(got) == 3 and len(want) == 2 and
          abs(got[0] - sum(want) / 2) <= 1e-9 * max(1, abs(got[0])) and
          got[1] == max(want) and
          got[2] == sum(1 for c in pc if c["correct"]) / 2,
          "step 2's record is of the file's candidates: %s vs rewards %s (%s)" %
          (got, want, st.stderr[-300:]))

    # An update that diverges (rewards of +-1e150, the largest allowed,
    # unscaled: the advantages overflow float): exit 2 saying so, not blaming the checkpoint file;
    # the step's records are kept and no checkpoint is written.
    rd = os.path.join(d, "diverge_reward.lua")
    with open(rd, "w") as f:
        f.write("return {score = function(c, ctx)\n"
                "  return {x = ctx.index == 1 and 1e150 or -1e150} end}\n")
    cd_ = os.path.join(d, "diverge.lua")
    campaign(cd_, ck, 1)
    with open(cd_) as f:
        text = f.read()
    with open(cd_, "w") as f:
        f.write(text.replace("grpo = {mask_truncated = false},",
                             'grpo = {mask_truncated = false, scale_rewards = "none"},')
                .replace(os.path.join(SRC, "lua", "reward", "default.lua"), rd))
    dout = os.path.join(d, "runs", "diverge.h5")
    r = run("run", cd_, "--out", dout)
    check(r.returncode == 2 and "step 1: the update diverged" in r.stderr and
          "no checkpoint was written" in r.stderr and
          not os.path.exists(os.path.join(d, "runs", "diverge.ckpt")) and
          len(candidates(dout)) == 2,
          "a diverged update: exit 2 naming it, records kept: %d %s" % (r.returncode, r.stderr[-500:]))
    # An update that fails outright (two iterations: the first diverges,
    # the second's forward gives NaN): the step's candidates were lost, as
    # with an update out of memory; now they are recorded first
    cf2 = os.path.join(d, "fail_update.lua")
    with open(cf2, "w") as f:
        f.write(text.replace("grpo = {mask_truncated = false},",
                             'grpo = {mask_truncated = false, scale_rewards = "none", '
                             'num_iterations = 2},')
                .replace(os.path.join(SRC, "lua", "reward", "default.lua"), rd))
    fout2 = os.path.join(d, "runs", "fail_update.h5")
    r = run("run", cf2, "--out", fout2)
    check(r.returncode != 0 and "step 1: update:" in r.stderr and
          "candidates are recorded" in r.stderr and len(candidates(fout2)) == 2,
          "a failed update keeps the step's candidates: %d %s" % (r.returncode, r.stderr[-500:]))

    # --out: a value that is missing, empty, or a folder is refused before
    # anything is made (an "x/" used to become a folder); out beside the
    # campaign's own checkpoint would overwrite the policy it starts from.
    for args, want in ((["--out"], "missing value after --out"),
                       (["--out", ""], "--out wants a file name, got ''"),
                       (["--out", os.path.join(d, "made", "")], "names a folder"),
                       (["--out", d], "names a folder"),
                       (["--out", os.path.join(d, "x" * 300 + ".h5")], "is too long"),
                       # no .h5: its checkpoint X.ckpt's temporary is the
                       # longer name (it failed at the first save)
                       (["--out", os.path.join(d, "x" * 239)],
                        "the checkpoint beside the results, %s" % os.path.join(d, "x")),
                       (["--policy-device"], "missing value after --policy-device")):
        r = run("run", c1, *args)
        check(r.returncode == 2 and want in r.stderr,
              "run %s: exit 2 with %r: %d %s" % (args, want, r.returncode, r.stderr[-300:]))
    check(not os.path.exists(os.path.join(d, "made")), "--out x/ makes no folder")
    # --out over the 1023 bytes a campaign's out holds: it was cut there
    # without a word, and the results and checkpoint went to files named
    # after part of a folder, one level up
    deep = os.path.join(d, *(["r" * 220] * 5))
    os.makedirs(deep)
    long_out = os.path.join(deep, "x.h5")
    r = run("run", c1, "--out", long_out)
    check(r.returncode == 2 and
          "--out is %d bytes long (at most 1023)" % len(long_out) in r.stderr and
          not [f for f in os.listdir(os.path.dirname(deep))
               if os.path.isfile(os.path.join(os.path.dirname(deep), f))],
          "run --out over 1023 bytes: refused, nothing written: %d %s"
          % (r.returncode, r.stderr[-300:]))
    shutil.rmtree(os.path.join(d, "r" * 220))
    # --out whose folder cannot be made (a file in its path): said before
    # the policy is loaded, the backend resolved and the baseline timed
    # (~30 s at 1024^3), not after (of a campaign on gpu, the folder is
    # said, not here the device); a missing folder is made (runs/ above)
    on_gpu = os.path.join(d, "on_gpu.lua")
    open(on_gpu, "w").write(open(c1).read().replace('backend = "cpu-emu"', 'backend = "gpu"'))
    r = run("run", on_gpu, "--out", os.path.join(out, "x.h5"))
    check(r.returncode == 2 and "the output: cannot write" in r.stderr and
          "is a file, not a folder" in r.stderr and not r.stdout,
          "--out under a file: exit 2 before any set-up: %d %r %r" %
          (r.returncode, r.stdout[-300:], r.stderr[-300:]))
    r = run("run", c1, "--out", ck[:-len(".ckpt")] + ".h5")
    check(r.returncode == 2 and "would overwrite the policy it starts from" in r.stderr,
          "out onto the starting checkpoint: %d %s" % (r.returncode, r.stderr[-300:]))

    # Hot reload says each edit once: a broken edit, a second one failing
    # alike (the same Lua error, other text: told apart by its hash), then
    # the file put back as it was; a file left as it is says nothing more
    # (it said "still does not load" at every step). Each edit is made
    # once the previous one has been answered, so two cannot meet in one
    # reload.
    rr = os.path.join(d, "reload_reward.lua")
    shutil.copy(os.path.join(SRC, "lua", "reward", "default.lua"), rr)
    crl = os.path.join(d, "reload.lua")
    campaign(crl, ck, 10)
    with open(crl) as f:
        text = f.read()
    with open(crl, "w") as f:
        f.write(text.replace(os.path.join(SRC, "lua", "reward", "default.lua"), rr))

    def put(text):  # whole at once (a reload must not see it half written)
        with open(rr + ".new", "w") as f:
            f.write(text)
        os.replace(rr + ".new", rr)

    with open(os.path.join(SRC, "lua", "reward", "default.lua")) as f:
        original = f.read()
    edits = [("step 1/10", "return {score = function(c) return {x = 1} end\n"),  # unclosed
             ("did not load", "return {score = function(c) return {x = 2} end\n"),
             ("did not load", original)]
    pr_ = subprocess.Popen([KERNLAB, "run", crl, "--out", os.path.join(d, "runs", "reload.h5")],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           errors="replace")
    lines = []
    for line in pr_.stdout:
        lines.append(line)
        if edits and edits[0][0] in line:
            put(edits.pop(0)[1])
    _, rerr = pr_.communicate(timeout=600)
    out_text = "".join(lines)
    failed = [l for l in lines if "reward: an edit did not load: kept the previous formula" in l]
    versions = {m.group(1) for m in
                (re.search(r"not this version \(([0-9a-f]{12})\)", l) for l in failed) if m}
    check(pr_.returncode == 0 and not edits and len(failed) == 2 and len(versions) == 2 and
          all("reload_reward.lua:2:" in l and l.count("reload_reward.lua") == 1
              for l in failed),
          "two broken reward edits failing alike: each said once, naming its version: "
          "%d %s %s" % (pr_.returncode, out_text[-1500:], rerr[-300:]))
    check(out_text.count("is the script in use again") == 1 and
          "still does not load" not in out_text and "reward: reloaded" not in out_text,
          "the file put back: said once; nothing said at the other steps: %s"
          % out_text[-1500:])

    # No file: the built-in quick.lua, from any folder (here one without
    # lua/ or runs/: it names itself and the checkpoint it needs).
    r = run("run", "--out", os.path.join(d, "builtin.h5"), cwd=d)
    check(r.returncode == 2 and "quick.lua (built in)" in r.stderr and
          "runs/policy.ckpt" in r.stderr and "kernlab prime" in r.stderr,
          "built-in default campaign: %d %s" % (r.returncode, r.stderr))

done()
