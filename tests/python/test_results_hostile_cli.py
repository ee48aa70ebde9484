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
   apostrophe), and bytes that are not UTF-8 become U+FFFD.
"""
import csv
import io
import os
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
passed = failed = 0


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)


def rec_crc(rec):
    """crc32 over each field's bytes, as results/schema.c computes it."""
    raw = rec.tobytes()
    crc = 0
    for name in rec.dtype.names:
        if name == "crc":
            continue
        dt, off = rec.dtype.fields[name][:2]
        crc = zlib.crc32(raw[off:off + dt.itemsize], crc)
    return crc


def edited(tmp, name, fn, attrs=None):
    """A fixture file of 8 candidates with fn applied to its records (crcs
    fixed after) and attrs set on the root."""
    path = os.path.join(tmp, name + ".h5")
    subprocess.run([FIXTURE, path, "8"], check=True, timeout=120)
    with h5py.File(path, "r+") as f:
        c = f["candidates"][...]
        fn(c)
        for i in range(len(c)):
            c[i]["crc"] = rec_crc(c[i])
        f["candidates"][...] = c
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
    return path


def kernlab(*args):
    p = subprocess.run([KERNLAB, *args], capture_output=True, timeout=120)
    return p.returncode, p.stdout, p.stderr


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


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_big_values(tmp)
        test_controls(tmp)
        test_csv(tmp)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


main()
