#!/usr/bin/env python3
"""tests/integration/test_corpus.py — `kernlab corpus` (label integration).

usage: test_corpus.py KERNLAB SOURCE_DIR

A small generator script with known verdicts: two correct configurations
(two surface styles each) and one wrong variant. Checks the split (the
fastest configuration held out, the rest trained), that the wrong variant is
rejected and not written, the manifest, and the bad-input cases (a Lua error
names the script and line; no correct variant writes nothing and exits 2).
Then the named split (`holdout = {...}`): the named configuration is held
out even though it is the slower one, the closing line gives its measured
rank, a named configuration that is wrong is said, and a name no variant
has, a malformed list, or both fields are usage errors naming the script.
A corpus killed while writing its files leaves no partial train/, and the
same command then builds the corpus in that folder.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

KERNLAB, SRC = sys.argv[1], sys.argv[2]
from kltest import check, done  # noqa: E402


SCRIPT = r'''
return {
  holdout_fraction = 0.5,
  generate = function(kl)
    local v = {}
    local naive = kl.seed("02_coalesced.cu")
    local tiled = kl.seed("03_smem_tiling.cu")
    v[#v+1] = {name = "naive_a", config = "naive", source = naive}
    v[#v+1] = {name = "naive_b", config = "naive", source = naive:gsub("acc", "total")}
    v[#v+1] = {name = "tiled_a", config = "tiled", source = tiled}
    v[#v+1] = {name = "broken", config = "broken",
               source = naive:gsub("C%[row %* N %+ col%] = acc;", "C[0] = acc;")}
    return v
  end
}
'''


def corpus(script_text, out, keep=False):
    if not keep:  # corpus refuses a folder that already holds one
        shutil.rmtree(os.path.join(out, "c"), ignore_errors=True)
    with open(os.path.join(out, "gen.lua"), "w") as f:
        f.write(script_text)
    env = dict(os.environ, KL_SOURCE_DIR=SRC)
    return subprocess.run([KERNLAB, "corpus", "--script", os.path.join(out, "gen.lua"),
                           "--out", os.path.join(out, "c"), "--shape", "64x64x64"],
                          capture_output=True, text=True, env=env, timeout=600)


with tempfile.TemporaryDirectory() as d:
    p = corpus(SCRIPT, d)
    check(p.returncode == 0, "corpus exits 0: %s" % p.stderr[-400:])
    c = os.path.join(d, "c")
    man = open(os.path.join(c, "MANIFEST.tsv")).read().splitlines()
    rows = {l.split("\t")[0]: l.split("\t") for l in man[1:]}
    check(set(rows) == {"naive_a", "naive_b", "tiled_a", "broken"}, "manifest lists all: %s" % sorted(rows))
    check(rows.get("broken", [""] * 3)[2] == "rejected", "the wrong variant is rejected")
    check(not os.path.exists(os.path.join(c, "train", "broken.cu")) and
          not os.path.exists(os.path.join(c, "holdout", "broken.cu")), "rejected variants are not written")
    splits = {n: r[2] for n, r in rows.items() if n != "broken"}
    # two ranked configurations, holdout 0.5: exactly one held out, with both its styles
    held = {n for n, s in splits.items() if s == "holdout"}
    check(held in ({"naive_a", "naive_b"}, {"tiled_a"}), "one whole configuration held out: %s" % splits)
    for n, s in splits.items():
        check(os.path.exists(os.path.join(c, s, n + ".cu")), "%s written to %s" % (n, s))
    # the held-out configuration is the faster one
    t = {n: float(r[4]) for n, r in rows.items() if n != "broken"}
    best_naive, best_tiled = min(t["naive_a"], t["naive_b"]), t["tiled_a"]
    faster = {"naive_a", "naive_b"} if best_naive < best_tiled else {"tiled_a"}
    check(held == faster, "the fastest configuration is held out (%s)" % t)

    # holdout by name: the slower configuration, held out because it is named
    slower = "tiled" if best_naive < best_tiled else "naive"
    named = SCRIPT.replace("holdout_fraction = 0.5,", "holdout = {'%s', 'broken'}," % slower)
    p = corpus(named, d)
    check(p.returncode == 0, "named holdout: corpus exits 0: %s" % p.stderr[-400:])
    rows = {l.split("\t")[0]: l.split("\t") for l in
            open(os.path.join(c, "MANIFEST.tsv")).read().splitlines()[1:]}
    held = {n for n, r in rows.items() if r[2] == "holdout"}
    want = {"tiled_a"} if slower == "tiled" else {"naive_a", "naive_b"}
    check(held == want, "the named configuration is held out, not the fastest: %s" % held)
    check(rows["broken"][2] == "rejected", "a named wrong configuration is still rejected")
    check("configurations %s names; measured here they rank 2 of 2 correct" % os.path.join(d, "gen.lua")
          in p.stdout, "the closing line gives the named one's rank: %s" % p.stdout)
    check("held-out configuration broken is not correct here (wrong)" in p.stderr,
          "a named wrong configuration is said: %s" % p.stderr[-300:])
    for bad, says in [("holdout = {'nope'},", "holdout names 'nope', which is no variant's config"),
                      ("holdout = 'tiled',", "holdout: expected a list of 1 to 64 configuration names"),
                      ("holdout = {'tiled', 3},", "holdout[2]: expected a configuration name"),
                      ("holdout = {'tiled'}, holdout_fraction = 0.5,", "not both")]:
        p = corpus(SCRIPT.replace("holdout_fraction = 0.5,", bad), d)
        check(p.returncode == 2 and says in p.stderr and "gen.lua" in p.stderr,
              "%s: exit 2 saying %r: %s" % (bad, says, p.stderr[-300:]))

    # a table whose __index never returns: read raw, never called (an
    # __index run outside a protected call would abort the lab)
    meta = SCRIPT.strip()
    assert meta.startswith("return {") and meta.endswith("}")
    meta = ("return setmetatable({" + meta[len("return {"):-1] +
            "}, {__index = function() while true do end end, "
            "__len = function() while true do end end})\n")
    p = corpus(meta, d)
    check(p.returncode == 0, "a script's metamethods are never run: exit %d: %s"
          % (p.returncode, p.stderr[-300:]))

    # an existing corpus is never written over (its stale files would stay)
    p = corpus(SCRIPT, d)
    p2 = corpus(SCRIPT, d, keep=True)
    check(p.returncode == 0 and p2.returncode == 2 and "already holds a corpus" in p2.stderr
          and "evaluated" not in p2.stderr,
          "a second corpus into the same folder: refused before evaluating: %s" % p2.stderr[-300:])
    # train/ a dangling link (a corpus moved away): refused before
    # evaluating, as any corpus there is; it passed the check and failed
    # after every evaluation, exit 3, "cannot create the folders of c: File
    # exists", with a stray holdout/ left behind
    shutil.rmtree(os.path.join(d, "c"))
    os.mkdir(os.path.join(d, "c"))
    os.symlink(os.path.join(d, "moved-away"), os.path.join(d, "c", "train"))
    p = corpus(SCRIPT, d, keep=True)
    check(p.returncode == 2 and "already holds a corpus (train)" in p.stderr
          and "evaluated" not in p.stderr and
          os.listdir(os.path.join(d, "c")) == ["train"],
          "train/ a dangling link: refused before evaluating: %d %s" %
          (p.returncode, p.stderr[-300:]))
    # --out in a missing folder: made, parents too (runs/corpus in a fresh
    # clone); one that cannot be made (a file in its path) is said before
    # any variant is evaluated (it was said after all of them)
    with open(os.path.join(d, "gen.lua"), "w") as f:
        f.write(SCRIPT)
    env = dict(os.environ, KL_SOURCE_DIR=SRC)
    nested = os.path.join(d, "runs", "sub", "corpus")
    p = subprocess.run([KERNLAB, "corpus", "--script", os.path.join(d, "gen.lua"),
                        "--out", nested, "--shape", "64x64x64"],
                       capture_output=True, text=True, env=env, timeout=600)
    check(p.returncode == 0 and os.path.isfile(os.path.join(nested, "MANIFEST.tsv")),
          "corpus --out in a missing folder: made: %d %s" % (p.returncode, p.stderr[-300:]))
    blocked = os.path.join(nested, "MANIFEST.tsv", "c")
    p = subprocess.run([KERNLAB, "corpus", "--script", os.path.join(d, "gen.lua"),
                        "--out", blocked, "--shape", "64x64x64"],
                       capture_output=True, text=True, env=env, timeout=600)
    check(p.returncode == 2 and "MANIFEST.tsv is a file, not a folder" in p.stderr
          and "evaluated" not in p.stderr,
          "corpus --out under a file: exit 2 (the path's mistake) naming the file, "
          "before evaluating: %d %s" %
          (p.returncode, p.stderr[-300:]))
    # a run that writes nothing (no variant correct) leaves no folder made
    empty = os.path.join(d, "runs", "none")
    with open(os.path.join(d, "gen0.lua"), "w") as f:
        f.write("return {generate = function(kl) return {{name='x', config='x', source="
                "'KL_LAUNCH(1,1,1,1,0); extern \"C\" __global__ void matmul(const float* A, "
                "const float* B, float* C, int M, int N, int K) {}'}} end}")
    p = subprocess.run([KERNLAB, "corpus", "--script", os.path.join(d, "gen0.lua"),
                        "--out", empty, "--shape", "64x64x64"],
                       capture_output=True, text=True, env=env, timeout=600)
    check(p.returncode == 2 and "none of the" in p.stderr and not os.path.exists(empty),
          "no correct variant: no folder left: %d %s" % (p.returncode, p.stderr[-300:]))
    # names become file names: no way out of --out, no duplicates
    src = "kl.seed('01_naive.cu')"
    for names, says in ((["../../escaped"], "variant 1: name: expected letters"),
                        (["ok", "sub/dir"], "variant 2: name: expected letters"),
                        (["a\tb"], "variant 1: name"), ([".."], "variant 1: name"),
                        (["a", "a"], "name 'a' is variant 1's too")):
        rows = ", ".join("{name = %r, source = %s}" % (n, src) for n in names)
        p = corpus("return {generate = function(kl) return {%s} end}\n" % rows, d)
        check(p.returncode == 2 and says in p.stderr and "gen.lua" in p.stderr,
              "variant names %r: exit 2 saying %r: %s" % (names, says, p.stderr[-300:]))
    check(not os.path.exists(os.path.join(os.path.dirname(d), "escaped.cu")) and
          not os.path.exists(os.path.join(d, "escaped.cu")), "nothing written outside --out")
    p = subprocess.run([KERNLAB, "corpus", "--script", os.path.join(d, "gen.lua"), "--out", ""],
                       capture_output=True, text=True, timeout=600)
    check(p.returncode == 2 and "--out wants a folder name" in p.stderr,
          "corpus --out '': refused, never the filesystem root: %s" % p.stderr)
    # bad options say which and why (the usage line alone said neither),
    # and a shape eval refuses is refused here too, not run out of memory
    for opt, says in ((["--jobs", "0"], "--jobs wants a count"),
                      (["--shape", "0x0x0"], "--shape wants MxNxK"),
                      (["--shape", "99999x99999x99999"], "under 2^28 elements"),
                      (["--bogus"], "unknown option --bogus")):
        p = subprocess.run([KERNLAB, "corpus", "--out", os.path.join(d, "o"), *opt],
                           capture_output=True, text=True, timeout=600)
        check(p.returncode == 2 and says in p.stderr and "usage:" in p.stderr and
              not os.path.exists(os.path.join(d, "o")),
              "corpus %s: exit 2 saying %r: %s" % (opt, says, p.stderr))
    # an endless loop inside pcall: the budget cannot be caught
    p = corpus("return {generate = function(kl)\n"
               "  while true do pcall(function() while true do end end) end\n"
               "end}\n", d)
    check(p.returncode == 2 and "gen.lua:2: instruction budget exceeded" in p.stderr,
          "a pcall loop in generate(): exit 2 naming the line: %d %s"
          % (p.returncode, p.stderr[-300:]))
    p = corpus("return {generate = function(kl) return {{name='x'}} end\n", d)
    check(p.returncode == 2 and "gen.lua:" in p.stderr, "a Lua syntax error names the script and line: %s" % p.stderr)
    p = corpus("return {generate = function(kl) return {{name='x', config='x', source=kl.seed('../../etc/passwd')}} end}", d)
    check(p.returncode == 2 and "not a seed file name" in p.stderr, "kl.seed refuses paths: %s" % p.stderr)
    p = corpus("return {generate = function(kl) return {{name='x', config='x', source='KL_LAUNCH(1,1,1,1,0); extern \"C\" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {}'}} end}", d)
    check(p.returncode == 2 and "none of the" in p.stderr, "no correct variant: exit 2: %s" % p.stderr[-300:])

    # A disk that fills part-way (a 12 KiB tmpfs; root only, where mount is
    # allowed): exit 3 naming the file and the error, and the files written
    # so far removed, so the folder takes the same command again
    full = os.path.join(d, "full")
    os.mkdir(full)
    mounted = os.geteuid() == 0 and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=12k", "tmpfs", full],
        capture_output=True).returncode == 0
    if not mounted:
        print("corpus on a full disk: not tested (mounting a tmpfs needs root)")
    else:
        try:
            big = SCRIPT.replace('return v', 'for i = 1, 8 do v[#v+1] = {name = "pad" .. i, '
                                 'config = "naive", source = naive .. ("//" .. ("x"):rep(3000) .. "\\n")} end\n    return v')
            p = corpus(big, full)
            left = [os.path.join(r, f) for r, _, fs in os.walk(os.path.join(full, "c")) for f in fs]
            check(p.returncode == 3 and "No space left on device" in p.stderr and
                  "removed" in p.stderr and not left,
                  "corpus on a full disk: exit 3, nothing left: %d %s %s"
                  % (p.returncode, p.stderr[-300:], left))
        finally:
            subprocess.run(["umount", full])

    # Killed while writing its files (strace holds each rename of the
    # lab's main thread 0.3 s, so the kill lands among them): train/ is
    # all of the corpus's train kernels or absent, never a few of them
    # that prime trains on without a word, and the same command then
    # builds the corpus in that folder (it was refused: "already holds a
    # corpus (train)"), removing what the killed one left
    strace = shutil.which("strace")
    check(strace is not None, "strace is installed (scripts/deps.sh)")
    if strace:
        shutil.rmtree(os.path.join(d, "c"), ignore_errors=True)
        with open(os.path.join(d, "gen.lua"), "w") as f:
            f.write(SCRIPT)
        env = dict(os.environ, KL_SOURCE_DIR=SRC)
        env["ASAN_OPTIONS"] = (env.get("ASAN_OPTIONS", "") + ":detect_leaks=0").lstrip(":")
        c = os.path.join(d, "c")
        held = subprocess.Popen([strace, "-o", os.devnull, "-e", "trace=rename",
                                 "-e", "inject=rename:delay_exit=300000", KERNLAB, "corpus",
                                 "--script", os.path.join(d, "gen.lua"), "--out", c,
                                 "--shape", "64x64x64"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

        def kernels():
            return [f for r, _, fs in os.walk(c) for f in fs if f.endswith(".cu")]
        for _ in range(6000):  # until its first kernel has its name
            if kernels() or held.poll() is not None:
                break
            time.sleep(0.01)
        tracee = None
        try:
            kids = open("/proc/%d/task/%d/children" % (held.pid, held.pid)).read().split()
            tracee = int(kids[0]) if kids else None
        except OSError:
            pass
        check(tracee is not None and kernels(),
              "the held corpus is writing its kernels: %s" % kernels())
        if tracee:
            os.kill(tracee, signal.SIGKILL)
        held.wait()
        train = os.path.join(c, "train")
        hold = os.path.join(c, "holdout")
        check(not os.path.exists(train) or
              len(os.listdir(train)) + len(os.listdir(hold)) == 3,
              "a corpus killed while writing leaves no partial train/: %s" %
              (os.listdir(train) if os.path.exists(train) else None))
        p = corpus(SCRIPT, d, keep=True)
        left = [f for f in os.listdir(c) if ".tmp." in f]
        check(p.returncode == 0 and "removed the half-written corpus" in p.stderr and not left and
              len(os.listdir(train)) + len(os.listdir(os.path.join(c, "holdout"))) == 3,
              "the same command then builds the corpus there: %d %s %s" %
              (p.returncode, p.stderr[-300:], left))

    # without --script: the default script of KL_SOURCE_DIR (as search's
    # default space), named when it is missing
    p = subprocess.run([KERNLAB, "corpus", "--out", os.path.join(d, "nos")], cwd=d,
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, KL_SOURCE_DIR=os.path.join(d, "nowhere")))
    check(p.returncode == 2 and os.path.join(d, "nowhere", "lua", "corpus.lua") in p.stderr,
          "corpus without --script reads KL_SOURCE_DIR's lua/corpus.lua: %s" % p.stderr[-300:])

done()
