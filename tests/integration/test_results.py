#!/usr/bin/env python3
"""tests/integration/test_results.py — `kernlab top/show/diff/export` on a
results file, as a user runs them.

usage: test_results.py KERNLAB RESULTS_FIXTURE
RESULTS_FIXTURE (tests/results_fixture.c) writes a file of 30 synthetic
candidates through the store's API; tests/unit/results_gen.h says what each
holds, which is what the expectations below rely on. Standard library only.
Prints "N passed, N failed" and exits non-zero on any failure.
"""
import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import tempfile

KERNLAB, FIXTURE = sys.argv[1], sys.argv[2]
from kltest import check, done  # noqa: E402




def kernlab(*args):
    p = subprocess.run([KERNLAB, *args], capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def fixture(path, *extra):
    subprocess.run([FIXTURE, path, *extra], check=True, timeout=120)


def data_rows(out):
    """Rows of a `top` table (after the summary and header lines)."""
    return [l.split() for l in out.splitlines()[2:] if l.strip()]


def test_top(run):
    rc, out, err = kernlab("top", run)
    check(rc == 0, "top exits 0, got %d: %s" % (rc, err))
    rows = data_rows(out)
    check(len(rows) == 10, "top shows 10 by default, got %d" % len(rows))
    check(rows and rows[0][1] == "0", "fastest correct is id 0: %s" % rows[:1])
    check("30 candidates, 21 correct" in out, "summary line: %s" % out[:120])
    check("cpu-emu times are CPU times" in out, "cpu-emu times labelled")
    times = [float(r[5]) for r in rows]
    check(times == sorted(times), "ranked by time ascending")
    check(all(r[3] == "ok" for r in rows), "only correct kernels ranked by time")
    rc, out, _ = kernlab("top", run, "-n", "3", "--by", "reward")
    rows = data_rows(out)
    check(rc == 0 and len(rows) == 3, "-n 3 --by reward: 3 rows")
    check(rows and rows[0][1] == "29", "highest reward is id 29: %s" % rows[:1])
    for bad in (["--by", "speed"], ["-n", "0"], ["-n", "x"], ["--bogus"]):
        rc, _, err = kernlab("top", run, *bad)
        check(rc == 2 and "usage:" in err, "top %s: usage error 2" % bad)
    rc, _, err = kernlab("top")
    check(rc == 2, "top without a file: 2")


def test_show(run):
    rc, out, err = kernlab("show", run, "8")
    check(rc == 0, "show 8 exits 0: %s" % err)
    for want in ["candidate 8", "sample-8.cu", "status      ok", "canary_touched",
                 "correctness", "+15.5000", "regs 40", "speedup 3.70x",
                 "// candidate 8", "(cpu-emu)"]:
        check(want in out, "show 8 mentions %r" % want)
    rc, src, _ = kernlab("show", run, "8", "--source")
    check(rc == 0 and src.startswith("// candidate 8\n") and src.endswith("}\n"),
          "--source prints the text only")
    rc, out, _ = kernlab("show", run, "5", "--stats")
    check(rc == 0 and "5 timing samples" in out and "median 105.500" in out,
          "--stats: samples and median: %s" % out)
    check("over 20 timed launches" in out,
          "--stats says the samples are means of batches: %s" % out)
    rc, out, _ = kernlab("show", run, "0", "--stats")
    check(rc == 0 and "0 timing samples" in out, "--stats with no samples")
    # --ptx compiles the stored source again (NVRTC, compute_90, in the
    # sandbox's compile worker): the entry and the tile it was written with
    rc, out, err = kernlab("show", run, "3", "--ptx")
    check(rc == 0 and ".target sm_90" in out and ".entry matmul" in out,
          "--ptx prints the PTX of candidate 3: %d %s %s" % (rc, err, out[:200]))
    rc, _, err = kernlab("show", run, "30")
    check(rc == 2 and "no candidate with id 30" in err
          and err.count("\n") == 1, "unknown id: one line, 2: %s" % err)
    rc, _, err = kernlab("show", run, "abc")
    check(rc == 2 and "not a candidate id" in err, "non-numeric id: %s" % err)
    rc, _, err = kernlab("show", run, "-1")
    check(rc == 2, "negative id: 2")
    rc, _, err = kernlab("show", run)
    check(rc == 2 and "usage:" in err, "show without id: usage")
    rc, _, err = kernlab("show", run, "1", "--source", "--stats")
    check(rc == 2, "two modes: usage error")


def test_diff(run):
    rc, out, err = kernlab("diff", run, "0", "4")
    check(rc == 0, "diff exits 0: %s" % err)
    for want in ["--- 0 sample-0.cu", "+++ 4 sample-4.cu", "@@ -1,10 +1,10 @@",
                 "-KL_LAUNCH(8, 8, 8, 8, 0);", "+KL_LAUNCH(16, 16, 16, 16, 0);",
                 "   if (r >= M || c >= N) return;", "+4 (+4.0%)", "wrong"]:
        check(want in out, "diff 0 4 shows %r" % want)
    lines = out.splitlines()
    minus = [i for i, l in enumerate(lines) if l.startswith("-KL_LAUNCH")]
    plus = [i for i, l in enumerate(lines) if l.startswith("+KL_LAUNCH")]
    check(minus and plus and minus[0] < plus[0], "deletions before insertions")
    rc, out, _ = kernlab("diff", run, "2", "3")
    check(rc == 0 and "(identical sources)" in out, "dedup'd pair: identical")
    rc, out, _ = kernlab("diff", run, "1", "1")
    check(rc == 0 and "(identical sources)" in out, "a candidate with itself")
    rc, _, err = kernlab("diff", run, "0", "99")
    check(rc == 2 and "no candidate with id 99" in err, "diff unknown id")
    rc, _, err = kernlab("diff", run, "0")
    check(rc == 2 and "usage:" in err, "diff with one id: usage")


def test_export(run, tmp):
    rc, out, err = kernlab("export", run, "--format", "csv")
    check(rc == 0, "export csv exits 0: %s" % err)
    rows = list(csv.DictReader(io.StringIO(out)))
    check(len(rows) == 30, "30 csv rows, got %d" % len(rows))
    check(rows[10]["reward.speed_bonus"] == "29.5", "grown component in csv")
    check(rows[0]["reward.speed_bonus"] == "", "missing component is empty")
    check(rows[8]["flags"] == "canary_touched", "flag names in csv")
    check(rows[5]["time_us"] == "" and rows[5]["status"] == "compile_error",
          "not-timed candidate has an empty time")
    out_path = os.path.join(tmp, "x.jsonl")
    rc, out, err = kernlab("export", run, "--format", "jsonl", "-o", out_path,
                           "--source")
    check(rc == 0 and out == "", "export -o writes the file only")
    objs = [json.loads(l) for l in open(out_path)]
    check(len(objs) == 30, "30 json lines")
    check(objs[8]["flags"] == ["canary_touched"], "flags array")
    check(objs[5]["time_us"] is None, "null time when not timed")
    # -o in a folder that does not exist: made, as every command's output
    # folder is (it was exit 2); under a file: exit 2, one line
    made = os.path.join(tmp, "new", "sub", "x.csv")
    rc, out, err = kernlab("export", run, "--format", "csv", "-o", made)
    check(rc == 0 and os.path.isfile(made) and len(list(csv.DictReader(open(made)))) == 30,
          "export -o in a missing folder: made: %d %r" % (rc, err))
    rc, out, err = kernlab("export", run, "--format", "csv", "-o", os.path.join(made, "y.csv"))
    check(rc == 2 and err.count("\n") == 1 and made + " is a file, not a folder" in err,
          "export -o under a file: exit 2, one line: %d %r" % (rc, err))
    check(objs[12]["reward_components"] ==
          {"correctness": 11.5, "speed": 23.5, "speed_bonus": 35.5},
          "components object: %s" % objs[12]["reward_components"])
    for o in objs:
        h = hashlib.sha256(o["source"].encode()).hexdigest()
        check(h == o["src_sha256"], "id %d: source matches its sha256" % o["id"])
    check(objs[3]["source"] == objs[2]["source"], "dedup'd sources decode")
    # --source with csv: a last "source" column, one quoted cell per kernel
    # holding its lines (it was refused: "--source needs --format jsonl")
    check("source" not in rows[0], "csv without --source: no source column")
    rc, out, err = kernlab("export", run, "--format", "csv", "--source")
    srows = list(csv.reader(io.StringIO(out, newline="")))
    check(rc == 0 and srows and srows[0][-1] == "source" and len(srows) == 31,
          "export csv --source: 30 rows, source the last column: %d %s %s"
          % (rc, srows[0][-3:] if srows else None, err))
    if rc == 0 and len(srows) == 31:
        check(all(r[-1] == o["source"] and "\n" in r[-1] for r, o in zip(srows[1:], objs)),
              "csv --source: each cell is the kernel's text, as jsonl gives it")
    plain = list(csv.reader(io.StringIO(kernlab("export", run, "--format", "csv")[1],
                                        newline="")))
    check([r[:-1] for r in srows] == plain, "csv --source: the other columns as without it")
    # a source holding a NUL and terminal controls (eval stores an
    # unreadable input's bytes): one cell, the bytes as U+FFFD, none raw
    cu = os.path.join(tmp, "ctl.cu")
    with open(cu, "wb") as f:
        f.write(b"// esc \x1b[2J nul \x00 end\nint x;\n")
    ctl = os.path.join(tmp, "ctl.h5")
    subprocess.run([KERNLAB, "eval", cu, "--backend", "cpu-emu", "--shape", "16x16x16",
                    "--out", ctl], capture_output=True, timeout=300)
    p = subprocess.run([KERNLAB, "export", ctl, "--format", "csv", "--source"],
                       capture_output=True, timeout=120)
    cells = list(csv.reader(io.StringIO(p.stdout.decode("utf-8", "replace"), newline="")))
    check(p.returncode == 0 and b"\x00" not in p.stdout and b"\x1b" not in p.stdout and
          len(cells) == 2 and cells[1][-1] == "// esc \ufffd[2J nul \ufffd end\nint x;\n",
          "csv --source: NUL and ESC as U+FFFD in one cell: %d %r %r"
          % (p.returncode, p.stdout[-120:], p.stderr[-200:]))
    for bad in (["--format", "xml"], []):
        rc, _, err = kernlab("export", run, *bad)
        check(rc == 2 and "usage:" in err, "export %s: usage error" % bad)


def test_outputs(run, tmp):
    """export -o and report -o replace only what is theirs to replace: not
    an input, a device, a FIFO, a symbolic link, an HDF5 file, nor ''."""
    copy = os.path.join(tmp, "copy.h5")
    with open(run, "rb") as f, open(copy, "wb") as g:
        g.write(f.read())
    before = open(copy, "rb").read()
    link = os.path.join(tmp, "link")
    os.symlink(os.devnull, link)
    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    other = os.path.join(tmp, "other.h5")
    fixture(other, "3")
    # a file of the user's (a kernel's source): not a report or an export
    source = os.path.join(tmp, "kernel.cu")
    with open(source, "w") as f:
        f.write("extern \"C\" __global__ void matmul() {}\n")
    for target, says in ((source, "not a file this command writes"),
                         (copy, "is one of the inputs"), (os.devnull, "a device"),
                         (fifo, "a FIFO"), (link, "symbolic link"),
                         (other, "is an HDF5 file"), ("", "wants a file name")):
        for cmd in (["export", copy, "--format", "csv", "-o", target],
                    ["report", copy, "-o", target]):
            rc, out, err = kernlab(*cmd)
            check(rc == 2 and says in err and err.count("\n") == 1,
                  "%s -o %r: refused, exit 2: %d %s" % (cmd[0], target, rc, err))
    check(open(copy, "rb").read() == before and os.path.islink(link) and
          os.path.exists(other), "nothing was replaced")
    check(os.path.exists(os.devnull) and not os.path.isfile(os.devnull),
          "/dev/null is still a device")
    # standard output: -o - is it; a full disk behind it is exit 3; a
    # reader that stops early (| head) is not an error
    rc, out, err = kernlab("export", copy, "--format", "csv", "-o", "-")
    check(rc == 0 and out.count("\n") == 31 and not os.path.exists("-"),
          "export -o -: standard output: %d %s" % (rc, err))
    if os.path.exists("/dev/full"):
        for cmd in (["export", copy, "--format", "csv"], ["top", copy], ["flags"]):
            with open("/dev/full", "w") as full:
                p = subprocess.run([KERNLAB, *cmd], stdout=full, stderr=subprocess.PIPE,
                                   text=True, timeout=120)
            check(p.returncode == 3 and "writing standard output failed" in p.stderr,
                  "%s > /dev/full: exit 3: %d %s" % (cmd[0], p.returncode, p.stderr))
    p = subprocess.Popen([KERNLAB, "export", copy, "--format", "jsonl", "--source"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    p.stdout.close()
    perr = p.stderr.read()
    check(p.wait() == 0 and not perr, "export | (closed early): quiet, exit 0: %r" % perr)
    # a report or an export over its own earlier output: replaced
    page = os.path.join(tmp, "page.html")
    for _ in range(2):
        rc, _, err = kernlab("report", copy, "-o", page)
        check(rc == 0, "report -o over its own page: %s" % err)


def test_bad_files(run, tmp):
    text = os.path.join(tmp, "notes.h5")
    open(text, "w").write("these are notes, not HDF5\n")
    empty = os.path.join(tmp, "empty.h5")
    open(empty, "w").close()
    trunc = os.path.join(tmp, "truncated.h5")
    data = open(run, "rb").read()
    open(trunc, "wb").write(data[: len(data) // 2])
    newer = os.path.join(tmp, "newer.h5")
    fixture(newer, "5", "--schema-version", "7")
    cases = [(text, "not an HDF5 file"), (empty, "not an HDF5 file"),
             (trunc, "truncated"), (newer, "schema version 7"),
             (os.path.join(tmp, "missing.h5"), "No such file"),
             (tmp, "is a directory")]
    for path, needle in cases:
        for cmd in (["top", path], ["show", path, "0"], ["diff", path, "0", "1"],
                    ["export", path, "--format", "csv"]):
            rc, out, err = kernlab(*cmd)
            name = "%s %s" % (cmd[0], os.path.basename(path))
            check(rc == 2, "%s: exit 2, got %d" % (name, rc))
            check(needle in err, "%s: message names %r: %s" % (name, needle, err))
            check(err.count("\n") == 1, "%s: one line: %r" % (name, err))
            check(out == "", "%s: nothing on stdout" % name)


def test_abandoned(tmp):
    """A writer that died without closing: the file still reads."""
    path = os.path.join(tmp, "abandoned.h5")
    fixture(path, "12", "--abandon")
    rc, out, err = kernlab("export", path, "--format", "jsonl")
    check(rc == 0, "abandoned file exports: %s" % err)
    check(len(out.splitlines()) == 12, "all 12 candidates of an abandoned file")
    rc, out, err = kernlab("top", path, "-n", "2")
    check(rc == 0 and len(data_rows(out)) == 2, "top on an abandoned file")


def test_compressed(run, tmp):
    """A file compressed with h5repack (gzip: it stores less than its rows)
    reads every record, and an append keeps them all."""
    packed = os.path.join(tmp, "packed.h5")
    p = subprocess.run(["h5repack", "-f", "GZIP=9", run, packed], capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0, "h5repack (hdf5-tools): %s" % p.stderr[-200:])
    if p.returncode:
        return
    rc, out, err = kernlab("export", packed, "--format", "jsonl")
    check(rc == 0 and len(out.splitlines()) == 30, "30 records from the packed file: %d %s"
          % (len(out.splitlines()), err[-200:]))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        run = os.path.join(tmp, "RUN.h5")
        fixture(run)
        test_top(run)
        test_show(run)
        test_diff(run)
        test_export(run, tmp)
        test_outputs(run, tmp)
        test_bad_files(run, tmp)
        test_abandoned(tmp)
        test_compressed(run, tmp)
    done()


main()
