#!/usr/bin/python3
"""tests/python/test_results_hostile_cli.py — the inspection commands on a
results file edited with h5py into values kernlab never writes.

usage: test_results_hostile_cli.py KERNLAB RESULTS_FIXTURE SOURCE_DIR
Runs with Debian's /usr/bin/python3 and python3-h5py (ctest label `python`);
exits 77 (skipped) when h5py is missing.

1. Times and speeds of 1e40 and up print in %g form, not as fixed-point
   digits a double does not hold (top showed 12344999999999999218686).
2. An infinite time is no fastest kernel in `top`.
3. C1 controls (U+009B, CSI) in a label never reach the terminal; neither
   does an escape sequence in the reward_sha256 attribute (`rescore`).
4. The CSV export: a label starting with = is no formula (a leading
   apostrophe); bytes that are not UTF-8, and control characters, become
   U+FFFD.
5. The hostile-HDF5 review's files: a heap stored outside the file
   (external storage), records claiming more source or samples than the
   lab writes, 300 component names, a heap extent far past its data (each
   append was lost), a damaged record past the first read batches, and a
   group larger than a campaign makes (rescore's work is its square);
   the writer refuses what a reader refuses, and what cannot grow, before
   anything is evaluated.
6. The report review's files, each small but declaring much, read under a
   1 GiB address-space limit: /steps of 10M zero rows in 1.3 MB of gzip
   (read whole before any crc: 1.4 GB), /reward_components declared
   (300000, 256) with almost nothing stored (allocated twice over: 1.2
   GB), 20M flag names (64 bytes each: 1.3 GB); and a /steps missing
   fields (its records were hashed from uninitialised memory).
"""
import csv
import io
import os
import resource
import subprocess
import sys
import tempfile
import zlib

try:
    import h5py
    import numpy as np
except ImportError as e:
    print("SKIP: h5py/numpy not importable with %s: %s" % (sys.executable, e))
    sys.exit(77)

KERNLAB, FIXTURE, SRC = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import h5fixture  # noqa: E402
from h5fixture import rec_crc  # noqa: E402
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)


def edited(tmp, name, fn, attrs=None):
    """The 8-candidate fixture edited (h5fixture.edited)."""
    return h5fixture.edited(FIXTURE, tmp, name, fn, attrs)


def at_32(c):
    """The fixture's candidates as timed at 32x32x32: the tests that append
    with `eval --shape 32x32x32 --out` test what the writer makes of the
    file, not eval's refusal of a file of another target shape."""
    c["task"] = b"fp32_32x32x32"


def kernlab(*args):
    p = subprocess.run([KERNLAB, *args], capture_output=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


def sanitized():
    """Whether KERNLAB is an AddressSanitizer build, whose shadow memory
    cannot be mapped under an address-space limit."""
    with open(KERNLAB, "rb") as f:
        return b"__asan_init" in f.read()


def limited(*args):
    """kernlab under a 1 GiB address-space limit: what a small file makes
    it allocate must fit. OpenBLAS reserves buffers per thread (and spins
    when it cannot), so it gets one thread. An ASan build gets ASan's own
    limits instead (no allocation over 1 GiB, 2 GiB resident). A timeout
    is a failure, not a crash of the test."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    limit = None
    if sanitized():
        env["ASAN_OPTIONS"] = ":".join(
            filter(None, [env.get("ASAN_OPTIONS"), "allocator_may_return_null=1",
                          "max_allocation_size_mb=1024", "hard_rss_limit_mb=2048"]))
    else:
        def limit():
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    try:
        p = subprocess.run([KERNLAB, *args], capture_output=True, timeout=300,
                           preexec_fn=limit, env=env)
    except subprocess.TimeoutExpired:
        return -1, b"", b"timed out"
    return p.returncode, p.stdout, p.stderr


def fast_crcs(c):
    """rec_crc of every record of c, set in place: the bytes of the fields
    but crc, packed, are what the crc covers."""
    from numpy.lib import recfunctions
    names = [n for n in c.dtype.names if n != "crc"]
    packed = recfunctions.repack_fields(c[names])
    raw, size = memoryview(packed.tobytes()), packed.dtype.itemsize
    crcs = np.array([zlib.crc32(raw[i * size:(i + 1) * size]) for i in range(len(c))],
                    dtype=c.dtype["crc"])
    c["crc"] = crcs


def test_big_values(tmp):
    def fn(c):
        c["correct"] = True
        c[0]["time_us"] = 1.2345e40
        c[1]["time_us"] = 5e100
        c[2]["time_us"] = np.inf
        c["gflops"] = 1.5e60
        c["baseline_us"] = 3.3e50
    path = edited(tmp, "big", fn)
    rc, out, err = kernlab("top", path)
    text = out.decode()
    check(rc == 0, "top: %r" % err)
    check("12344999999" not in text and "e+40" in text,
          "top prints 1.2345e40 in %%g form: %s" % text)
    ids = [l.split()[1] for l in text.splitlines()[2:] if l.strip()]
    check("2" not in ids, "an infinite time is not ranked: %s" % ids)
    rc, out, err = kernlab("show", path, "0")
    check(rc == 0 and b"e+40" in out and b"12344999999" not in out,
          "show prints the time in %%g form: %s" % out)
    rc, out, err = kernlab("diff", path, "0", "1")
    check(rc == 0 and b"e+40" in out and b"e+100" in out,
          "diff prints both times in %%g form: %s" % out)


def test_controls(tmp):
    def fn(c):
        c["label"] = b"lab\xc2\x9b2J\x9b31m"
    path = edited(tmp, "c1", fn,
                  {"reward_sha256": np.bytes_(b"\x1b]0;X\x07\x1b[2J\xc2\x9b")})
    for cmd in (["top", path], ["show", path, "0"], ["diff", path, "0", "1"]):
        rc, out, err = kernlab(*cmd)
        check(rc == 0 and b"\x9b" not in out and b"\x1b" not in out,
              "%s: no C1 control on the terminal: %r" % (cmd[0], out[-300:]))
    formula = os.path.join(SRC, "lua", "reward", "default.lua")
    rc, out, err = kernlab("rescore", path, "--reward", formula)
    check(rc == 0 and b"\x1b" not in out and b"\x9b" not in out and b"\x07" not in out,
          "rescore: the reward_sha256 attribute printed safely: %r %r" % (out[:400], err))


def test_csv(tmp):
    labels = [b'=HYPERLINK("http://x")', b"\xff\xfe,", b"+1", b"plain"]

    def fn(c):
        c["label"] = labels + [b"x"] * (len(c) - len(labels))
    path = edited(tmp, "csv", fn)
    rc, out, err = kernlab("export", path, "--format", "csv")
    check(rc == 0, "export csv: %r" % err)
    try:
        text = out.decode("utf-8")
    except UnicodeDecodeError as e:
        check(False, "the CSV is UTF-8: %s" % e)
        return
    rows = list(csv.DictReader(io.StringIO(text)))
    got = [r["label"] for r in rows[:4]]
    check(got[0] == "'=HYPERLINK(\"http://x\")", "a formula gets an apostrophe: %r" % got[0])
    check(got[1] == "\ufffd\ufffd,", "invalid UTF-8 as U+FFFD: %r" % got[1])
    check(got[2] == "'+1" and got[3] == "plain", "others: %r" % got[2:])


def test_csv_controls(tmp):
    def fn(c):
        c["label"][0] = b"a\x1b]0;T\x07b\x1b[2Jc\xc2\x9bd\x7fe\tf"
    path = edited(tmp, "csvc", fn)
    rc, out, err = kernlab("export", path, "--format", "csv")
    check(rc == 0 and b"\x1b" not in out and b"\x07" not in out and
          b"\xc2\x9b" not in out and b"\x7f" not in out,
          "CSV: no control bytes reach the terminal: %r" % out[:400])
    check("a\ufffd]0;T\ufffdb\ufffd[2Jc\ufffdd\ufffde\tf" in out.decode("utf-8", "replace"),
          "CSV: controls as U+FFFD, tab kept: %r" % out[:400])


def test_external_storage(tmp):
    """/source_bytes stored in another file (HDF5 external storage, not a
    link): it read /etc/passwd into `show --source`, and a FIFO blocked."""
    path = edited(tmp, "external", at_32)
    raw = os.path.join(tmp, "heap.bin")
    with h5py.File(path, "r+") as f:
        data = f["source_bytes"][()]
        data.tofile(raw)
        del f["source_bytes"]
        f.create_dataset("source_bytes", shape=data.shape, dtype="u1",
                         external=[(raw, 0, data.size)])
    for cmd in (["show", path, "0", "--source"], ["top", path]):
        rc, out, err = kernlab(*cmd)
        check(rc == 2 and b"/source_bytes is stored outside the results file" in err,
              "%s: external storage refused: %d %r" % (cmd[0], rc, err[-300:]))
    seed = os.path.join(SRC, "kernels", "seeds", "01_naive.cu")
    before = open(path, "rb").read()
    rc, out, err = kernlab("eval", seed, "--backend", "cpu-emu", "--shape", "32x32x32",
                           "--out", path)
    check(rc == 2 and b"stored outside the results file" in err and
          open(path, "rb").read() == before,
          "eval --out: external storage refused, file untouched: %d %r" % (rc, err[-300:]))


def test_record_bounds(tmp):
    """A record may claim at most the 256 KiB source and the 1000 samples
    the lab writes: a compressed heap of zeros once backed a record of
    1.2e9 source bytes, read whole by `show --source`."""
    for field, heap, size in (("src_len", "source_bytes", 300 * 1024),
                              ("timing_count", "timings", 1001)):
        def fn(c, field=field, size=size):
            c[3]["src_off" if field == "src_len" else "timing_off"] = 0
            c[3][field] = size
        path = edited(tmp, "bound_" + field, fn)
        with h5py.File(path, "r+") as f:
            ds = f[heap]
            if ds.shape[0] < size:
                ds.resize((size,))
                ds[...] = 0
        rc, out, err = kernlab("top", path, "-n", "20")
        check(rc == 0 and b"candidate record 3 is damaged and 4 complete records" in err,
              "%s of %d: the record is damaged: %d %r" % (field, size, rc, err[-300:]))


def test_all_damaged(tmp):
    """Damage in the first record, with complete ones after it: nothing can
    be read, and top, report and export say so with exit 2 (they printed a
    warning and an empty table, exit 0)."""
    path = edited(tmp, "all_damaged", lambda c: None)
    with h5py.File(path, "r+") as f:
        c = f["candidates"][...]
        c[0]["crc"] ^= 1
        f["candidates"][...] = c
    for cmd in (["top", path], ["export", path, "--format", "jsonl"],
                ["report", path, "-o", os.path.join(tmp, "all_damaged.html")]):
        rc, out, err = kernlab(*cmd)
        check(rc == 2 and b"candidate record 0 is damaged" in err and
              b"no record before it can be read" in err and not out.strip(),
              "%s: a file whose first record is damaged: %d %r %r"
              % (cmd[0], rc, out[-200:], err[-300:]))


def test_component_names(tmp):
    path = edited(tmp, "cnames", at_32)
    with h5py.File(path, "r+") as f:
        names = f["reward_component_names"]
        names.resize((300,) + names.shape[1:])
        for i in range(300):
            names[i] = np.frombuffer(("c%d" % i).encode().ljust(names.shape[1], b"\0"), "u1")
    rc, out, err = kernlab("top", path)
    check(rc == 2 and b"holds 300 names; at most 256" in err,
          "top: 300 component names refused: %d %r" % (rc, err[-300:]))
    seed = os.path.join(SRC, "kernels", "seeds", "01_naive.cu")
    rc, out, err = kernlab("eval", seed, "--backend", "cpu-emu", "--shape", "32x32x32",
                           "--out", path)
    check(rc == 2 and b"holds 300 names; at most 256" in err,
          "eval --out: refused before evaluating: %d %r" % (rc, err[-300:]))


def test_heap_extent(tmp):
    """A heap's extent edited far past its data: appends went there, where
    no reader looks, and each was lost (and overwritten by the next)."""
    path = edited(tmp, "extent", at_32)
    with h5py.File(path, "r+") as f:
        f["source_bytes"].resize((1 << 40,))
    src = os.path.join(tmp, "new.cu")
    with open(os.path.join(SRC, "kernels", "seeds", "01_naive.cu")) as f:
        text = f.read()
    for k in range(2):
        with open(src, "w") as f:
            f.write(text + "\n// variant %d\n" % k)
        rc, out, err = kernlab("eval", src, "--backend", "cpu-emu", "--shape", "32x32x32",
                               "--out", path)
        check(rc == 0, "eval --out %d: %r" % (k, err[-300:]))
    rc, out, err = kernlab("top", path, "-n", "20")
    check(rc == 0 and b"damaged" not in err, "top reads the file: %r" % err[-300:])
    for cid in ("8", "9"):
        rc, out, err = kernlab("show", path, cid, "--source")
        check(rc == 0 and b"// variant %d" % (int(cid) - 8) in out,
              "candidate %s appended and readable: %d %r" % (cid, rc, err[-300:]))


def test_many_records(tmp):
    """Records are read in batches; damage after the first batches is
    found and described as before."""
    path = os.path.join(tmp, "many.h5")
    subprocess.run([FIXTURE, path, "9000"], check=True, timeout=300)
    with h5py.File(path, "r+") as f:
        c = f["candidates"][5000]
        c["crc"] ^= 1
        f["candidates"][5000] = c
    rc, out, err = kernlab("top", path, "-n", "1")
    check(rc == 0 and b"candidate record 5000 is damaged and 3999 complete records" in err,
          "9000 records, record 5000 damaged: %d %r" % (rc, err[-300:]))


def test_giant_group(tmp):
    """rescore builds each member's context from the whole group: one group
    of 20,000 took minutes. A group over the campaign maximum is refused."""
    path = os.path.join(tmp, "group.h5")
    subprocess.run([FIXTURE, path, "1100"], check=True, timeout=300)
    with h5py.File(path, "r+") as f:
        c = f["candidates"][...]
        c["step"] = 0
        c["group"] = 0
        for i in range(len(c)):
            c[i]["crc"] = rec_crc(c[i])
        f["candidates"][...] = c
    formula = os.path.join(SRC, "lua", "reward", "default.lua")
    rc, out, err = kernlab("rescore", path, "--reward", formula)
    check(rc == 2 and b"group 0 holds 1100 candidates; a campaign's groups hold at most 1024" in err,
          "rescore: a group of 1100 refused: %d %r" % (rc, err[-300:]))


def test_writer_refuses_early(tmp):
    """Files the readers refuse, or that cannot grow, are refused by
    `eval --out` before it evaluates anything (it once appended to a file
    with integer flag_names, and failed with exit 3 after evaluating on a
    contiguous /candidates)."""
    seed = os.path.join(SRC, "kernels", "seeds", "01_naive.cu")
    flags_int = edited(tmp, "flags_int", lambda c: None,
                       {"flag_names": np.arange(5, dtype=np.int32)})
    contiguous = edited(tmp, "contiguous", at_32)
    with h5py.File(contiguous, "r+") as f:
        data = f["candidates"][...]
        del f["candidates"]
        f.create_dataset("candidates", data=data)
    for path, want in ((flags_int, b"the flag_names attribute is not a list of names"),
                       (contiguous, b"/candidates cannot grow")):
        before = open(path, "rb").read()
        rc, out, err = kernlab("eval", seed, "--backend", "cpu-emu", "--shape", "32x32x32",
                               "--out", path)
        check(rc == 2 and want in err and b"baseline" not in out and
              open(path, "rb").read() == before,
              "eval --out refused early: %d %r %r" % (rc, err[-300:], out[-200:]))
    rc, out, err = kernlab("top", contiguous)
    check(rc == 0, "a contiguous /candidates still reads: %d %r" % (rc, err[-300:]))


def test_mixed_tasks(tmp):
    """Candidates of several target shapes in one file (the walkthrough
    review: a 64^3 eval appended to a 256^3 campaign's file). `eval --out`
    refuses to make one, naming both shapes, whether the file names its
    task as now (fp32_256x256x256) or as older files did (fp32_256);
    `top` on one that exists says so and ranks task by task, where it
    ranked the 64^3 kernel (130 us) first above the 256^3 ones (2192 us)."""
    seed = os.path.join(SRC, "kernels", "seeds", "01_naive.cu")

    def campaign(c):
        c["task"] = b"fp32_256x256x256"
    for name, fn in (("campaign", campaign), ("old_names", lambda c: None)):
        path = edited(tmp, name, fn)
        before = open(path, "rb").read()
        rc, out, err = kernlab("eval", seed, "--backend", "cpu-emu", "--shape", "64x64x64",
                               "--out", path)
        check(rc == 2 and b"timed at 256x256x256" in err and b"64x64x64" in err and
              not out and open(path, "rb").read() == before,
              "%s: eval --out at 64x64x64 refused, naming both shapes, file untouched: "
              "%d %r %r" % (name, rc, err[-400:], out[-200:]))

    def mixed(c):
        c["task"] = b"fp32_256x256x256"
        c["correct"] = True
        c["flags"] = 0
        c["time_us"] = [2192.0, 2300.0, 2400.0, 2500.0, 2600.0, 2700.0, 130.0, 140.0]
        c[6]["task"] = c[7]["task"] = b"fp32_64x64x64"
    path = edited(tmp, "mixed", mixed)
    rc, out, err = kernlab("top", path)
    text, err = out.decode(), err.decode()
    check(rc == 0 and "warning" in err and "fp32_256x256x256" in err and
          "fp32_64x64x64" in err,
          "top warns that the file holds two tasks, naming them: %r" % err)
    lists = {}
    for line in text.splitlines():
        if line.startswith("task "):
            task = line[5:].rstrip(":")
            lists[task] = []
        elif lists and line.split() and line.split()[0].isdigit():
            lists[task].append(int(line.split()[1]))
    check(lists == {"fp32_256x256x256": [0, 1, 2, 3, 4, 5], "fp32_64x64x64": [6, 7]},
          "top ranks each task apart, the 64^3 kernels not above the 256^3 ones: %s\n%s"
          % (lists, text))
    rc, out, err = kernlab("top", path, "--by", "reward", "-n", "1")
    ranks = [l.split()[0] for l in out.decode().splitlines() if l.split() and
             l.split()[0].isdigit()]
    check(rc == 0 and ranks == ["1", "1"], "--by reward -n 1: one row per task: %s" % ranks)


def test_resume_task(tmp):
    """run --resume into a file of another task names the file's task, and
    the message reaches the terminal made printable (a review doubted it:
    the task's bytes go into the message raw; the message is printed
    through lab_printable)."""
    def fn(c):
        c["task"] = b"fp32\x1b]0;T\x07\x1b[2J\xc2\x9b"
    path = edited(tmp, "resume_task", fn)
    # the file is refused before the policy is read: any readable file
    # stands in for the checkpoint and its tokenizer
    camp = os.path.join(tmp, "resume_task.lua")
    with open(camp, "w") as f:
        f.write("return {task = {M = 256, N = 256, K = 256}, backend = 'cpu-emu', "
                "checkpoint = %r, tokenizer = %r, reward = %r, steps = 2}\n"
                % (path, path, os.path.join(SRC, "lua", "reward", "default.lua")))
    rc, out, err = kernlab("run", camp, "--out", path, "--resume")
    check(rc == 2 and b"written by another campaign" in err and b"task fp32?" in err
          and b"\x1b" not in err and b"\x07" not in err and b"\x9b" not in err,
          "run --resume: the file's task said printable: %d %r" % (rc, err[-400:]))


def test_ids(tmp):
    """A candidate id is digits: strtoll took " 1" and "+1", and a 0xff
    byte was echoed raw in the message."""
    path = edited(tmp, "ids", lambda c: None)
    for bad in (b"+1", b" 1", b"\xff", b"1x", b""):
        rc, out, err = kernlab("show", path, bad)
        check(rc == 2 and b"is not a candidate id" in err and b"\xff" not in err,
              "show %r: refused: %d %r" % (bad, rc, err))
    rc, out, err = kernlab("show", path, "7")
    check(rc == 0, "show 7: %d %r" % (rc, err))


def test_big_steps(tmp):
    """/steps read in batches: 10M zero rows (153 copies of one gzip
    chunk) are refused at record 0 within the memory limit, by readers and
    by the writer."""
    path = edited(tmp, "bigsteps", at_32)
    rows = 1 << 16
    with h5py.File(path, "r+") as f:
        dt = f["steps"].dtype
        del f["steps"]
        n = 153 * rows
        ds = f.create_dataset("steps", shape=(n,), dtype=dt, maxshape=(None,),
                              chunks=(rows,), compression="gzip")
        chunk = zlib.compress(np.zeros(rows, dt).tobytes(), 9)
        for i in range(0, n, rows):
            ds.id.write_direct_chunk((i,), chunk)
    want = b"step record 0 is damaged (10027007 records after it, 0 complete"
    rc, out, err = limited("top", path)
    check(rc == 0 and want in err and b"sample-0.cu" in out,
          "top: 10M zero step rows, record 0 damaged: %d %r" % (rc, err[-300:]))
    seed = os.path.join(SRC, "kernels", "seeds", "01_naive.cu")
    rc, out, err = limited("eval", seed, "--backend", "cpu-emu", "--shape",
                           "32x32x32", "--out", path)
    check(rc == 2 and want in err and b"appending would overwrite them" in err,
          "eval --out: 10M zero step rows refused: %d %r" % (rc, err[-300:]))


def test_steps_batches(tmp):
    """Damage in /steps past the first read batch is found and described
    as before: 9000 copies of a complete record, the 5000th damaged."""
    path = edited(tmp, "steps9000", lambda c: None)
    with h5py.File(path, "r+") as f:
        s = np.repeat(f["steps"][0:1], 9000)
        s["step"] = np.arange(9000)
        for i in range(9000):
            s[i]["crc"] = rec_crc(s[i])
        s[5000]["crc"] ^= 1
        del f["steps"]
        f.create_dataset("steps", data=s, maxshape=(None,), chunks=(1024,))
    rc, out, err = kernlab("top", path)
    check(rc == 0 and b"step record 5000 is damaged (3999 records after it, "
          b"3999 complete)" in err,
          "9000 steps, record 5000 damaged: %d %r" % (rc, err[-300:]))


def test_steps_renumbered(tmp):
    """A step record is its row's step: one copied to another row (crc
    intact) was read as that row's step, so a report plotted step 1 twice
    and a resume counted it done."""
    path = edited(tmp, "steps_copied", lambda c: None)
    with h5py.File(path, "r+") as f:
        s = np.repeat(f["steps"][0:1], 4)
        s["step"] = [0, 1, 1, 3]
        for i in range(4):
            s[i]["crc"] = rec_crc(s[i])
        del f["steps"]
        f.create_dataset("steps", data=s, maxshape=(None,), chunks=(16,))
    rc, out, err = kernlab("top", path)
    check(rc == 0 and b"step record 2 is damaged (1 records after it, 1 "
          b"complete)" in err,
          "steps 0 1 1 3: record 2 damaged: %d %r" % (rc, err[-300:]))


def test_steps_missing_fields(tmp):
    """A /steps lacking fields of the schema: named, and its records are
    not read (readers), or the file is refused (the writer). They were
    read into an uninitialised buffer and hashed as they were."""
    path = edited(tmp, "steps_partial", at_32)
    with h5py.File(path, "r+") as f:
        s = f["steps"][...]
        del f["steps"]
        f.create_dataset("steps", data=s[["step", "reward_mean", "crc"]],
                         maxshape=(None,), chunks=True)
    want = b"its records have no field `n_candidates`"
    rc, out, err = kernlab("top", path)
    check(rc == 0 and want in err and b"sample-0.cu" in out,
          "top: /steps without fields named: %d %r" % (rc, err[-300:]))
    seed = os.path.join(SRC, "kernels", "seeds", "01_naive.cu")
    before = open(path, "rb").read()
    rc, out, err = kernlab("eval", seed, "--backend", "cpu-emu", "--shape",
                           "32x32x32", "--out", path)
    check(rc == 2 and want in err and open(path, "rb").read() == before,
          "eval --out: /steps without fields refused: %d %r" % (rc, err[-300:]))


def test_big_components(tmp):
    """/reward_components is read for the rows that hold values, not for
    its extent: 300,000 candidates (gzip) by 256 names, with two values
    stored, read within the memory limit; the others have none."""
    n = 300000
    path = edited(tmp, "bigcomp", lambda c: None)
    with h5py.File(path, "r+") as f:
        c = np.repeat(f["candidates"][0:1], n)
        c["id"] = np.arange(n)
        fast_crcs(c)
        del f["candidates"]
        f.create_dataset("candidates", data=c, maxshape=(None,), chunks=(4096,),
                         compression="gzip")
        del f["reward_component_names"]
        names = np.zeros((256, 64), np.uint8)
        for j in range(256):
            names[j, :6] = np.frombuffer(b"c%05d" % j, np.uint8)
        f.create_dataset("reward_component_names", data=names,
                         maxshape=(None, 64), chunks=(16, 64))
        del f["reward_components"]
        comp = f.create_dataset("reward_components", shape=(n, 256), dtype="<f8",
                                maxshape=(None, None), chunks=(256, 8))
        comp[0, 0:2] = [1.5, -0.25]
    rc, out, err = limited("top", path, "-n", "1")
    check(rc == 0 and b"damaged" not in err,
          "top: a (300000, 256) matrix of two values: %d %r" % (rc, err[-300:]))
    rc, out, err = limited("show", path, "0")
    check(rc == 0 and b"c00000" in out and b"+1.5000" in out and
          b"c00001" in out and b"-0.2500" in out and b"c00002" not in out,
          "show 0: its two components: %d %r %r" % (rc, out[-600:], err[-300:]))
    for cid in ("1", "299999"):
        rc, out, err = limited("show", path, cid)
        check(rc == 0 and b"c0000" not in out,
              "show %s: no components: %d %r" % (cid, rc, out[-600:]))


def test_many_flag_names(tmp):
    """flag_names holds at most 64 names (a candidate's flags are 64
    bits): 20M one-byte names are refused before they are allocated, by
    readers and the writer."""
    path = edited(tmp, "bigflags", at_32)
    with h5py.File(path, "r+") as f:
        del f.attrs["flag_names"]
        f.attrs.create("flag_names", np.full(20000000, b"x", dtype="S1"))
    want = b"the flag_names attribute holds 20000000 names; at most 64"
    rc, out, err = limited("top", path)
    check(rc == 2 and want in err, "top: 20M flag names refused: %d %r" % (rc, err[-300:]))
    seed = os.path.join(SRC, "kernels", "seeds", "01_naive.cu")
    rc, out, err = limited("eval", seed, "--backend", "cpu-emu", "--shape",
                           "32x32x32", "--out", path)
    check(rc == 2 and want in err,
          "eval --out: 20M flag names refused: %d %r" % (rc, err[-300:]))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_big_values(tmp)
        test_controls(tmp)
        test_csv(tmp)
        test_csv_controls(tmp)
        test_external_storage(tmp)
        test_record_bounds(tmp)
        test_all_damaged(tmp)
        test_component_names(tmp)
        test_heap_extent(tmp)
        test_many_records(tmp)
        test_giant_group(tmp)
        test_writer_refuses_early(tmp)
        test_mixed_tasks(tmp)
        test_ids(tmp)
        test_resume_task(tmp)
        test_big_steps(tmp)
        test_steps_batches(tmp)
        test_steps_renumbered(tmp)
        test_steps_missing_fields(tmp)
        test_big_components(tmp)
        test_many_flag_names(tmp)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


main()
