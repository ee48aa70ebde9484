#!/usr/bin/env python3
"""tests/integration/test_search.py — `kernlab search random|exhaustive`,
the search baselines, and `kernlab report` on several files.

usage: test_search.py KERNLAB SOURCE_DIR

A tiny campaign (64x64x64, G 2, 3 steps: a budget of 6 evaluations) whose
checkpoint does not exist (search samples no policy), and a five-entry
space written here: four correct seeds and one that writes only C[0], so
the verdicts are known. Checks:
  - the real lua/search_space.lua: 60 to 150 uniquely named configurations
    covering all nine seeds (--list), and a few of them evaluated;
  - random before any exhaustive file: budget 6 over 5 configurations takes
    each once before any twice, one line per step, a line saying the
    exhaustive file is missing and how to make it;
  - exhaustive --limit 2 without --out: written beside the campaign's
    exhaustive file as NAME-limit2.h5, not into it, and refused as a
    baseline (partial) by random search and by its own summary; --limit
    above the space's size is a whole sweep;
  - exhaustive: every configuration once, the broken one recorded as
    incorrect, step/group/sample and /steps records as a campaign's, the
    95% line, the file readable by `kernlab top` and h5py;
  - random again: the same seed draws the same configurations, and the
    printed "evaluations to reach 95%" equals the count computed here from
    the two files;
  - a baseline that failed (timeout) is printed as none, not -1.0 us;
  - Ctrl-C while the baseline is timed: the empty file is removed;
  - a file-size limit under the outputs' memfd: exit 3, said once; one
    under the host compile's own limit (8 MiB): the sweep runs;
  - Ctrl-C: the step in flight is recorded whole, exit 130; an exhaustive
    search stopped so is no baseline for the 95% count;
  - a campaign's backend "gpu" with no device: exit 3 naming the field;
  - run outside the source tree: where the space and seeds are looked for;
  - refusals: an existing output (file untouched), a bad mode, --budget
    with exhaustive, a campaign budget past 10^7 (its fields named), --out, --space and --exhaustive past 1099 bytes (not
    cut to a name of a folder above them), a malformed campaign (Lua error, unknown field, wrong
    type for the new fields), duplicate names in a space, a space script
    reaching for files (dofile, kl.seed("../..")): exit 2, one clear
    message;
  - `kernlab report A.h5 B.h5 -o x.html`: a comparison plot with one line
    per file and a legend naming them; one file: no comparison.
"""
import json
import os
import re
import resource
import subprocess
import sys
import tempfile

KERNLAB, SRC = sys.argv[1], sys.argv[2]
from kltest import check, done, interrupted  # noqa: E402

ENV = dict(os.environ, KL_SOURCE_DIR=SRC)


def kernlab(*args, cwd=None):
    return subprocess.run([KERNLAB, *args], capture_output=True, text=True,
                          errors="replace", timeout=600, cwd=cwd, env=ENV)


def candidates(h5):
    e = kernlab("export", h5, "--format", "jsonl")
    if e.returncode != 0:
        print(e.stderr, file=sys.stderr)
        return []
    return [json.loads(l) for l in e.stdout.splitlines() if l.strip()]


def steps_h5py(h5):
    # Debian's python3 has h5py (scripts/deps.sh); the one running this may not
    q = subprocess.run(["/usr/bin/python3", "-c", """
import json, sys, h5py
with h5py.File(sys.argv[1], "r", swmr=True) as f:
    print(json.dumps([(int(s["step"]), int(s["n_candidates"]),
                       float(s["correct_frac"]), float(s["best_time_us"]))
                      for s in f["steps"][:]]))
""", h5], capture_output=True, text=True)
    if q.returncode != 0:
        return "unreadable: " + q.stderr[-300:]
    return [tuple(s) for s in json.loads(q.stdout)]


def campaign(path, d, extra=""):
    with open(path, "w") as f:
        f.write("""-- a tiny campaign for the search tests
return {
  task = {M = 64, N = 64, K = 64},
  backend = "cpu-emu",
  checkpoint = %r,
  group_size = 2,
  steps = 3,
  reward = %r,
  seed = 11,
  corpus = %r,
  exhaustive = %r,
  %s
}
""" % (os.path.join(d, "no-such-policy.ckpt"),
       os.path.join(SRC, "lua", "reward", "default.lua"),
       os.path.join(d, "no-corpus"), os.path.join(d, "exh.h5"), extra))


SPACE = r'''
return {
  generate = function(kl)
    local naive = kl.seed("02_coalesced.cu")
    return {
      {name = "coalesced", source = naive},
      {name = "coalesced_bs8", source = naive:gsub("#define BS 32", "#define BS 8")},
      {name = "smem", source = kl.seed("03_smem_tiling.cu")},
      {name = "blocktile", source = kl.seed("05_blocktile_2d.cu")},
      {name = "broken", source = naive:gsub("C%[row %* N %+ col%] = acc;", "C[0] = acc;")},
    }
  end
}
'''
NAMES = {"coalesced", "coalesced_bs8", "smem", "blocktile", "broken"}


def usable(c):
    return c["correct"] and c["time_us"] > 0 and not c["flags"]


def test_real_space(d, camp):
    p = kernlab("search", "exhaustive", camp, "--list")
    names = p.stdout.splitlines()[:-1]
    check(p.returncode == 0, "--list exits 0: %s" % p.stderr)
    check(60 <= len(names) <= 150, "real space: 60-150 configurations, got %d"
          % len(names))
    check(len(set(names)) == len(names), "real space: unique names")
    seeds = {n[:2] for n in names}
    check(seeds == {"%02d" % i for i in range(1, 10)},
          "real space covers all nine seeds: %s" % sorted(seeds))
    check(p.stdout.splitlines()[-1].startswith("%d configurations" % len(names)),
          "--list ends with the count: %s" % p.stdout[-200:])
    out = os.path.join(d, "real.h5")
    p = kernlab("search", "random", camp, "--budget", "3", "--out", out)
    check(p.returncode == 0, "random on the real space exits 0: %s" % p.stderr[-400:])
    got = [c["label"] for c in candidates(out)]
    check(len(got) == 3 and len(set(got)) == 3 and set(got) <= set(names),
          "3 distinct configurations of the real space: %s" % got)
    check(all(c["correct"] for c in candidates(out)),
          "real-space configurations verify: %s" %
          [(c["label"], c["status"]) for c in candidates(out)])


def test_long_paths(d, camp, space):
    # real folders, so that the path cut at 1099 bytes names one: the
    # results went there, and --space/--exhaustive read what was there
    deep = d
    for i in range(5):
        deep = os.path.join(deep, "d" * 200)
    os.makedirs(deep)
    stem = os.path.join(deep, "x" * 150)
    cut = (stem + ".h5")[:1099]  # where the results went
    open(stem + ".lua", "w").write(open(space).read())
    for opt, val in (("--out", stem + ".h5"), ("--space", stem + ".lua"),
                     ("--exhaustive", stem + ".h5")):
        args = ["search", "random", camp, "--budget", "1",
                "--out", stem + ".h5" if opt == "--out" else os.path.join(d, "lp.h5")]
        if opt != "--out":
            args += [opt, val]
        if opt != "--space":
            args += ["--space", space]
        p = kernlab(*args)
        check(p.returncode == 2 and "%s is %d bytes long (at most 1099)" % (opt, len(val))
              in p.stderr and not p.stdout,
              "%s of %d bytes: refused, exit 2: %d %r %r"
              % (opt, len(val), p.returncode, p.stdout[-200:], p.stderr[-300:]))
    check(not os.path.exists(cut) and not os.path.exists(stem + ".h5") and
          not os.path.exists(os.path.join(d, "lp.h5")),
          "nothing written for a long path (%s)" % sorted(os.listdir(deep)))


def main():
    with tempfile.TemporaryDirectory() as d:
        camp = os.path.join(d, "tiny.lua")
        campaign(camp, d)
        space = os.path.join(d, "space.lua")
        open(space, "w").write(SPACE)
        test_real_space(d, camp)
        test_long_paths(d, camp, space)

        # Random before the exhaustive file exists.
        rnd = os.path.join(d, "rnd.h5")
        p = kernlab("search", "random", camp, "--space", space, "--out", rnd)
        check(p.returncode == 0, "random exits 0: %s" % p.stderr[-600:])
        lines = [l for l in p.stdout.splitlines() if re.match(r"step \d+/3 ", l)]
        check(len(lines) == 3, "one line per step (3): %s" % p.stdout)
        check(all("evals" in l and "reward mean" in l and "best" in l
                  for l in lines), "step lines say evals, reward, best")
        check(re.search(r"no exhaustive search results at .*exh\.h5.*kernlab "
                        r"search exhaustive", p.stdout) is not None,
              "missing exhaustive file: said, with how to make it: %s" % p.stdout)
        check("no priming corpus at" in p.stdout, "missing corpus: said")
        rc = candidates(rnd)
        labels = [c["label"] for c in rc]
        check(len(rc) == 6, "budget steps*G*P = 6 evaluations, got %d" % len(rc))
        check(set(labels[:5]) == NAMES,
              "first 5 draws: each configuration once: %s" % labels)
        check([(c["step"], c["group"], c["sample"]) for c in rc] ==
              [(i // 2, 0, i % 2) for i in range(6)], "step/group/sample")
        check(all(c["reward"] is not None for c in rc), "every candidate scored")
        st = steps_h5py(rnd)
        check(isinstance(st, list) and [s[:2] for s in st] == [(0, 2), (1, 2), (2, 2)],
              "3 /steps records of 2: %s" % st)

        # Exhaustive cut short by --limit without --out: not into the
        # campaign's exhaustive file (run and random read that as the whole
        # space's best; the full sweep would refuse to replace it) but
        # beside it as NAME-limitN.h5, and said to be partial where a
        # baseline is read from it
        exh = os.path.join(d, "exh.h5")
        part = os.path.join(d, "exh-limit2.h5")
        p = kernlab("search", "exhaustive", camp, "--space", space, "--limit", "2")
        check(p.returncode == 0 and not os.path.exists(exh) and os.path.exists(part) and
              "the first 2 of 5 configurations" in p.stdout and "results " + part in p.stdout,
              "--limit 2, no --out: %s written, not the campaign's %s: %d %s %s"
              % (part, exh, p.returncode, p.stdout[-600:], p.stderr[-300:]))
        check([c["label"] for c in candidates(part)] == ["coalesced", "coalesced_bs8"],
              "--limit 2, no --out: the first two configurations")
        p = kernlab("search", "random", camp, "--space", space, "--budget", "2",
                    "--out", os.path.join(d, "vs-part.h5"), "--exhaustive", part)
        check(p.returncode == 0 and part + " is a partial exhaustive search (the first 2 "
              "of 5 configurations, --limit 2)" in p.stdout and
              "95% of the exhaustive best (" not in p.stdout,
              "random against a partial sweep: said, no 95%% count: %s" % p.stdout[-500:])

        # Exhaustive: every configuration once.
        p = kernlab("search", "exhaustive", camp, "--space", space)
        check(p.returncode == 0, "exhaustive exits 0: %s" % p.stderr[-600:])
        check(os.path.exists(exh), "exhaustive writes the campaign's "
              "`exhaustive` file by default")
        ec = candidates(exh)
        check(sorted(c["label"] for c in ec) == sorted(NAMES),
              "every configuration once: %s" % [c["label"] for c in ec])
        bad = [c for c in ec if c["label"] == "broken"]
        check(bad and not bad[0]["correct"] and bad[0]["status"] != "ok",
              "the broken configuration is recorded as incorrect: %s" %
              (bad[0]["status"] if bad else None))
        check(all(c["correct"] for c in ec if c["label"] != "broken"),
              "the others verify: %s" % [(c["label"], c["status"], c.get("error"))
                                         for c in ec if not c["correct"]])
        st = steps_h5py(exh)
        check(isinstance(st, list) and len(st) == 3 and st[-1][1] == 1,
              "3 step records, the last one of 1: %s" % st)
        check(isinstance(st, list) and all(s[3] > 0 for s in st),
              "best time so far recorded per step: %s" % st)
        best = min(c["time_us"] for c in ec if usable(c))
        m = re.search(r"95% of the exhaustive best .*reached after (\d+) of 5 "
                      r"evaluations", p.stdout)
        check(m is not None, "exhaustive prints the 95%% line: %s" % p.stdout)
        want = next(i + 1 for i, c in enumerate(ec)
                    if usable(c) and c["time_us"] <= best / 0.95)
        check(m is not None and int(m.group(1)) == want,
              "exhaustive: evaluations to 95%% = %d: %s" % (want, m and m.group(0)))
        t = kernlab("top", exh)
        check(t.returncode == 0 and "5 candidates, 4 correct" in t.stdout,
              "kernlab top reads it: %s" % t.stdout[:200])

        # Random again, same seed: same draws; the 95% count checked.
        rnd2 = os.path.join(d, "rnd2.h5")
        p = kernlab("search", "random", camp, "--space", space, "--out", rnd2)
        check(p.returncode == 0, "random again exits 0: %s" % p.stderr[-600:])
        r2 = candidates(rnd2)
        check([c["label"] for c in r2] == labels, "same seed, same draws")
        hit = next((i + 1 for i, c in enumerate(r2)
                    if usable(c) and c["time_us"] <= best / 0.95), None)
        # The progress lines may say "(1.05x baseline speed)": pick the summary.
        line = next((l for l in p.stdout.splitlines()
                     if l.startswith("compare: 95% of the exhaustive best")), "")
        if hit:
            check("reached after %d of 6 evaluations" % hit in line,
                  "random: reached after %d: %s" % (hit, line))
        else:
            check("not reached in 6 evaluations" in line,
                  "random: not reached: %s" % line)
        p = kernlab("search", "random", camp, "--space", space, "--out",
                    os.path.join(d, "b3.h5"), "--budget", "3", "--exhaustive", exh)
        b3 = [c["label"] for c in candidates(os.path.join(d, "b3.h5"))]
        check(p.returncode == 0 and b3 == labels[:3], "--budget 3: the first 3 "
              "draws of the same sequence: %s vs %s" % (b3, labels[:3]))
        # a random search's file is no exhaustive baseline (not even its own)
        b4 = os.path.join(d, "b4.h5")
        p = kernlab("search", "random", camp, "--space", space, "--out", b4,
                    "--budget", "2", "--exhaustive", rnd2)
        check(p.returncode == 0 and "is not an exhaustive search's results" in p.stdout and
              "reached after" not in p.stdout,
              "--exhaustive a random search's file: said, no 95%% count: %s" % p.stdout[-400:])
        p = kernlab("search", "exhaustive", camp, "--space", space, "--limit", "2",
                    "--out", os.path.join(d, "lim.h5"))
        lim = [c["label"] for c in candidates(os.path.join(d, "lim.h5"))]
        check(p.returncode == 0 and lim == ["coalesced", "coalesced_bs8"],
              "--limit 2: the first two configurations: %s" % lim)
        check("lim.h5 is a partial exhaustive search" in p.stdout,
              "--limit 2 --out: its own summary says partial: %s" % p.stdout[-400:])
        p = kernlab("search", "exhaustive", camp, "--space", space, "--limit", "9",
                    "--out", os.path.join(d, "lim9.h5"))
        check(p.returncode == 0 and "partial" not in p.stdout and
              "5 evaluations of 5 configurations" in p.stdout and
              "95% of the exhaustive best (" in p.stdout,
              "--limit above the space's size: a whole sweep: %s" % p.stdout[-400:])

        # a file-size limit (ulimit -f, a batch system's) below what the
        # lab's outputs memfd needs (1.1 MB at 64^3): the machine's problem,
        # exit 3 naming it, once; it was recorded as every configuration's
        # sandbox_error, "holds no correct kernel", exit 0
        def fsize(limit):
            return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        fz = os.path.join(d, "fsize.h5")
        p = subprocess.run([KERNLAB, "search", "exhaustive", camp, "--space", space,
                            "--out", fz], capture_output=True, text=True, env=ENV,
                           preexec_fn=fsize(600 << 10))
        check(p.returncode == 3 and p.stderr.count("step 1: evaluation: cannot size the "
                                                   "outputs' memfd") == 1 and
              "File too large" in p.stderr and "step 1/" not in p.stdout,
              "a file-size limit under the outputs: exit 3, said once: %d %s %s"
              % (p.returncode, p.stdout[-300:], p.stderr[-400:]))

        # a hard file-size limit of 8 MiB (enough for the outputs, below
        # the host compile's own 64 MiB) and a cold compile cache: each
        # worker keeps the lower limit; every host compile failed
        # "setrlimit RLIMIT_FSIZE: Operation not permitted", recorded as
        # five compile_errors
        f8 = os.path.join(d, "fsize8.h5")
        p = subprocess.run([KERNLAB, "search", "exhaustive", camp, "--space", space,
                            "--out", f8], capture_output=True, text=True,
                           env=dict(ENV, KERNLAB_CACHE=os.path.join(d, "cold-cache")),
                           preexec_fn=fsize(8 << 20))
        fc = candidates(f8) if p.returncode == 0 else []
        check(p.returncode == 0 and len(fc) == 5 and
              sum(c["correct"] for c in fc) == 4,
              "under a file-size limit of 8 MiB the sweep runs: %d %s %s"
              % (p.returncode, [(c["label"], c["status"], c.get("error", "")[:80])
                                for c in fc], p.stderr[-300:]))

        # Ctrl-C (SIGINT to the process group): the step in flight is
        # recorded whole, the line says how far it got, exit 130
        intr = os.path.join(d, "intr.h5")
        rc, rest, err = interrupted([KERNLAB, "search", "random", camp, "--space", space,
                                     "--budget", "40", "--out", intr], "step 1/", env=ENV)
        m = re.search(r"interrupted: (\d+) of 40 evaluations recorded in .*intr\.h5; best "
                      r"[0-9.]+ us, ", rest)
        ic = candidates(intr)
        check(rc == 130 and m and len(ic) == int(m.group(1)) and
              len(ic) % 2 == 0 and 2 <= len(ic) < 40 and "search stops" in err,
              "search, Ctrl-C: exit 130, whole steps recorded: %d %s %s" %
              (rc, rest[-300:], err[-300:]))
        k = min(len(ic), len(r2))
        check([c["label"] for c in ic][:k] == [c["label"] for c in r2][:k],
              "the interrupted search drew the same sequence")

        # Ctrl-C during an exhaustive search: the sweep stopped short is
        # said to be no baseline, there and where it is read as one (it
        # was taken as the space's best: "reached after 1 of 4")
        ixh = os.path.join(d, "ixh.h5")
        rc, rest, err = interrupted([KERNLAB, "search", "exhaustive", camp, "--space", space,
                                     "--out", ixh], "step 1/", env=ENV)
        n_ixh = len(candidates(ixh))
        check(rc == 130 and n_ixh < 5 and "no exhaustive baseline: remove %s" % ixh in rest,
              "exhaustive, Ctrl-C: said to be no baseline: %d %d %s" % (rc, n_ixh, rest[-300:]))
        p = kernlab("search", "random", camp, "--space", space, "--budget", "2",
                    "--out", os.path.join(d, "vs-ixh.h5"), "--exhaustive", ixh)
        check(p.returncode == 0 and "%s is an exhaustive search that stopped after %d of its 5 "
              "evaluations" % (ixh, n_ixh) in p.stdout and
              "95% of the exhaustive best (" not in p.stdout,
              "random against an interrupted sweep: said, no 95%% count: %s" % p.stdout[-500:])

        # A baseline that failed (the naive seed past a 0.5 s timeout at
        # 2048^3, even on 16 cores) is said to be none, as run says it,
        # not "-1.0 us (CPU-emulator time, not GPU)"
        slow = os.path.join(d, "slow.lua")
        campaign(slow, d, "timeout = 0.5,")
        text = open(slow).read().replace("M = 64, N = 64, K = 64",
                                         "M = 2048, N = 2048, K = 2048")
        open(slow, "w").write(text)
        p = kernlab("search", "random", slow, "--space", space, "--budget", "1",
                    "--out", os.path.join(d, "slow.h5"))
        check(p.returncode == 0 and "baseline (naive seed): none (see the warning above)"
              in p.stdout and "-1.0 us" not in p.stdout and "baseline" in p.stderr,
              "a failed baseline: said as none: %d %s %s"
              % (p.returncode, p.stdout[:600], p.stderr[-300:]))

        # Ctrl-C while the baseline is timed (a second at 256^3 here): the
        # new file holds nothing and is removed, so the same command runs
        # again (it stood there, and a re-run refused it). "auto" says its
        # backend on stderr before the baseline, after the handler is
        # installed; on a device the baseline is cuBLAS, too quick to catch
        early = os.path.join(d, "early.lua")
        campaign(early, d)
        text = open(early).read().replace("M = 64, N = 64, K = 64",
                                          "M = 256, N = 256, K = 256")
        open(early, "w").write(text.replace('backend = "cpu-emu"', 'backend = "auto"'))
        eout = os.path.join(d, "early.h5")
        rc, rest, err = interrupted([KERNLAB, "search", "exhaustive", early, "--space", space,
                                     "--out", eout], "kernlab: backend", stream="stderr",
                                    env=ENV)
        if "backend: cpu-emu" in err:
            check(rc == 130 and "interrupted before the first evaluation: nothing recorded; "
                  "%s removed" % eout in rest and not os.path.exists(eout),
                  "Ctrl-C before the first step: the empty file removed: %d %s %s"
                  % (rc, rest[-300:], err[-300:]))

        # Refusals.
        before = os.stat(exh)
        p = kernlab("search", "exhaustive", camp, "--space", space)
        check(p.returncode == 2 and exh in p.stderr and "already exists" in p.stderr,
              "refuses to overwrite, naming the file: %s" % p.stderr)
        after = os.stat(exh)
        check((before.st_size, before.st_mtime_ns) == (after.st_size, after.st_mtime_ns),
              "the existing file is untouched")
        p = kernlab("search", "greedy", camp)
        check(p.returncode == 2 and "unknown mode" in p.stderr and
              "random or exhaustive" in p.stderr and "greedy" in p.stderr,
              "bad mode: exit 2, a clear message: %s" % p.stderr)
        p = kernlab("search")
        check(p.returncode == 2 and "usage:" in p.stderr, "no mode: usage")
        p = kernlab("search", "exhaustive", camp, "--budget", "4")
        check(p.returncode == 2 and "--budget" in p.stderr,
              "--budget with exhaustive: exit 2: %s" % p.stderr)
        p = kernlab("search", "random", camp, "--out", "")
        check(p.returncode == 2 and "--out wants a file name" in p.stderr,
              "--out '': exit 2: %s" % p.stderr)
        # --out in a missing folder: made (runs/ in a fresh clone); one that
        # cannot be made (a file in its path) is said before the backend is
        # resolved and the baseline timed (~30 s at 1024^3), not after: of
        # a campaign on gpu, the folder is said, not (here) the device
        made = os.path.join(d, "new", "sub", "s.h5")
        p = kernlab("search", "random", camp, "--space", space, "--budget", "1", "--out", made)
        check(p.returncode == 0 and os.path.isfile(made),
              "--out in a missing folder: made: %d %s" % (p.returncode, p.stderr[-300:]))
        on_gpu = os.path.join(d, "on_gpu.lua")
        open(on_gpu, "w").write(open(camp).read().replace('backend = "cpu-emu"',
                                                          'backend = "gpu"'))
        p = kernlab("search", "random", on_gpu, "--space", space, "--budget", "1", "--out",
                    os.path.join(made, "x.h5"))
        check(p.returncode == 2 and "cannot write %s" % os.path.join(made, "x.h5") in p.stderr
              and "is a file, not a folder" in p.stderr and not p.stdout,
              "--out under a file: exit 2 before the backend: %d %r %r" %
              (p.returncode, p.stdout[-300:], p.stderr[-300:]))
        # a campaign's own budget past the limit: the fields it came from
        # and the limit named, with the way out
        huge = os.path.join(d, "huge.lua")
        campaign(huge, d, "steps = 1000000, prompts_per_step = 64,")
        p = kernlab("search", "random", huge, "--space", space)
        check(p.returncode == 2 and "huge.lua: the campaign's budget, steps x "
              "prompts_per_step x group_size = 1000000 x 64 x 2 = 128000000 evaluations"
              in p.stderr and "at most 10000000" in p.stderr and "--budget N" in p.stderr,
              "a campaign budget past the limit: said whence: %s" % p.stderr)
        # the campaign's backend = "gpu" where no device answers: exit 3
        # naming the campaign's field (search has no --backend; it said
        # "--backend gpu: no driver"); with a device it simply runs
        p = kernlab("search", "random", on_gpu, "--space", space, "--budget", "1",
                    "--out", os.path.join(d, "gpu.h5"))
        if p.returncode != 0:
            check(p.returncode == 3 and "on_gpu.lua: backend = \"gpu\", and no device "
                  "answers: " in p.stderr and "--backend" not in p.stderr and
                  not os.path.exists(os.path.join(d, "gpu.h5")),
                  "backend gpu without a device: the field named: %d %s"
                  % (p.returncode, p.stderr[-300:]))
        # run from outside the source tree without KL_SOURCE_DIR: where the
        # default space and the seeds are looked for is said
        away = dict(ENV)
        del away["KL_SOURCE_DIR"]
        for extra in ([], ["--space", space]):
            p = subprocess.run([KERNLAB, "search", "exhaustive", camp, "--list", *extra],
                               capture_output=True, text=True, cwd=d, env=away)
            check(p.returncode == 2 and "looked for in the folder kernlab runs in" in p.stderr
                  and "KL_SOURCE_DIR" in p.stderr,
                  "outside the source tree %s: where it looks said: %s" % (extra, p.stderr))
        p = kernlab("search", "random", camp, "--budget", "0")
        check(p.returncode == 2 and "a count from 1 to" in p.stderr,
              "--budget 0: exit 2: %s" % p.stderr)
        for name, extra, needle in (
                ("syntax.lua", "steps = = 3,", "syntax.lua:"),
                ("typo.lua", "stepz = 3,", "stepz: unknown field"),
                ("corpus.lua", "", "corpus: expected a string"),
                ("exh.lua", "", "exhaustive: expected a non-empty string")):
            bad_camp = os.path.join(d, name)
            campaign(bad_camp, d, extra)
            text = open(bad_camp).read()
            if name == "corpus.lua":
                text = re.sub(r"corpus = '[^']*'", "corpus = 3", text)
            if name == "exh.lua":
                text = re.sub(r"exhaustive = '[^']*'", "exhaustive = ''", text)
            open(bad_camp, "w").write(text)
            p = kernlab("search", "random", bad_camp, "--space", space)
            check(p.returncode == 2 and needle in p.stderr and
                  p.stderr.count("\n") == 1,
                  "malformed campaign %s: exit 2 naming %r: %s"
                  % (name, needle, p.stderr))
        for text, needle in (
                ('return {generate = function(kl) return dofile("/etc/passwd") end}',
                 "dofile"),
                ('return {generate = function(kl) return {{name = "x", source = '
                 'kl.seed("../../etc/passwd")}} end}', "not a seed file name")):
            jail = os.path.join(d, "jail.lua")
            open(jail, "w").write(text)
            p = kernlab("search", "exhaustive", camp, "--space", jail, "--out",
                        os.path.join(d, "jail.h5"))
            check(p.returncode == 2 and needle in p.stderr and "jail.lua" in p.stderr,
                  "space scripts cannot read files (%s): %s" % (needle, p.stderr))
        dup = os.path.join(d, "dup.lua")
        open(dup, "w").write(SPACE.replace('name = "smem"', 'name = "blocktile"'))
        p = kernlab("search", "exhaustive", camp, "--space", dup, "--out",
                    os.path.join(d, "dup.h5"))
        check(p.returncode == 2 and "'blocktile'" in p.stderr and
              "unique" in p.stderr, "duplicate names refused: %s" % p.stderr)
        # a generated space past the cap: refused, naming it
        many = os.path.join(d, "many.lua")
        open(many, "w").write('return {generate = function(kl)\n'
                              '  local t, s = {}, kl.seed("01_naive.cu")\n'
                              '  for i = 1, 70000 do t[i] = {name = "n" .. i, source = s} end\n'
                              '  return t end}\n')
        p = kernlab("search", "exhaustive", camp, "--space", many, "--list")
        check(p.returncode == 2 and "70000 variants; expected at most 65536" in p.stderr,
              "a space of 70000 variants refused: %s" % p.stderr[-300:])
        check(not os.path.exists(os.path.join(d, "dup.h5")), "nothing written")

        # One report on several files.
        html = os.path.join(d, "cmp.html")
        p = kernlab("report", exh, rnd, rnd2, "-o", html)
        check(p.returncode == 0, "report on 3 files exits 0: %s" % p.stderr)
        page = open(html).read() if p.returncode == 0 else ""
        check('data-plot="compare"' in page, "a comparison plot")
        series = re.findall(r'<polyline class="series" data-series="compare-(\d)" '
                            r'data-evaluations="(\d+)"', page)
        check(series == [("0", "5"), ("1", "6"), ("2", "6")],
              "one line per file with its evaluations: %s" % series)
        legend = re.findall(r'<li data-series="compare-\d">.*?</svg> ([^<]*)</li>', page)
        check(legend == [exh, rnd, rnd2], "legend names the files: %s" % legend)
        check(page.count('<tr class="file"') == 3, "a table row per file")
        p = kernlab("report", exh, "-o", html)
        check(p.returncode == 0 and 'data-plot="compare"' not in open(html).read(),
              "one file: no comparison plot")
        p = kernlab("report", exh, os.path.join(d, "missing.h5"), "-o", html + "2")
        check(p.returncode == 2 and "missing.h5" in p.stderr and
              not os.path.exists(html + "2"),
              "a missing second file: exit 2 naming it, nothing written: %s"
              % p.stderr)
    done()


main()
