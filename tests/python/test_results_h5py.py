#!/usr/bin/python3
"""tests/python/test_results_h5py.py — reads kernlab results files with h5py
only (no kernlab code), as a user's notebook would.

usage: test_results_h5py.py KERNLAB RESULTS_FIXTURE CRASH_TEST
Runs with Debian's /usr/bin/python3 and python3-h5py (ctest label `python`);
exits 77 (skipped) when h5py is missing.

1. A cleanly closed file (RESULTS_FIXTURE) opens with plain h5py.File:
   every dataset and attribute is read; sources are decoded from the byte
   heap by offset and length and checked against their sha256; record crcs
   are recomputed; the result agrees with `kernlab export --format jsonl`.
2. Files left by writers killed with SIGKILL (CRASH_TEST --keep DIR, 20
   runs): each opens with h5py (swmr=True, as the results.h header says),
   holds at least every acknowledged candidate, and every valid record's
   source, samples and components decode; h5py and kernlab agree on the
   count and the hashes.
"""
import hashlib
import json
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print("SKIP: h5py/numpy not importable with %s: %s" % (sys.executable, e))
    sys.exit(77)

KERNLAB, FIXTURE, CRASH = sys.argv[1], sys.argv[2], sys.argv[3]
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from h5fixture import rec_crc  # noqa: E402
passed = failed = 0

# The order of the fields in the crc (results/internal.h): every field but
# crc, in declaration order, which is the compound's field order.


def check(cond, what):
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)


def valid_prefix(cands, n_src, n_tim):
    n = 0
    for i, c in enumerate(cands):
        if (int(c["crc"]) != rec_crc(c) or int(c["id"]) != i
                or int(c["src_off"]) + int(c["src_len"]) > n_src
                or int(c["timing_off"]) + int(c["timing_count"]) > n_tim):
            break
        n += 1
    return n


def read_all(f):
    """Reads every dataset; returns (valid candidates, sources, extra)."""
    cands = f["candidates"][:]
    heap = f["source_bytes"][:]
    tim = f["timings"][:]
    comp = f["reward_components"][:]
    names = [bytes(r).rstrip(b"\0").decode() for r in
             f["reward_component_names"][:]]
    steps = f["steps"][:]
    n = valid_prefix(cands, len(heap), len(tim))
    sources = []
    for c in cands[:n]:
        off, ln = int(c["src_off"]), int(c["src_len"])
        raw = heap[off:off + ln].tobytes()
        check(hashlib.sha256(raw).digest() == bytes(c["src_sha256"]),
              "id %d: source bytes match src_sha256" % c["id"])
        sources.append(raw.decode("utf-8"))
        t = tim[int(c["timing_off"]):int(c["timing_off"]) + int(c["timing_count"])]
        check(len(t) == int(c["timing_count"]), "id %d: samples" % c["id"])
        check(np.all(np.isfinite(t)), "id %d: finite samples" % c["id"])
    check(comp.ndim == 2 and comp.shape[1] <= len(names),
          "component matrix has a name per column: %s vs %d" % (comp.shape, len(names)))
    return cands[:n], sources, {"comp": comp, "names": names, "steps": steps}


def kernlab_export(path):
    p = subprocess.run([KERNLAB, "export", path, "--format", "jsonl"],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "kernlab export %s: %s" % (path, p.stderr))
    return [json.loads(l) for l in p.stdout.splitlines()]


def test_clean(tmp):
    path = os.path.join(tmp, "RUN.h5")
    subprocess.run([FIXTURE, path], check=True, timeout=120)
    with h5py.File(path, "r") as f:  # plain open: the writer closed it
        a = f.attrs
        check(a["kind"] == b"kernlab-results", "kind attribute")
        check(int(a["schema_version"]) == 3, "schema_version attribute")
        check(int(a["seed"]) == 42, "seed attribute")
        check(b"fixture campaign" in a["config"], "config text")
        for k in ("created", "reward_script", "reward_sha256", "device",
                  "backend", "kernlab_version", "hdf5_version",
                  "nvrtc_version", "driver_version"):
            check(k in a, "attribute %s present" % k)
        check([x.decode() for x in a["flag_names"]] ==
              ["nan_output", "canary_touched", "input_modified", "timer_read"],
              "flag_names")
        check([x.decode() for x in f["reward_components"].attrs["names"]] ==
              ["correctness", "speed"], "names attribute (initial components)")
        cands, sources, extra = read_all(f)
        check(len(cands) == 30, "30 valid candidates, got %d" % len(cands))
        check(extra["names"] == ["correctness", "speed", "speed_bonus"],
              "component names dataset: %s" % extra["names"])
        comp = extra["comp"]
        check(comp.shape == (30, 3), "component matrix shape %s" % (comp.shape,))
        check(np.isnan(comp[0, 2]) and comp[10, 2] == 29.5, "NaN where absent")
        check(len(extra["steps"]) == 3 and list(extra["steps"]["step"]) == [0, 1, 2],
              "steps records")
        check(cands["correct"].dtype == np.bool_, "booleans read as numpy bool")
        check(cands[8]["status"] == b"ok" and cands[8]["label"] == b"sample-8.cu",
              "fixed-length strings read as bytes")
        check(sources[8].startswith("// candidate 8\n"), "source decodes")
        # schema 3: the launches behind the samples (results_gen.h: i % 6
        # samples of 4 launches each)
        check(int(cands[5]["timed_launches"]) == 20 and
              int(cands[6]["timed_launches"]) == 0,
              "timed_launches: %s" % cands["timed_launches"][:7])
        check(cands[2]["src_off"] == cands[3]["src_off"], "dedup by sha256")
        heap_len = len(f["source_bytes"])
        distinct = {bytes(c["src_sha256"]): int(c["src_len"]) for c in cands}
        check(heap_len == sum(distinct.values()),
              "heap holds each distinct source once: %d vs %d"
              % (heap_len, sum(distinct.values())))
    rows = kernlab_export(path)
    check([r["src_sha256"] for r in rows] ==
          [bytes(c["src_sha256"]).hex() for c in cands], "kernlab and h5py agree")


def test_rewritten(tmp):
    """A file whose attributes a notebook rewrote with h5py (str attributes
    become variable-length UTF-8 strings) still reads in kernlab."""
    path = os.path.join(tmp, "rewritten.h5")
    subprocess.run([FIXTURE, path, "6"], check=True, timeout=120)
    with h5py.File(path, "r+") as f:
        for name in ("kind", "backend"):
            value = f.attrs[name].decode()
            del f.attrs[name]
            f.attrs[name] = value
        check(h5py.check_string_dtype(f.attrs.get_id("kind").dtype).encoding == "utf-8",
              "h5py wrote kind as a UTF-8 string")
        # and the flag names as a list of str (variable-length strings)
        flags = [x.decode() for x in f.attrs["flag_names"]]
        del f.attrs["flag_names"]
        f.attrs["flag_names"] = flags
    rows = kernlab_export(path)
    check(len(rows) == 6, "kernlab reads the rewritten file: %d rows" % len(rows))
    p = subprocess.run([KERNLAB, "top", path], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0 and "6 candidates" in p.stdout,
          "top on the rewritten file: %s" % p.stderr[-300:])


def test_export_fails_whole(tmp):
    """An export that fails part-way (a source whose bytes no longer match
    their sha256) leaves no partial file, and an earlier export intact."""
    path = os.path.join(tmp, "flipped.h5")
    subprocess.run([FIXTURE, path, "6"], check=True, timeout=120)
    out = os.path.join(tmp, "flipped.jsonl")
    with open(out, "w") as f:
        f.write('{"id":0, "an earlier export"}\n')
    with h5py.File(path, "r+") as f:
        heap = f["source_bytes"]
        heap[len(heap) - 5] ^= 0xFF  # the last candidate's source
    p = subprocess.run([KERNLAB, "export", path, "--format", "jsonl", "--source", "-o", out],
                       capture_output=True, text=True, timeout=120)
    check(p.returncode == 2 and "src_sha256" in p.stderr,
          "the damaged source is found: %d %s" % (p.returncode, p.stderr))
    check(open(out).read() == '{"id":0, "an earlier export"}\n' and
          not [x for x in os.listdir(tmp) if x.startswith("flipped.jsonl.tmp")],
          "no partial export: the earlier file intact, no temporary left")


def test_crashed(tmp):
    keep = os.path.join(tmp, "crash")
    os.mkdir(keep)
    p = subprocess.run([CRASH, "--runs", "20", "--keep", keep],
                       capture_output=True, text=True, timeout=600)
    check(p.returncode == 0, "crash test run: %s" % p.stderr[-2000:])
    files = sorted(x for x in os.listdir(keep) if x.endswith(".h5"))
    check(len(files) >= 10, "killed files kept: %d" % len(files))
    plain_ok = 0
    for name in files:
        path = os.path.join(keep, name)
        acked = int(open(path[:-3] + ".acked").read())
        try:
            with h5py.File(path, "r") as f:
                plain_ok += 1
        except OSError:
            pass  # HDF5 1.10 refuses a plain open while the SWMR mark is set
        try:
            with h5py.File(path, "r", swmr=True) as f:
                cands, _, _ = read_all(f)
        except Exception as e:  # noqa: BLE001 - any failure is the finding
            check(False, "%s: h5py cannot read it: %s" % (name, e))
            continue
        check(len(cands) >= acked,
              "%s: %d acknowledged, h5py sees %d" % (name, acked, len(cands)))
        rows = kernlab_export(path)
        check(len(rows) == len(cands),
              "%s: kernlab sees %d, h5py %d" % (name, len(rows), len(cands)))
        check([r["src_sha256"] for r in rows] ==
              [bytes(c["src_sha256"]).hex() for c in cands],
              "%s: same sources" % name)
    print("killed files: %d, opened with swmr=True: all checked; plain open "
          "worked for %d" % (len(files), plain_ok))


def main():
    with tempfile.TemporaryDirectory() as tmp:
        test_clean(tmp)
        test_rewritten(tmp)
        test_export_fails_whole(tmp)
        test_crashed(tmp)
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


main()
