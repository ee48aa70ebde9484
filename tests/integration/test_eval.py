#!/usr/bin/env python3
"""tests/integration/test_eval.py — `kernlab eval` end to end, as a user runs it.

usage: test_eval.py KERNLAB SOURCE_DIR GROUP
GROUP is one of: seeds, honest, broken, inputs, isolation, sandbox, cli. Each group is its own
ctest test (label `integration`) so they run in parallel. Standard library
only. Prints "N passed, N failed" and exits non-zero on any failure.
"""
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

KERNLAB, SRC, GROUP = sys.argv[1], sys.argv[2], sys.argv[3]
SEEDS = os.path.join(SRC, "kernels", "seeds")
BROKEN = os.path.join(SRC, "tests", "kernels", "broken")
HONEST = os.path.join(SRC, "tests", "kernels", "honest")
FAST = ["--shape", "64x64x64"]  # small target: these tests are not about speed

from kltest import check, done  # noqa: E402


def kernlab(*args, timeout=600, env=None):
    p = subprocess.run([KERNLAB, *args], capture_output=True, text=True,
                       timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def eval_json(files, *extra):
    rc, out, err = kernlab("eval", *files, "--json", *extra)
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    return rc, rows, err


REQUIRED = ["file", "backend", "compiled", "correct", "max_rel_err",
            "max_abs_err", "time_us", "gflops", "baseline_us", "regs",
            "smem_bytes", "flags", "status", "seed"]


# What a row that measured nothing holds: null, as time_us is, never 0 or
# -1 (a 0 read as a zero-time kernel, a -1 as a count)
UNTIMED = ["max_rel_err", "max_abs_err", "time_us", "time_min_us", "time_max_us",
           "time_p20_us", "time_p80_us", "cv", "gflops", "speedup_vs_baseline",
           "percent_of_baseline"]
UNCOMPILED = ["regs", "spill_stores", "spill_loads", "smem_bytes", "stack_bytes"]
# the same in `kernlab export` of a stored row
UNTIMED_STORED = ["max_rel_err", "max_abs_err", "time_us", "time_min_us",
                  "time_max_us", "gflops"]
UNCOMPILED_STORED = ["regs", "smem_bytes", "spill_bytes", "stack_bytes", "block_x",
                     "block_y", "tile_rows", "tile_cols", "dyn_smem_bytes"]


def not_measured(row, fields, what):
    """Checks that each of fields is null in row (an eval --json row or an
    export line)."""
    bad = {k: row.get(k, "absent") for k in fields if row.get(k, "absent") is not None}
    check(not bad, "%s: not measured, so null: %s" % (what, bad))


def exported(store):
    p = subprocess.run([KERNLAB, "export", store, "--format", "jsonl"], capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0, "export %s: %s" % (store, p.stderr))
    return [json.loads(l) for l in p.stdout.splitlines() if l.strip()]


def group_seeds():
    files = sorted(os.path.join(SEEDS, f) for f in os.listdir(SEEDS)
                   if f.endswith(".cu"))
    check(len(files) >= 8, "at least 8 seed kernels, found %d" % len(files))
    store = os.path.join(tempfile.mkdtemp(), "seeds.h5")
    rc, rows, err = eval_json(files, "--shape", "128x96x80", "--out", store)
    check(rc == 0, "eval of the seeds exits 0, got %d: %s" % (rc, err))
    check(len(rows) == len(files), "one JSON line per seed")
    for r in rows:
        name = os.path.basename(r["file"])
        for k in REQUIRED:
            check(k in r, "%s: field %s present" % (name, k))
        check(r["backend"] == "cpu-emu", "%s: backend cpu-emu" % name)
        check(r["device"].startswith("cpu"), "%s: device the CPU, got %r" % (name, r["device"]))
        check(r["status"] == "ok" and r["correct"] is True,
              "%s: correct, got %s %s" % (name, r["status"], r["error"]))
        check(r["flags"] == [], "%s: no flags yet" % name)
        check(r["time_us"] and r["time_us"] > 0, "%s: timed" % name)
        # each sample is one launch or a batch's mean of up to 16
        check(r["samples"] > 0 and
              r["samples"] <= r["timed_launches"] <= 16 * r["samples"],
              "%s: %s timed launches behind %s samples"
              % (name, r.get("timed_launches"), r["samples"]))
        check(r["baseline_us"] and r["baseline_us"] > 0, "%s: baseline" % name)
        check(r["regs"] > 0, "%s: registers from ptxas" % name)
        shapes = {(s["M"], s["N"], s["K"]) for s in r["shapes"]}
        for want in [(128, 96, 80), (1, 1, 1), (127, 129, 65)]:
            check(want in shapes, "%s: checked at %s" % (name, want))
        check(len(shapes) >= 5, "%s: at least five shapes" % name)
        check(all(s["pass"] for s in r["shapes"]), "%s: every shape passes" % name)
        check(r["max_rel_err"] <= 1e-5, "%s: rel err within fp32 tolerance" % name)
    # the file says whose times it holds: the CPU's model, as the rows do
    q = subprocess.run(["/usr/bin/python3", "-c", """
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    d = f.attrs["device"]
    print(d.decode() if isinstance(d, bytes) else d)
""", store], capture_output=True, text=True)
    check(q.returncode == 0 and q.stdout.strip() == rows[0]["device"],
          "the file's device %r is the rows' %r %s" % (q.stdout.strip(), rows[0]["device"],
                                                      q.stderr[-300:]))
    # top's smem column is eval's: static + dynamic shared memory (it showed
    # the static part only, 0 for 08_double_buffer's 32 KiB of dynamic)
    rc, out, err = kernlab("top", store, "-n", "100")
    lines = out.splitlines()
    check(rc == 0 and len(lines) > 2 and lines[1].split()[-3] == "smem",
          "top's table has smem third from the end: %s" % lines[:2])
    top_smem = {os.path.basename(l.split()[-1]): l.split()[-3]
                for l in lines[2:] if l.strip()}
    check(any(r["launch"]["dyn_smem_bytes"] > 0 for r in rows),
          "a seed uses dynamic shared memory")
    for r in rows:
        name = os.path.basename(r["file"])
        want = str(r["smem_bytes"] + r["launch"]["dyn_smem_bytes"])
        check(top_smem.get(name) == want,
              "%s: top's smem %s is static + dynamic %s" % (name, top_smem.get(name), want))
    shutil.rmtree(os.path.dirname(store), ignore_errors=True)


EXPECTED_BROKEN = {
    "edge_off_by_one.cu": ("wrong", 0),
    "missing_barrier.cu": ("wrong", 0),
    "wrong_index.cu": ("wrong", 0),
    "uninit_accumulator.cu": ("wrong", 0),
    "partial_write.cu": ("wrong", 0),
    "cp_async_no_wait.cu": ("wrong", 0),
    "missing_barrier_cg.cu": ("wrong", 0),
    "mask_read_outside.cu": ("wrong", 0),
    "mask_excludes_caller.cu": ("run_error", 0),
    "mask_mismatch_deadlock.cu": ("deadlock", 0),
    "cg_grid_sync.cu": ("invalid_input", 2),
    "compile_error.cu": ("compile_error", 0),
    "wrong_signature.cu": ("bad_signature", 0),
    "missing_extern_c.cu": ("bad_signature", 0),
    "wrong_name.cu": ("invalid_input", 2),
    "no_launch.cu": ("invalid_input", 2),
    "bad_geometry_zero.cu": ("bad_geometry", 2),
    "bad_geometry_big.cu": ("bad_geometry", 2),
}


def group_honest():
    """The honest corpus end to end on cpu-emu: each kernel compiles (NVRTC
    and the emulator's g++), is right on every shape and raises no flag,
    static or dynamic (the cheats corpus only scans them). A technique the
    emulator lacks or a check misreads would teach the policy to avoid it."""
    files = sorted(os.path.join(HONEST, f) for f in os.listdir(HONEST)
                   if f.endswith(".cu"))
    check(len(files) >= 30, "at least 30 honest kernels, found %d" % len(files))
    rc, rows, err = eval_json(files, *FAST)
    check(rc == 0, "eval of the honest kernels exits 0, got %d: %s" % (rc, err))
    check(len(rows) == len(files), "one JSON line per honest kernel")
    for r in rows:
        name = os.path.basename(r["file"])
        check(r["compiled"] and r["status"] == "ok" and r["correct"] is True,
              "%s: compiled and correct, got %s %s" % (name, r["status"], r["error"]))
        check(r["flags"] == [], "%s: no flags, got %s (%s)"
              % (name, r["flags"], r["flag_detail"]))


def group_broken():
    for name, (status, code) in sorted(EXPECTED_BROKEN.items()):
        path = os.path.join(BROKEN, name)
        check(os.path.exists(path), "broken kernel %s exists" % name)
        if not os.path.exists(path):
            continue
        rc, rows, err = eval_json([path], *FAST)
        check(rc == code, "%s: exit %d, got %d (%s)" % (name, code, rc, err))
        check(len(rows) == 1, "%s: one JSON line" % name)
        if rows:
            r = rows[0]
            check(r["status"] == status,
                  "%s: status %s, got %s (%s)" % (name, status, r["status"], r["error"]))
            check(r["correct"] is False, "%s: not correct" % name)
            check(r["error"] and "\n" not in r["error"],
                  "%s: a one-line reason" % name)
    # Grid-level cooperative groups are refused with the reason, not met
    # as a compile error on one backend and a hang on the other
    rc, rows, err = eval_json([os.path.join(BROKEN, "cg_grid_sync.cu")], *FAST)
    msg = rows[0]["error"] if rows else ""
    check("grid" in msg and "not supported" in msg
          and "cooperative launch" in msg,
          "cg_grid_sync.cu: the refusal names the grid group and why: %s" % msg)
    # A warp operation's mask is the device's: a lane left out of its own
    # mask and lanes that never meet a mask are said with the mask
    for name, words in (("mask_excludes_caller.cu", ["lane 16", "0x0000ffff",
                                                     "leaves out its own lane"]),
                        ("mask_mismatch_deadlock.cu", ["mask 0xffffffff",
                                                       "0xfffffffe"])):
        rc, rows, err = eval_json([os.path.join(BROKEN, name)], *FAST)
        msg = rows[0]["error"] if rows else ""
        check(all(w in msg for w in words),
              "%s: the reason says %s: %s" % (name, words, msg))
    # The edge bug only shows on ragged shapes: at a multiple of the tile the
    # target shape passes and a ragged check shape fails.
    rc, rows, _ = eval_json([os.path.join(BROKEN, "edge_off_by_one.cu")], *FAST)
    if rows:
        by = {(s["M"], s["N"], s["K"]): s["pass"] for s in rows[0]["shapes"]}
        check(by.get((64, 64, 64)) is True, "edge bug passes the tile multiple")
        check(by.get((127, 129, 65)) is False, "edge bug fails 127x129x65")
    # A deterministic wrong kernel whose output does not scale as A B does
    # (C = A B + 1) differs on the scaled rerun: the error says it may be
    # that, not only a race, and a kernel wrong while checked raises no
    # flag for it (nondeterministic, nor timed_output_wrong for its timed
    # launches): it is scored wrong, not as a cheat
    with tempfile.TemporaryDirectory() as d:
        plus1 = open(os.path.join(SEEDS, "01_naive.cu")).read().replace(
            "C[row * N + col] = acc;", "C[row * N + col] = acc + 1.0f;")
        check("acc + 1.0f" in plus1, "the +1 kernel is made")
        rc, rows, _ = eval_json([write(d, "plus1.cu", plus1.encode())], *FAST)
        if rows:
            check(rows[0]["status"] == "wrong" and
                  "does not scale as A B does" in rows[0]["error"] and
                  rows[0]["flags"] == [] and not rows[0]["flag_detail"],
                  "a wrong kernel's rerun difference is not called a race "
                  "alone, and not flagged: %s %s %r"
                  % (rows[0]["error"], rows[0]["flags"], rows[0]["flag_detail"]))
    # An honest in-block split-K whose partial sums meet through float
    # atomicAdd in shared memory: right, but its bits depend on the order
    # of the atomics, which the reversed rerun changes. The contract asks
    # for bit-exact output, so it is flagged, and the detail names atomics
    # and the rule (it blamed a missing __syncthreads only)
    with tempfile.TemporaryDirectory() as d:
        src = """
#define TX 32
#define TY 8
#define KS 4
KL_LAUNCH(TX, TY * KS, TY, TX, 0);
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  __shared__ float part[TY][TX];
  const int tx = threadIdx.x, ty = threadIdx.y % TY, ks = threadIdx.y / TY;
  const int row = blockIdx.y * TY + ty, col = blockIdx.x * TX + tx;
  const int chunk = (K + KS - 1) / KS, kb = ks * chunk, ke = min(K, kb + chunk);
  float acc = 0.0f;
  if (row < M && col < N)
    for (int k = kb; k < ke; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
  if (ks == 0) part[ty][tx] = acc;
  __syncthreads();
  if (ks != 0) atomicAdd(&part[ty][tx], acc);
  __syncthreads();
  if (ks == 0 && row < M && col < N) C[row * N + col] = part[ty][tx];
}
"""
        rc, rows, _ = eval_json([write(d, "atomic_splitk.cu", src.encode())], *FAST)
        if rows:
            r = rows[0]
            check(r["correct"] and r["flags"] == ["nondeterministic"] and
                  "float atomics" in r["flag_detail"] and
                  "bit-exact" in r["flag_detail"],
                  "order-dependent float atomics: nondeterministic, and the "
                  "detail says why and the rule: %s %s %r"
                  % (r["correct"], r["flags"], r["flag_detail"]))
    # An output of +inf everywhere: its error is not finite (JSON null,
    # "inf" in the table), not 0, and the line counts the NaN/inf elements
    # (it read "rel_err 0 ..., 0 elements over tolerance")
    with tempfile.TemporaryDirectory() as d:
        inf = open(os.path.join(SEEDS, "01_naive.cu")).read().replace(
            "C[row * N + col] = acc;", "C[row * N + col] = acc + 1.0f / 0.0f;")
        check("1.0f / 0.0f" in inf, "the +inf kernel is made")
        path = write(d, "allinf.cu", inf.encode())
        rc, rows, _ = eval_json([path], *FAST)
        if rows:
            r = rows[0]
            first = r["shapes"][0] if r["shapes"] else {}
            check(r["status"] == "wrong" and r["max_rel_err"] is None and
                  r["max_abs_err"] is None and first.get("rel_err", 0) is None and
                  first.get("nonfinite") == 64 * 64,
                  "all +inf: errors null, every element nonfinite: %s %s %s %s"
                  % (r["status"], r["max_rel_err"], r["max_abs_err"], first))
            check("4096 of 4096 elements NaN/inf" in r["error"] and
                  "rel_err inf" in r["error"],
                  "all +inf: the line counts the NaN/inf elements: %s" % r["error"])
        rc, out, _ = kernlab("eval", path, *FAST)
        row = [l for l in out.splitlines() if l.startswith("allinf.cu")]
        check(row and " inf " in row[0] and "0.0e+00" not in row[0],
              "all +inf: the table's rel_err is inf: %s" % row)
    # A completion cut off inside matmul's body: the contract check appended
    # after it parses as more of the body, and the assertion fails last. It
    # is a compile error that says the text may be cut short, not
    # bad_signature (every truncated sample of a campaign was)
    with tempfile.TemporaryDirectory() as d:
        lines = open(os.path.join(SEEDS, "01_naive.cu")).read().splitlines(True)
        cut = "".join(lines[:-3])
        rc, rows, _ = eval_json([write(d, "cut.cu", cut.encode())], *FAST)
        if rows:
            check(rows[0]["status"] == "compile_error" and
                  "the source ends at line %d" % (len(lines) - 3) in
                  rows[0]["error"] and "cut short" in rows[0]["error"],
                  "a cut-off kernel is a compile error said as such: %s %s"
                  % (rows[0]["status"], rows[0]["error"]))
    # compile errors carry NVRTC's first error line
    rc, rows, _ = eval_json([os.path.join(BROKEN, "compile_error.cu")], *FAST)
    if rows:
        check("error" in rows[0]["error"], "compile error shows NVRTC's line")


def write(d, name, data):
    path = os.path.join(d, name)
    with open(path, "wb") as f:
        f.write(data)
    return path


GOOD = open(os.path.join(SEEDS, "02_coalesced.cu"), "rb").read()


def group_inputs():
    with tempfile.TemporaryDirectory() as d:
        cases = {
            "missing": os.path.join(d, "nope.cu"),
            "directory": d,
            "empty": write(d, "empty.cu", b""),
            "huge": write(d, "huge.cu", b"// x\n" * (2 * 1024 * 1024)),
            "non-utf8": write(d, "latin1.cu", GOOD + b"\n// caf\xe9\n"),
            "nul": write(d, "nul.cu", GOOD + b"\x00"),
            "no matmul": write(d, "nomatmul.cu", GOOD.replace(b"matmul", b"mm")),
            "no KL_LAUNCH": write(d, "nolaunch.cu", GOOD.replace(b"KL_LAUNCH", b"// ")),
            "host include": write(d, "inc.cu", b'#include "/etc/passwd"\n' + GOOD),
            "system include": write(d, "sys.cu", b"#include <stdio.h>\n" + GOOD),
            "macro include": write(d, "minc.cu", b"#define H <stdio.h>\n#include H\n" + GOOD),
            "digraph include": write(d, "dinc.cu", b"%:include <stdio.h>\n" + GOOD),
            "spliced include": write(d, "sinc.cu", b"#inc\\\nlude <stdio.h>\n" + GOOD),
            "zero threads": write(d, "zero.cu", GOOD.replace(b"KL_LAUNCH(BS, BS,", b"KL_LAUNCH(0, BS,")),
            "too many threads": write(d, "big.cu", GOOD.replace(b"KL_LAUNCH(BS, BS,", b"KL_LAUNCH(64, 32,")),
        }
        for what, path in cases.items():
            rc, out, err = kernlab("eval", path, "--json", *FAST)
            check(rc == 2, "%s: exit 2, got %d (%s)" % (what, rc, err.strip()))
            rows = [json.loads(l) for l in out.splitlines() if l.strip()]
            check(len(rows) == 1 and rows[0]["status"] in ("invalid_input", "bad_geometry"),
                  "%s: reported as invalid: %s" % (what, out.strip()[:200]))
            if rows:
                check(rows[0]["error"] and "\n" not in rows[0]["error"],
                      "%s: one-line reason" % what)
            check("Traceback" not in err and "Sanitizer" not in err,
                  "%s: no crash" % what)
            if what in ("missing", "directory", "empty", "huge"):
                # said once: "kernlab eval: empty.cu: empty.cu: empty file"
                check(err.count(path + ":") == 1,
                      "%s: the message names the file once: %r" % (what, err))
        # inputs are read before the baseline is timed: a run of unreadable
        # files times nothing (the naive seed at 1024^3 is half a minute of
        # cpu-emu); its rows have no baseline (no bound on the time: a
        # loaded machine would fail it, and the baseline says it)
        t0 = time.time()
        rc, rows, err = eval_json([cases["missing"], cases["empty"]],
                                  "--shape", "1024x1024x1024")
        check(rc == 2 and len(rows) == 2 and
              all(r["baseline_us"] is None for r in rows),
              "unreadable files: exit 2 in %.1f s, no baseline: %s %s"
              % (time.time() - t0, [r["baseline_us"] for r in rows], err))
        for r in rows:
            not_measured(r, UNTIMED + UNCOMPILED + ["compile_ms"],
                         "invalid_input row of %s" % os.path.basename(r["file"]))
        store = os.path.join(d, "invalid.h5")
        kernlab("eval", cases["empty"], *FAST, "--out", store)
        stored = exported(store)
        check(len(stored) == 1 and stored[0]["status"] == "invalid_input",
              "the empty file's row is stored: %s" % stored)
        for r in stored:
            not_measured(r, UNTIMED_STORED + UNCOMPILED_STORED + ["compile_ms"],
                         "export of the invalid_input row")
        rc, out, _ = kernlab("eval", cases["missing"])
        check(rc == 2 and "baseline = naive seed: none" in out,
              "the table says no baseline was timed: %r" % out[:300])
        # a label and a source that are not UTF-8 (a file name, a comment),
        # stored with --out: export --format jsonl stays valid JSON (U+FFFD
        # for the bad bytes) and the report valid UTF-8
        odd = write(d, "we\x1b[31m\xffird.cu".encode("latin-1").decode("utf-8",
                                                                           "surrogateescape"),
                    b"// caf\xc3\xa9 \xff\xfe\n" + GOOD)
        store = os.path.join(d, "odd.h5")
        e = subprocess.run([KERNLAB, "eval", odd, *FAST, "--out", store], capture_output=True,
                           timeout=600)
        t = subprocess.run([KERNLAB, "show", store, "0"], capture_output=True, timeout=120)
        for name, out in (("eval", e.stdout), ("show", t.stdout)):
            check(b"\x1b" not in out and b"\xff" not in out and b"we?[31m?ird.cu" in out,
                  "%s's table shows the label's escape and stray byte as '?': %r" %
                  (name, out[-300:]))
        p = subprocess.run([KERNLAB, "export", store, "--format", "jsonl", "--source"],
                           capture_output=True, timeout=120)
        try:
            objs = [json.loads(l.decode("utf-8")) for l in p.stdout.splitlines()]
        except ValueError as e:
            objs = []
            check(False, "export of non-UTF-8 text: not valid JSON: %s" % e)
        check(p.returncode == 0 and len(objs) == 1 and "caf\u00e9 \ufffd\ufffd" in
              objs[0]["source"] and "\ufffd" in objs[0]["label"],
              "export: U+FFFD for the bad bytes, good UTF-8 kept: %r" %
              (objs[0]["label"] if objs else p.stderr))
        page = os.path.join(d, "odd.html")
        r = subprocess.run([KERNLAB, "report", store, "-o", page], capture_output=True,
                           timeout=120)
        rc, err = r.returncode, r.stderr
        try:
            open(page, "rb").read().decode("utf-8")
            ok_page = rc == 0
        except (ValueError, OSError):
            ok_page = False
        check(ok_page, "the report of non-UTF-8 text is valid UTF-8: %s" % err)
        # allowed includes are accepted
        ok = write(d, "fp16.cu", b"#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n" + GOOD)
        rc, rows, err = eval_json([ok], *FAST)
        check(rc == 0 and rows and rows[0]["correct"], "allowlisted includes compile: %s" % err)
        # one invalid file does not stop the others
        rc, rows, _ = eval_json([cases["empty"], os.path.join(SEEDS, "01_naive.cu")], *FAST)
        check(rc == 2 and len(rows) == 2 and rows[1]["correct"],
              "a bad file among good ones: exit 2, the good one still evaluated")


def group_isolation():
    with tempfile.TemporaryDirectory() as d:
        crash = write(d, "crash.cu", GOOD.replace(
            b"C[row * N + col] = acc;", b"C[row * N + col] = acc; *(volatile int*)0 = 1;"))
        hang = write(d, "hang.cu", GOOD.replace(
            b"C[row * N + col] = acc;", b"C[row * N + col] = acc; for (volatile int i = 0; i >= 0; i += 0) {}"))
        store = os.path.join(d, "isolation.h5")
        rc, rows, err = eval_json([crash, hang, os.path.join(SEEDS, "01_naive.cu"),
                                   os.path.join(BROKEN, "compile_error.cu")],
                                  *FAST, "--timeout", "3", "--out", store)
        check(rc == 0, "crashing and hanging kernels: eval still exits 0 (%s)" % err)
        check(len(rows) == 4, "four rows")
        if len(rows) == 4:
            check(rows[0]["status"] == "crashed:SIGSEGV", "crash status: %s" % rows[0]["status"])
            check(rows[1]["status"] == "timeout", "hang status: %s" % rows[1]["status"])
            check(rows[2]["correct"], "the kernel after them is still evaluated")
            check(rows[3]["status"] == "compile_error",
                  "compile error status: %s" % rows[3]["status"])
            # the hang compiled (its resources are real) and was never
            # timed; the compile error was not compiled, but its compile
            # took a time
            not_measured(rows[1], UNTIMED, "timeout row")
            check(all(isinstance(rows[1][k], int) and rows[1][k] >= 0 for k in UNCOMPILED),
                  "timeout row: resources of its compile: %s" % rows[1])
            not_measured(rows[3], UNTIMED + UNCOMPILED, "compile_error row")
            check(all(isinstance(rows[i]["compile_ms"], (int, float)) and
                      rows[i]["compile_ms"] > 0 for i in (1, 3)),
                  "the compile's time: %s" % [rows[i]["compile_ms"] for i in (1, 3)])
            stored = exported(store)
            check(len(stored) == 4, "four rows stored: %d" % len(stored))
            if len(stored) == 4:
                not_measured(stored[1], UNTIMED_STORED, "export of the timeout row")
                not_measured(stored[3], UNTIMED_STORED + UNCOMPILED_STORED,
                             "export of the compile_error row")
                check(stored[3]["compile_ms"] and stored[3]["compile_ms"] > 0,
                      "export: the compile error's compile time: %s" % stored[3])
                # never checked, still at the target shape (show said
                # "target 0x0x0"), and no launch geometry said as -1x-1
                check([(r["shape_m"], r["shape_n"], r["shape_k"]) for r in stored]
                      == [(64, 64, 64)] * 4,
                      "every row at the target shape: %s" %
                      [(r["shape_m"], r["shape_n"], r["shape_k"]) for r in stored])
                rc, out, _ = kernlab("show", store, "3")
                check(rc == 0 and "(target 64x64x64)" in out and "  launch      -\n" in out
                      and "-1x-1" not in out,
                      "show of the compile error: target and launch: %s" % out[:600])
            # a candidate that crashed, hung or failed to compile ran (or
            # compiled) confined all the same: "none" was reported for them
            for r in rows:
                check(r["sandbox"] in ("seccomp+rlimits", "seccomp+rlimits+namespaces"),
                      "%s (%s): sandbox says its confinement, got %r"
                      % (os.path.basename(r["file"]), r["status"], r["sandbox"]))
        # the table's status column is 14 characters: a longer status is cut
        # with an ellipsis ("crashed:SIGSEG" read as a status of its own),
        # and the columns after it stay in place
        rc, out, _ = kernlab("eval", crash, *FAST, "--timeout", "3")
        row = [l for l in out.splitlines() if l.startswith("crash.cu")]
        check(rc == 0 and row and "crash.cu" + " " * 27 + "crashed:SIGSE\u2026 no " in row[0],
              "eval's table: 'crashed:SIGSE\u2026' in a 14-character column: %r" % row)
        # divergent barrier: a deadlock, reported, not a hang
        dl = write(d, "deadlock.cu", b"""
KL_LAUNCH(64, 1, 8, 8, 0);
extern "C" __global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
  if (threadIdx.x % 2) __syncthreads(); else __syncwarp();
}
""")
        rc, rows, _ = eval_json([dl], *FAST)
        check(rows and rows[0]["status"] == "deadlock", "deadlock status: %s" % (rows and rows[0]["status"]))


HOSTILE = os.path.join(SRC, "tests", "kernels", "hostile")
EXPECTED_HOSTILE = {
    "write_file.cu": ["killed:seccomp:openat", "killed:seccomp:open"],
    "socket.cu": ["killed:seccomp:socket"],
    "spawn.cu": ["killed:seccomp:clone", "killed:seccomp:clone3",
                 "killed:seccomp:vfork", "killed:seccomp:unknown"],
    "signal_parent.cu": ["killed:seccomp:getppid", "killed:seccomp:kill"],
}


def group_sandbox():
    for leftover in ("/tmp/kernlab_hostile_write", "/tmp/kernlab_hostile_spawn"):
        if os.path.exists(leftover):
            os.unlink(leftover)
    files = [os.path.join(HOSTILE, f) for f in sorted(EXPECTED_HOSTILE)]
    files.append(os.path.join(SEEDS, "05_blocktile_2d.cu"))
    rc, rows, err = eval_json(files, *FAST)
    check(rc == 0, "hostile kernels: eval exits 0 (%s)" % err)
    check(len(rows) == len(files), "one row per hostile kernel, lab alive")
    for r in rows[:-1]:
        name = os.path.basename(r["file"])
        check(r["status"] in EXPECTED_HOSTILE[name],
              "%s: status %s, expected one of %s" % (name, r["status"], EXPECTED_HOSTILE[name]))
        check(r["compiled"] and not r["correct"], "%s: compiled, not correct" % name)
    if rows:
        check(rows[-1]["correct"] and rows[-1]["sandbox"] != "none",
              "an honest kernel runs correctly inside the sandbox: %s" % rows[-1]["sandbox"])
    check(not os.path.exists("/tmp/kernlab_hostile_write"), "no file was created")
    check(not os.path.exists("/tmp/kernlab_hostile_spawn"), "no shell ran")
    rc, out, _ = kernlab("sandbox", "--explain")
    check(rc == 0 and "run-cpu-emu" in out and "socket" in out and "RLIMIT_FSIZE" in out,
          "sandbox --explain prints the profile")
    rc, out, _ = kernlab("sandbox", "--explain", "--pfc")
    check(rc == 0 and "ALLOW" in out, "--pfc prints the compiled filter")
    rc, _, _ = kernlab("sandbox")
    check(rc == 2, "sandbox without --explain is a usage error")


def group_writers():
    """Two evals writing one new results file: the first is held (strace
    delays the return of its link(2), the moment the new file gets its
    name) while the second starts. Exactly one may write it, and whatever
    each says it stored is in the file: once the second took the unlocked
    new file, rebuilt it over the first's, and both exited 0 with the
    first's rows in a deleted file."""
    strace = shutil.which("strace")
    check(strace is not None, "strace is installed (scripts/deps.sh)")
    if not strace:
        return
    # LeakSanitizer cannot run in a traced process (it stops the threads
    # with ptrace itself): off for the held eval of an ASan build
    traced_env = dict(os.environ)
    traced_env["ASAN_OPTIONS"] = (traced_env.get("ASAN_OPTIONS", "") +
                                  ":detect_leaks=0").lstrip(":")
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "race.h5")
        a = subprocess.Popen([strace, "-o", os.devnull, "-e",
                              "inject=link:delay_exit=3000000", KERNLAB, "eval",
                              os.path.join(SEEDS, "01_naive.cu"),
                              os.path.join(SEEDS, "02_coalesced.cu"),
                              *FAST, "--out", out],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=traced_env)
        for _ in range(600):  # until the held link has happened
            if os.path.exists(out) or a.poll() is not None:
                break
            time.sleep(0.05)
        check(os.path.exists(out), "the first eval's file appeared")
        rc_b, _, err_b = kernlab("eval", os.path.join(SEEDS, "03_smem_tiling.cu"),
                                 *FAST, "--out", out)
        out_a, err_a = a.communicate(timeout=600)
        rc, text, err = kernlab("export", out, "--format", "jsonl")
        labels = sorted(os.path.basename(json.loads(l)["label"])
                        for l in text.splitlines() if l.strip())
        want = []
        if a.returncode == 0:
            want += ["01_naive.cu", "02_coalesced.cu"]
        if rc_b == 0:
            want += ["03_smem_tiling.cu"]
        check(rc == 0 and labels == sorted(want),
              "every eval that exited 0 has its rows in the file: first %d, "
              "second %d, rows %s: %s %s" % (a.returncode, rc_b, labels,
                                             err_a[-300:], err_b[-300:]))
        check(a.returncode == 0 and rc_b == 3 and
              "another process is writing" in err_b,
              "the held first writer keeps the file, the second is refused: "
              "%d %d %r" % (a.returncode, rc_b, err_b[-300:]))
    file_size_limit()


def file_size_limit():
    """A file-size limit (ulimit -f; a batch system's RLIMIT_FSIZE) is an
    output the system refuses, as a full disk is: exit 3 naming the file and
    the error, no temporary file left. By default its SIGXFSZ killed eval,
    export and report mid-write (exit 153 in a shell, no message) and left
    their FILE.tmp.PID behind."""
    import resource

    def limited(kib):
        return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (kib * 1024, kib * 1024))
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "s.h5")
        rc, _, err = kernlab("eval", os.path.join(SEEDS, "01_naive.cu"), *FAST, "--out", store)
        check(rc == 0, "eval --out without a limit: %s" % err[-300:])
        for what, args, kib in (
                ("eval --out", ["eval", os.path.join(SEEDS, "01_naive.cu"), *FAST, "--out",
                                os.path.join(d, "e.h5")], 64),
                ("export", ["export", store, "--format", "jsonl", "--source", "-o",
                            os.path.join(d, "x.jsonl")], 1),
                ("report", ["report", store, "-o", os.path.join(d, "r.html")], 4)):
            p = subprocess.run([KERNLAB, *args], capture_output=True, text=True, timeout=600,
                               preexec_fn=limited(kib))
            left = [f for f in os.listdir(d) if ".tmp." in f]
            check(p.returncode == 3 and "File too large" in p.stderr and not left,
                  "%s past a %d KiB file-size limit: exit 3 saying so, nothing left: %d %r %s" %
                  (what, kib, p.returncode, p.stderr[-300:], left))


def out_task_checks(naive):
    """`eval --out` into an existing file at another target shape: the
    walkthrough review's 64^3 eval appended to a 256^3 campaign's file
    exited 0, `top` ranked it first for doing 16x less work and the
    campaign's --resume refused the file. Refused now, exit 2, before
    anything is evaluated, the file untouched; the file's own shape is
    still taken (a file eval made keeps taking evals at its shape)."""
    with tempfile.TemporaryDirectory() as d:
        store = os.path.join(d, "board.h5")
        coalesced = os.path.join(SEEDS, "02_coalesced.cu")
        rc, _, err = kernlab("eval", naive, "--shape", "32x32x32", "--out", store)
        check(rc == 0, "eval --out makes a new file: %s" % err[-300:])
        rc, _, err = kernlab("eval", coalesced, "--shape", "32x32x32", "--out", store)
        check(rc == 0, "eval --out at the file's own shape appends: %s" % err[-300:])
        before = open(store, "rb").read()
        rc, out, err = kernlab("eval", coalesced, "--shape", "16x16x16", "--shape",
                               "32x32x32", "--out", store)
        check(rc == 2 and "32x32x32" in err and "16x16x16" in err and
              "target shape" in err,
              "eval --out at another target shape: exit 2 naming both shapes: "
              "%d %r" % (rc, err[-400:]))
        check(not out and "baseline" not in err,
              "nothing evaluated before the refusal: %r" % out[-300:])
        check(open(store, "rb").read() == before, "the refused file is untouched")
        rc, text, err = kernlab("export", store, "--format", "jsonl")
        rows = [json.loads(l) for l in text.splitlines() if l.strip()]
        check(rc == 0 and [r["task"] for r in rows] == ["fp32_32x32x32"] * 2,
              "the file holds the two 32^3 rows only: %s" % [r.get("task") for r in rows])
        rc, out, err = kernlab("top", store)
        check(rc == 0 and "warning" not in err and "task fp32" not in out,
              "top on a file of one task: one list, no warning: %r" % err)


def group_cli():
    naive = os.path.join(SEEDS, "01_naive.cu")
    rc, out, _ = kernlab("--help")
    check(rc == 0 and "eval" in out, "--help lists eval")
    # every command answers --help and -h with its usage, exit 0
    for cmd in ("eval", "sandbox", "flags", "top", "show", "diff", "export", "report",
                "rescore", "tokenizer", "generate", "corpus", "prime", "run", "search"):
        for opt in ("--help", "-h"):
            rc, out, err = kernlab(cmd, opt)
            check(rc == 0 and cmd in out and "usage" in out,
                  "%s %s: exit 0 with its usage: %d %r %r" % (cmd, opt, rc, out[:200], err[:200]))
    # every option a command's parser compares against is in its --help:
    # eval -j, corpus --jobs, generate --no-bos and tokenizer info --merges
    # were accepted but not listed (the walkthrough review)
    owners = {"eval.c": ["eval"], "corpus_cmd.c": ["corpus"], "prime_cmd.c": ["prime"],
              "run_cmd.c": ["run"], "search_cmd.c": ["search"],
              "results_cmd.c": ["top", "show"], "export_cmd.c": ["export"],
              "diff_cmd.c": ["diff"],
              "report_cmd.c": ["report"], "rescore_cmd.c": ["rescore"],
              "flags_cmd.c": ["flags"], "tokenizer_cmd.c": ["tokenizer"],
              "generate_cmd.c": ["generate"], "sandbox_cmd.c": ["sandbox"]}
    # said in the code only to refuse or to print the help itself
    not_options = {"--help", "-h", "--", "--write"}
    seen = 0
    for name, cmds in owners.items():
        with open(os.path.join(SRC, "lab", name)) as f:
            code = f.read()
        opts = set(re.findall(r'strn?cmp\([^;]*?"(-[-a-zA-Z][-a-z0-9]*)=?"', code))
        helps = "".join(kernlab(c, "--help")[1] for c in cmds)
        missing = sorted(o for o in opts - not_options
                         if not re.search(re.escape(o) + r"(?![-a-z0-9])", helps))
        seen += len(opts)
        check(not missing, "%s: options its parser takes but %s --help does "
              "not list: %s" % (name, "/".join(cmds), missing))
    check(seen > 50, "the option scan found the parsers' options: %d" % seen)
    # a value-taking option with nothing after it is said to miss its value
    for argv in (["top", "x.h5", "-n"], ["report", "x.h5", "-o"],
                 ["export", "x.h5", "--format"]):
        rc, _, err = kernlab(*argv)
        check(rc == 2 and "missing value after " + argv[-1] in err,
              "%s: 'missing value after %s', exit 2: %d %r" % (argv, argv[-1], rc, err))
    rc, _, err = kernlab("prime", "--bogus")
    check(rc == 2 and "unknown option --bogus" in err,
          "prime --bogus: 'unknown option', exit 2: %d %r" % (rc, err))
    rc, out, _ = kernlab("rescore", "--help")
    check(rc == 0 and "re-apply a reward formula" in out,
          "rescore --help says what rescore does: %r" % out)
    for cmd in ("a", "un", ""):  # not commands, though words of the usage text
        rc, out, err = kernlab(cmd, "--help")
        check(rc == 2 and "unknown command" in err and not out,
              "%r --help: unknown command, exit 2: %d %r" % (cmd, rc, out[:200]))
    rc, _, err = kernlab("frobnicate")
    check(rc == 2 and "unknown command" in err, "unknown command exits 2")
    # side-by-side candidates are said to be timed so; one at a time is not
    pair = [naive, os.path.join(SEEDS, "02_coalesced.cu")]
    rc, out, _ = kernlab("eval", *pair, *FAST, "--jobs", "2")
    check(rc == 0 and "note: 2 candidates ran side by side (--jobs 2" in out,
          "eval --jobs 2: the table says the candidates shared the machine: %s" % out[:600])
    rc, out, _ = kernlab("eval", *pair, *FAST, "--jobs", "1")
    check(rc == 0 and "side by side" not in out, "eval --jobs 1: no such note: %s" % out[:600])
    rc, _, err = kernlab("eval", naive, "--backend", "gpu")
    check(rc == 3 and "gpu" in err, "--backend gpu without a device exits 3: %s" % err)
    rc, _, err = kernlab("eval", naive, "--backend", "tpu")
    check(rc == 2, "unknown backend exits 2")
    for bad in (["--shape", "0x4x4"], ["--shape", "4x4"], ["--shape", "4294967297x1x1"],
                ["--shape", "1x1x1 "], ["--seed", "x"], ["--seed", "-1"],
                ["--seed", "5x"], ["--bogus"], [],
                # NaN passes every `<= 0` test; atoi wrapped a huge count
                ["--timeout", "nan"], ["--compile-timeout", "nan"],
                ["--max-speedup", "nan"], ["--timeout", "inf"], ["--jobs", "99999999999999"],
                ["--threads", "4x"], ["--out", ""]):
        rc, _, err = kernlab("eval", *([naive] if bad else []), *bad)
        check(rc == 2 and (not bad or bad[0] == "--bogus" or bad[0] in err),
              "bad usage %s exits 2 naming the option, got %d: %s" % (bad, rc, err))
    # the seed is reported and replays the same inputs (same errors)
    rc, rows1, _ = eval_json([naive], *FAST)
    seed = rows1[0]["seed"]
    rc, rows2, _ = eval_json([naive], *FAST, "--seed", str(seed))
    check(rows1[0]["max_rel_err"] == rows2[0]["max_rel_err"],
          "--seed %s replays: %s vs %s" % (seed, rows1[0]["max_rel_err"], rows2[0]["max_rel_err"]))
    rc, rows3, _ = eval_json([naive], *FAST, "--seed", str(seed + 1))
    check(rows3[0]["max_rel_err"] != rows1[0]["max_rel_err"], "another seed, other inputs")
    # plausibility: a speedup over the naive seed beyond --max-speedup is
    # flagged and measured again; the default bound leaves the seeds alone.
    # A kernel that does nothing still pays the emulator's cost per thread:
    # at 256x256x128 under ASan it measured only 2.4-4x the naive seed
    # (this check failed about half the time there), so the flagged run uses
    # K = 1024, where the naive seed does 8x the work and the nop measured
    # 14-28x under ASan
    nop = os.path.join(SRC, "tests", "cheats", "nop_kernel.cu")
    rc, rows, _ = eval_json([nop], "--shape", "256x256x1024", "--max-speedup", "3")
    check(rows and "implausible_speed" in rows[0]["flags"]
          and "re-measured" in rows[0]["flag_detail"],
          "implausible speedup flagged and re-measured: %s" % (rows and rows[0]["flag_detail"]))
    rc, rows, _ = eval_json([nop], "--shape", "256x256x128")
    check(rows and "implausible_speed" not in rows[0]["flags"],
          "the default bound (1000x) does not flag it")
    rc, _, err = kernlab("eval", naive, *FAST, "--out", SEEDS)
    check(rc == 2 and "a folder, not a kernlab results file" in err,
          "--out FOLDER: exit 2 saying so: %s" % err)
    # --out in a folder that does not exist (runs/ in a fresh clone: the
    # README's `eval ... --out runs/mine.h5`): made, as run, search and
    # corpus make theirs; it was refused, exit 3. One that cannot be made
    # (a file stands in its path) is said before anything is evaluated.
    made = os.path.join(tempfile.mkdtemp(), "runs", "sub", "mine.h5")
    rc, _, err = kernlab("eval", naive, *FAST, "--out", made)
    check(rc == 0 and os.path.isfile(made),
          "--out in a missing folder: made: %d %s" % (rc, err[-300:]))
    rc, out, err = kernlab("eval", naive, *FAST, "--out", os.path.join(made, "x.h5"))
    check(rc == 2 and made + " is a file, not a folder" in err and not out,
          "--out under a file: exit 2 naming the file, before evaluating: %d %r %r"
          % (rc, out, err[-300:]))
    # a folder that cannot exist (/proc takes no new entries): exit 2 as well
    rc, out, err = kernlab("eval", naive, *FAST, "--out", "/proc/kl-nowhere/x.h5")
    check(rc == 2 and "cannot create the folder /proc/kl-nowhere" in err and not out,
          "--out in /proc: exit 2: %d %r" % (rc, err[-300:]))
    fifo = os.path.join(tempfile.mkdtemp(), "fifo.h5")
    os.mkfifo(fifo)
    for cmd in (("top", fifo), ("eval", naive, *FAST, "--out", fifo)):
        rc, _, err = kernlab(*cmd)
        check(rc == 2 and "not a regular file" in err,
              "%s on a FIFO: exit 2 at once, not a blocked open: %s" % (cmd[0], err))
    shutil.rmtree(os.path.dirname(fifo))
    out_task_checks(naive)
    rc, _, err = kernlab("eval", naive, "--max-speedup", "0.5")
    check(rc == 2, "--max-speedup below 1 is a usage error")
    # the table says cpu-emu and that its times are not GPU times
    rc, out, _ = kernlab("eval", naive, *FAST)
    check(rc == 0 and "cpu-emu" in out and "not GPU" in out, "table labels cpu-emu times")
    # Ctrl-C while a host compile runs (its own process group, out of the
    # terminal's reach): the lab stops at once and kills it; its build
    # folder goes at the next eval with that cache
    spin = os.path.join(SRC, "tests", "kernels", "hostile", "host_compile_spin.cu")
    cache = tempfile.mkdtemp()
    env = dict(os.environ, KERNLAB_CACHE=cache)

    def compilers(name=None):
        found = []
        for pid in os.listdir("/proc"):
            try:
                with open("/proc/%s/environ" % pid, "rb") as f:
                    mine = ("TMPDIR=" + cache).encode() in f.read()
                with open("/proc/%s/comm" % pid) as f:
                    comm = f.read().strip()
                if mine and (name is None or comm == name):
                    found.append(int(pid))
            except (OSError, ValueError):
                pass
        return found
    p = subprocess.Popen([KERNLAB, "eval", spin, "--compile-timeout", "120"], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    t0 = time.time()
    # (the compiler proper, not only its driver: the driver dies with the
    # lab by itself, its children did not; and the spinning one, alive for
    # seconds, not the baseline seed's quick compile)
    seen, started = {}, False
    while not started and time.time() - t0 < 60 and p.poll() is None:
        now = time.time()
        for pid in compilers("cc1plus"):
            seen.setdefault(pid, now)
            started = started or now - seen[pid] > 2
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    time.sleep(0.5)
    check(started and p.returncode == -signal.SIGINT and "interrupted" in err and
          not compilers(),
          "Ctrl-C during a host compile: stopped, compiler killed: started %s, rc %s, "
          "left %s, %r" % (started, p.returncode, compilers(), err[-200:]))
    rc, _, _ = kernlab("eval", naive, *FAST, env=env)
    check(rc == 0 and not [d for d in os.listdir(cache) if d.startswith("emu-build-")],
          "the killed compile's build folder is swept: %s" % os.listdir(cache))
    # a build folder whose pid is dead here but whose lock is held (a lab
    # in another PID namespace sharing the cache, compiling) is kept; once
    # the lock is free it goes
    with open("/proc/sys/kernel/pid_max") as f:
        dead = int(f.read()) - 1
    while dead > 1:
        try:
            os.kill(dead, 0)
            dead -= 1
        except ProcessLookupError:
            break
        except PermissionError:
            dead -= 1
    held = os.path.join(cache, "emu-build-%d-held" % dead)
    os.makedirs(held)
    lock = open(os.path.join(held, ".lock"), "w")
    fcntl.flock(lock, fcntl.LOCK_EX)
    rc, _, _ = kernlab("eval", naive, *FAST, env=env)
    check(rc == 0 and os.path.isdir(held),
          "a locked build folder of a pid dead here is kept: %s" % os.listdir(cache))
    lock.close()
    rc, _, _ = kernlab("eval", naive, *FAST, env=env)
    check(rc == 0 and not os.path.exists(held),
          "unlocked, it is swept: %s" % os.listdir(cache))
    shutil.rmtree(cache, ignore_errors=True)


{"seeds": group_seeds, "honest": group_honest, "broken": group_broken, "inputs": group_inputs,
 "isolation": group_isolation, "sandbox": group_sandbox, "cli": group_cli,
 "writers": group_writers}[GROUP]()
done()
