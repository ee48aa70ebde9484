"""tests/python/h5fixture.py — results files edited with h5py into what
kernlab never writes, for the hostile-file tests (test_results_hostile_cli,
test_report_hostile): the record crc as results/schema.c computes it, and
a fixture file with its candidate records edited and their crcs fixed."""
import os
import subprocess
import zlib

import h5py


def rec_crc(rec):
    """crc32 over each field's bytes but crc's, as results/schema.c."""
    raw = rec.tobytes()
    crc = 0
    for name in rec.dtype.names:
        if name == "crc":
            continue
        dt, off = rec.dtype.fields[name][:2]
        crc = zlib.crc32(raw[off:off + dt.itemsize], crc)
    return crc


def edited(fixture, tmp, name, fn, attrs=None, more=None):
    """tmp/name.h5 written by the results_fixture binary (8 candidates),
    fn applied to its candidate records (crcs fixed after), attrs set on
    the root, and more(file) run on the open file."""
    path = os.path.join(tmp, name + ".h5")
    subprocess.run([fixture, path, "8"], check=True, timeout=120)
    with h5py.File(path, "r+") as f:
        c = f["candidates"][...]
        fn(c)
        for i in range(len(c)):
            c[i]["crc"] = rec_crc(c[i])
        f["candidates"][...] = c
        for k, v in (attrs or {}).items():
            f.attrs[k] = v
        if more:
            more(f)
    return path
