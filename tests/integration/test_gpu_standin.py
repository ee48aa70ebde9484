"""tests/integration/test_gpu_standin.py — the GPU backend's HOST path, end
to end, on a machine without a GPU.

`kernlab eval --backend gpu` runs with host-only stand-ins for the CUDA
driver, cuBLAS and NVML first on LD_LIBRARY_PATH (tests/gpu_standin/, built
as libcuda.so.1, libcublas.so.13, libnvidia-ml.so.1; their headers say what
they do). Everything kernlab does around the device is real: the probe, the
NVRTC compile worker, the run-gpu worker's initialisation and its seccomp
filter, the timing loop with events and the throttle filter's clock reads,
the launch checks on every timed launch, the canary and input checks, the
device float64 reference at a large shape, the cuBLAS baseline, and how a
CUDA error becomes a status while the lab goes on to the next kernel.

What it cannot say: anything about a real driver or device. No device code
runs; the stand-in's launch computes the right product whatever the
candidate's cubin says, so "correct" here is the stand-in's verdict, not the
seeds'. Times are host times of a CPU loop (only their presence is checked).
The real CUPTI, when installed, cannot attach to the stand-in driver, so the
timer must be "events"; the real cuBLAS, NVML and driver, and the syscalls
they make under the run-gpu filter, are not exercised (tests/gpu/check.sh on
a device does that).

Faults are injected through the stand-in's KL_STANDIN_FAULT* variables,
which the lab passes on to its run-gpu workers.

Usage: test_gpu_standin.py KERNLAB SOURCE_DIR STANDIN_DIR
(STANDIN_DIR "none": the toolkit's headers were missing, skipped: exit 77)
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kltest import check, done  # noqa: E402

KERNLAB, SRC, STANDIN = sys.argv[1:4]
if STANDIN == "none" or not os.path.exists(os.path.join(STANDIN, "libcuda.so.1")):
    print("test_gpu_standin: skipped: the GPU stand-ins were not built (no CUDA "
          "toolkit headers: cuda.h, cublas_api.h)")
    sys.exit(77)

DEVICE = "kernlab stand-in (no GPU)"  # standin_cuda.c's cuDeviceGetName
SHAPE = "64x64x64"  # small: the stand-in's launch is a CPU loop
SEEDS_DIR = os.path.join(SRC, "kernels", "seeds")
SEEDS = sorted(os.path.join(SEEDS_DIR, f) for f in os.listdir(SEEDS_DIR) if f.endswith(".cu"))
NAIVE = os.path.join(SEEDS_DIR, "01_naive.cu")
BLOCKTILE = os.path.join(SEEDS_DIR, "04_blocktile_1d.cu")

tmp = tempfile.TemporaryDirectory()
base_env = {k: v for k, v in os.environ.items() if not k.startswith("KL_STANDIN_")}
base_env["LD_LIBRARY_PATH"] = STANDIN + (":" + os.environ["LD_LIBRARY_PATH"]
                                         if os.environ.get("LD_LIBRARY_PATH") else "")
# A lock of its own: GPU runs of another kernlab on this machine (a real
# device's, or another build's test) need not wait for these, nor these
# for them.
base_env["KERNLAB_GPU_LOCK"] = os.path.join(tmp.name, "gpu.lock")


def evaluate(files, shapes=(SHAPE,), **fault):
    """kernlab eval --backend gpu --json on files; fault: KL_STANDIN_FAULT*
    variables (kind=..., launch=..., geometry=...). Returns (exit status,
    rows by file name, stderr)."""
    env = dict(base_env)
    for key, value in fault.items():
        env["KL_STANDIN_FAULT" + ("" if key == "kind" else "_" + key.upper())] = str(value)
    argv = [KERNLAB, "eval", "--backend", "gpu", "--json"]
    for s in shapes:
        argv += ["--shape", s]
    p = subprocess.run(argv + list(files), env=env, capture_output=True, text=True,
                       timeout=240)
    rows = {}
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            rows[os.path.basename(r["file"])] = r
    return p.returncode, rows, p.stderr


def geometry(row):
    g = row["launch"]
    return "%d,%d,%d,%d,%d" % (g["block_x"], g["block_y"], g["tile_rows"], g["tile_cols"],
                               g["dyn_smem_bytes"])


def seccomp_killed(rows):
    return [n for n, r in rows.items() if r["status"].startswith("killed:")]


# ---- 1. every seed, no fault: the whole host path succeeds --------------------
t0 = time.time()
rc, rows, err = evaluate(SEEDS)
check(rc == 0, "eval of the seeds exits 0, got %d: %s" % (rc, err.strip()[-600:]))
check("backend: gpu (%s)" % DEVICE in err,
      "the lab names the gpu backend and the stand-in device on stderr; got: %s"
      % err.strip()[-300:])
check(len(rows) == len(SEEDS), "one row per seed: %d of %d" % (len(rows), len(SEEDS)))
check(not seccomp_killed(rows),
      "no run-gpu worker killed by its filter (a syscall missing from sandbox.c's "
      "run_gpu_rules): %s" % {n: rows[n]["error"][:160] for n in seccomp_killed(rows)})
for name, r in sorted(rows.items()):
    what = "%s: " % name
    check(r["backend"] == "gpu" and r["time_kind"] == "gpu",
          what + "backend and time_kind gpu, got %s/%s" % (r["backend"], r["time_kind"]))
    check(r["status"] == "ok" and r["correct"] is True,
          what + "status ok and correct, got %s %s: %s" % (r["status"], r["correct"], r["error"]))
    # Every sample can only be kept if the SM clock was read while the
    # stand-in GPU had just finished (the NVML stand-in reads it idle once
    # the host copies C back): kernels/gpu_run.c's clock read placement.
    check(r["time_us"] is not None and r["time_us"] > 0 and r["samples"] > 0,
          what + "a time from kept samples, got time_us %s, %d samples: %s"
          % (r["time_us"], r["samples"], r["error"]))
    check(r["timed_launches"] >= r["samples"] > 0,
          what + "timed launches %d >= samples %d" % (r["timed_launches"], r["samples"]))
    # CUPTI cannot attach to the stand-in driver (when libcupti.so.13 is
    # installed it loads and cuptiActivityEnable fails; when it is not, it is
    # not found): either way the timer falls back to events.
    check(r["timer"] == "events", what + "timer 'events' (no CUPTI here), got %r" % r["timer"])
    check(r["device"] == DEVICE, what + "device %r, got %r" % (DEVICE, r["device"]))
    check(isinstance(r.get("timer_note"), str) and r["timer_note"],
          what + "timer_note says why CUPTI was not used, got %r" % r.get("timer_note"))
    check(r["baseline_us"] is not None and r["baseline_us"] > 0,
          what + "a cuBLAS baseline (the stand-in's SGEMM), got %s" % r["baseline_us"])
    check(r["sandbox"] in ("seccomp+rlimits", "seccomp+rlimits+namespaces"),
          what + "the run-gpu worker confined, got sandbox %r" % r["sandbox"])
    check(r["flags"] == [], what + "no flags, got %s: %s" % (r["flags"], r["flag_detail"]))
    check(r["launch"] is not None, what + "the launch geometry read from the module")
    check(len(r["shapes"]) >= 2 and all(s["pass"] for s in r["shapes"]),
          what + "every checked shape passes: %s" % r["shapes"])
print("seeds: %.1f s" % (time.time() - t0))
# the table's header promises CUPTI times before a worker tried CUPTI: the
# fallback is said once, under the rows, with its reason
check(re.search(r"note: %d candidates were timed by CUDA events, not CUPTI \(.+\)" % len(rows),
                err) is not None,
      "one note that the candidates were timed by events, with the reason: %s" % err[-600:])

naive = rows.get("01_naive.cu")
blocktile = rows.get("04_blocktile_1d.cu")
check(naive is not None and blocktile is not None and geometry(naive) != geometry(blocktile),
      "01_naive and 04_blocktile_1d have rows and different geometries (the fault "
      "cases below pick a kernel by its geometry)")
if naive is None or blocktile is None:
    done()
# The launches of one job, in kernels/gpu_run.c's order: the first shape,
# its rerun (inputs scaled by powers of two), each further shape once, the
# timing warm-up, the timed launches.
RERUN = 2
checked_launches = len(naive["shapes"]) + 1
first_timed = checked_launches + 2

# ---- 2. a wrong output on a checked launch: wrong ----------------------------
t0 = time.time()
rc, rows, err = evaluate([NAIVE], kind="wrong", launch=1)
r = rows.get("01_naive.cu", {})
check(rc == 0, "wrong output: eval exits 0 (the candidate was wrong, the run "
      "fine), got %d: %s" % (rc, err.strip()[-300:]))
check(r.get("status") == "wrong" and r.get("correct") is False,
      "C = A B + 1 on the first checked launch: status wrong, correct false; got %s %s"
      % (r.get("status"), r.get("correct")))
check(r.get("shapes") and r["shapes"][0]["pass"] is False and r["shapes"][0]["over_tol"] > 0,
      "the first shape fails with elements over tolerance: %s" % (r.get("shapes") or [None])[0])
check("wrong at %s" % SHAPE in r.get("error", ""),
      "the error names the shape: %r" % r.get("error"))

# ---- 3. a wrong rerun: the two runs of one input differ ---------------------
rc, rows, err = evaluate([NAIVE], kind="wrong", launch=RERUN)
r = rows.get("01_naive.cu", {})
check(r.get("flags") == ["nondeterministic"] and r.get("shapes")
      and all(s["pass"] for s in r["shapes"]),
      "C = A B + 1 on the rerun only: every shape passes, flag nondeterministic; got "
      "%s %s (%s)" % (r.get("status"), r.get("flags"), r.get("flag_detail")))

# ---- 4. a wrong output on one timed launch: timed_output_wrong ----------------
rc, rows, err = evaluate([NAIVE], kind="wrong", launch=first_timed + 1)
r = rows.get("01_naive.cu", {})
check(rc == 0, "wrong timed output: eval exits 0, got %d: %s" % (rc, err.strip()[-300:]))
check(r.get("shapes") and all(s["pass"] for s in r["shapes"]),
      "every checked shape still passes (only timed launch %d was wrong): %s"
      % (first_timed + 1, r.get("shapes")))
check("timed_output_wrong" in r.get("flags", []) and r.get("correct") is False
      and r.get("status") == "wrong",
      "one wrong timed launch: flag timed_output_wrong, correct false, status wrong; got "
      "%s %s %s (%s)" % (r.get("flags"), r.get("correct"), r.get("status"), r.get("error")))
print("wrong outputs: %.1f s" % (time.time() - t0))

# ---- 5. cuLaunchKernel fails: a cuda:* status, and the lab carries on --------
t0 = time.time()
rc, rows, err = evaluate([NAIVE, BLOCKTILE], kind="launch_error", geometry=geometry(naive))
bad, good = rows.get("01_naive.cu", {}), rows.get("04_blocktile_1d.cu", {})
check(rc == 0, "launch error: eval exits 0, got %d: %s" % (rc, err.strip()[-300:]))
check(bad.get("status") == "cuda:ILLEGAL_ADDRESS" and bad.get("correct") is False,
      "cuLaunchKernel returning 700: status cuda:ILLEGAL_ADDRESS, got %s: %s"
      % (bad.get("status"), bad.get("error")))
check("cuLaunchKernel" in bad.get("error", ""),
      "the error says which call failed: %r" % bad.get("error"))
check(good.get("status") == "ok" and good.get("correct") is True and good.get("time_us"),
      "the next kernel runs in a fresh worker: ok, correct, timed; got %s: %s"
      % (good.get("status"), good.get("error")))

# ---- 6. a kernel faults while timed: the error surfaces at the sync ----------
# As on a device: the launch is accepted, the fault shows at the next
# synchronisation and stays (a sticky error); here on a timed launch, so the
# timing loop's error path runs.
rc, rows, err = evaluate([NAIVE, BLOCKTILE], kind="illegal_address",
                         launch=first_timed + 1, geometry=geometry(naive))
bad, good = rows.get("01_naive.cu", {}), rows.get("04_blocktile_1d.cu", {})
check(rc == 0, "device fault: eval exits 0, got %d: %s" % (rc, err.strip()[-300:]))
check(bad.get("status") == "cuda:ILLEGAL_ADDRESS" and bad.get("time_us") is None,
      "a fault in a timed launch: status cuda:ILLEGAL_ADDRESS and no time, got %s %s: %s"
      % (bad.get("status"), bad.get("time_us"), bad.get("error")))
check("cuCtxSynchronize" in bad.get("error", ""),
      "the error names the synchronisation where the fault surfaced: %r" % bad.get("error"))
check(good.get("status") == "ok" and good.get("correct") is True,
      "the next kernel is unaffected: %s: %s" % (good.get("status"), good.get("error")))
print("faults: %.1f s" % (time.time() - t0))

# ---- 7. a shape above KL_GPU_HOST_REF_MAX_MNK: the device float64 reference --
# Checked in the worker against (stand-in) cuBLAS DGEMM on float64 copies,
# not on the lab's host; the timed shape stays small.
t0 = time.time()
big = "520x512x512"
rc, rows, err = evaluate([NAIVE], shapes=(SHAPE, big))
r = rows.get("01_naive.cu", {})
shape = [s for s in r.get("shapes", []) if "%dx%dx%d" % (s["M"], s["N"], s["K"]) == big]
check(rc == 0 and r.get("status") == "ok" and r.get("correct") is True,
      "with %s checked on the device reference: ok and correct, got %s: %s"
      % (big, r.get("status"), r.get("error")))
check(shape and shape[0]["pass"] and 0 < shape[0]["rel_err"] < 1e-5,
      "%s passes with a float rounding error against the float64 DGEMM: %s" % (big, shape))
rc, rows, err = evaluate([NAIVE], shapes=(SHAPE, big), kind="wrong", launch=RERUN + 1)
r = rows.get("01_naive.cu", {})
shape = [s for s in r.get("shapes", []) if "%dx%dx%d" % (s["M"], s["N"], s["K"]) == big]
check(r.get("status") == "wrong" and shape and not shape[0]["pass"],
      "C = A B + 1 at %s is caught by the device reference: %s %s"
      % (big, r.get("status"), shape))
print("device reference: %.1f s" % (time.time() - t0))
done()
