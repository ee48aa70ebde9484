#!/usr/bin/env python3
"""tests/integration/test_sandbox.py — the hostile suite (ctest label `sandbox`).

usage: test_sandbox.py KERNLAB SOURCE_DIR

Every kernel in tests/kernels/hostile/ names the status it must get on a line
`EXPECT-STATUS: a | b`. They are evaluated in one `kernlab eval` together
with an honest seed after them; then: every status as expected, nothing
written outside, no worker left running, no descriptor leaked by the lab,
exit code 0 from the lab (the include-leak kernel is an invalid input: it is
checked in a second call, where exit 2 is expected and nothing of the host
file may appear in any output), and the honest kernel still right. The
.incbin kernel needs Landlock (`kernlab sandbox --explain` says whether the
kernel has it) to fail its compile.
Standard library only; prints "N passed, N failed".
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

KERNLAB, SRC = sys.argv[1], sys.argv[2]
HOSTILE = os.path.join(SRC, "tests", "kernels", "hostile")
HONEST = os.path.join(SRC, "kernels", "seeds", "05_blocktile_2d.cu")
from kltest import check, done  # noqa: E402


def expected(path):
    with open(path) as f:
        m = re.search(r"EXPECT-STATUS:\s*(.+)", f.read())
    return [s.strip() for s in m.group(1).split("|")] if m else None


def workers(lab_pid):
    """Live workers started by the lab process lab_pid: their command line
    is `<exe> __worker MODE LAB_PID` (sandbox/supervisor.c). Other labs on
    the machine (a parallel test run) have other pids."""
    out = subprocess.run(["pgrep", "-a", "-f", "__worker"], capture_output=True, text=True)
    found = []
    for line in out.stdout.splitlines():
        words = line.split()
        if "__worker" in words:
            i = words.index("__worker")
            if len(words) > i + 2 and words[i + 2] == str(lab_pid):
                found.append(int(words[0]))
    return found


last_pid = [0]


# --timeout 20 (memory_bomb.cu: 120, in a run of its own): the bomb faults
# in about 1.75 GiB before its limit stops it, 5 to 6 s where a first touch
# costs 12 us a page (this VM), and several times that on a loaded machine:
# under a 10 s and then a 20 s deadline it was called a timeout instead of
# oom when the machine was busy.
def run(files, *extra, timeout="20"):
    env = dict(os.environ, KERNLAB_REPORT_FDS="1")
    p = subprocess.Popen([KERNLAB, "eval", *files, "--json", "--shape", "64x64x64",
                          "--timeout", timeout, "--compile-timeout", "8", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    last_pid[0] = p.pid
    out, err = p.communicate(timeout=900)
    rows = [json.loads(l) for l in out.splitlines() if l.strip()]
    fds = re.search(r"open descriptors at exit: (\d+)", err)
    return p.returncode, rows, err, int(fds.group(1)) if fds else -1


for leftover in [f for f in os.listdir("/tmp") if f.startswith("kernlab_hostile_")]:
    os.unlink(os.path.join("/tmp", leftover))

# A baseline for descriptors: the honest kernel alone.
rc, rows, err, fds_honest = run([HONEST])
check(rc == 0 and rows and rows[0]["correct"], "honest kernel alone: %s" % err[-300:])

files = sorted(os.path.join(HOSTILE, f) for f in os.listdir(HOSTILE) if f.endswith(".cu"))
leak = [f for f in files if os.path.basename(f) == "include_host_file.cu"]
bomb = [f for f in files if os.path.basename(f) == "memory_bomb.cu"]
files = [f for f in files if f not in leak and f not in bomb]
check(len(files) >= 17, "at least 17 hostile kernels besides memory_bomb.cu, found %d"
      % len(files))
rc, rows, err, _ = run(bomb + [HONEST], timeout="120")
check(rc == 0 and len(rows) == 2 and rows[0]["status"] == "oom" and
      rows[0]["correct"] is False and rows[1]["correct"],
      "memory_bomb.cu: oom, and the honest kernel after it right: %s %s"
      % ([(r["status"], r["error"][:200]) for r in rows], err[-300:]))
rc, rows, err, fds = run(files + [HONEST])
check(rc == 0, "the lab exits 0 after the hostile suite, got %d: %s" % (rc, err[-500:]))
check(len(rows) == len(files) + 1, "one row per kernel (%d)" % len(rows))
# Without Landlock the host compiler reads any file: .incbin then succeeds.
explain = subprocess.run([KERNLAB, "sandbox", "--explain"], capture_output=True, text=True).stdout
landlock = "files: Landlock" in explain
if not landlock:
    print("test_sandbox.py: no Landlock in this kernel: incbin_host_file.cu not checked")
for f, r in zip(files, rows):
    name = os.path.basename(f)
    want = expected(f)
    if name == "incbin_host_file.cu" and not landlock:
        continue
    check(want is not None, "%s: has an EXPECT-STATUS line" % name)
    check(want and r["status"] in want,
          "%s: status %s, expected %s (%s)" % (name, r["status"], want, r["error"]))
    check(r["correct"] is False, "%s: not judged correct" % name)
for f, r in zip(files, rows):  # a segfault's message names its likely causes
    if os.path.basename(f) == "segv.cu":
        check("an access out of bounds" in r["error"], "segv.cu: %s" % r["error"])
    # an oom NVRTC caught says how far the address space got, of what limit
    # (the compile worker's is above its own peak: sandbox.c)
    if r["status"] == "oom" and "catastrophic error" in r["error"]:
        check(re.match(r"the compile worker's address space reached \d+ MiB of "
                       r"its \d+ MiB limit \| ", r["error"]),
              "%s: an oom names the address space and limit: %s"
              % (os.path.basename(f), r["error"]))
if len(rows) == len(files) + 1:
    check(rows[-1]["correct"] and rows[-1]["status"] == "ok",
          "the honest kernel after the suite is still right: %s" % rows[-1]["error"])
check(fds == fds_honest and fds >= 0,
      "no descriptor leaked: %d at exit after the suite, %d after one honest kernel" % (fds, fds_honest))
time.sleep(0.3)
left = workers(last_pid[0])
check(not left, "no worker outlives the lab: %s" % sorted(left))
check(not [f for f in os.listdir("/tmp") if f.startswith("kernlab_hostile_")],
      "nothing was written outside")

# The include leak: rejected as input; the host file's text appears nowhere.
rc, rows, err, _ = run(leak)
check(rc == 2, "include of a host file: exit 2, got %d" % rc)
check(rows and rows[0]["status"] == "invalid_input", "include of a host file: invalid_input")
with open("/etc/passwd") as f:
    first = f.readline().strip()
allout = json.dumps(rows) + err
check(first not in allout, "no text of the host file in any output")

# A rebuild during a run: workers come from the image that runs
# (/proc/self/exe), not from whatever the file holds by then, so the rest of
# the run evaluates as it began (a different build's frames would be refused).
with tempfile.TemporaryDirectory() as d:
    kl = os.path.join(d, "kernlab")
    shutil.copy(KERNLAB, kl)
    seeds = sorted(os.path.join(SRC, "kernels", "seeds", f)
                   for f in os.listdir(os.path.join(SRC, "kernels", "seeds"))
                   if f.endswith(".cu"))
    env = dict(os.environ, KERNLAB_CACHE=os.path.join(d, "cache"))
    p = subprocess.Popen([kl, "eval", *seeds, "--json", "--jobs", "1",
                          "--shape", "64x64x64"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    first_row = p.stdout.readline()  # one kernel done: the run is under way
    stub = os.path.join(d, "stub")
    with open(stub, "w") as f:
        f.write("#!/bin/sh\nexit 7\n")
    os.chmod(stub, 0o755)
    os.replace(stub, kl)  # what a rebuild does to the file
    rest, err = p.communicate(timeout=600)
    rows = [json.loads(l) for l in [first_row] + rest.splitlines() if l.strip()]
    check(p.returncode == 0 and len(rows) == len(seeds) and
          all(r["status"] == "ok" for r in rows),
          "the executable replaced mid-run: every seed still ok (exit %d, %s)"
          % (p.returncode, [r["status"] for r in rows]))

# The lab's standard streams are not the candidate's: a kernel that reads
# fd 0 and writes fd 2 on the host gets nothing from the user's stdin and
# writes nowhere the user sees, whatever stderr is (a regular file, where
# RLIMIT_FSIZE 0 made the write a SIGXFSZ crash).
# (From the kernel, at launch: the build refuses code run at load.)
with tempfile.TemporaryDirectory() as d:
    k = os.path.join(d, "std_streams.cu")
    with open(k, "w") as f:
        # raw x86-64 system calls: the emulator refuses libc imports
        f.write('#ifndef __CUDACC_RTC__\n'
                'static long kl_sys3(long n, long a, long b, long c) {\n'
                '  long r; __asm__ volatile("syscall" : "=a"(r) : "a"(n), '
                '"D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");\n'
                '  return r; }\n'
                'static void kl_io() { char b[64];\n'
                '  long n = kl_sys3(0, 0, (long)b, 64); /* read */\n'
                '  if (n > 0) kl_sys3(1, 2, (long)b, n); /* write */\n'
                '  kl_sys3(1, 2, (long)"KL_STDERR_LEAK\\n", 15); }\n'
                '#define KL_IO() kl_io()\n'
                '#else\n'
                '#define KL_IO()\n'
                '#endif\n'
                'KL_LAUNCH(16, 16, 16, 16, 0);\n'
                'extern "C" __global__ void matmul(const float* A, '
                'const float* B, float* C, int M, int N, int K) {\n'
                '  int r = blockIdx.y * 16 + threadIdx.y;\n'
                '  int c = blockIdx.x * 16 + threadIdx.x;\n'
                '  if (r == 0 && c == 0) KL_IO();\n'
                '  if (r >= M || c >= N) return;\n'
                '  float acc = 0.0f;\n'
                '  for (int k = 0; k < K; ++k) acc += A[r * K + k] * '
                'B[k * N + c];\n'
                '  C[r * N + c] = acc;\n'
                '}\n')
    err_path = os.path.join(d, "err.txt")
    with open(err_path, "w") as err_f:
        p = subprocess.run([KERNLAB, "eval", k, "--json", "--shape", "64x64x64",
                            "--timeout", "10"], input="USER_STDIN_SECRET_42\n",
                           stdout=subprocess.PIPE, stderr=err_f, text=True, timeout=600)
    err_text = open(err_path).read()
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.strip()]
    check(p.returncode == 0 and rows and rows[0]["status"] == "ok" and
          "USER_STDIN_SECRET_42" not in p.stdout + err_text and
          "KL_STDERR_LEAK" not in p.stdout + err_text,
          "a candidate's stdin and stderr are not the lab's: %d %s %r" %
          (p.returncode, rows and rows[0]["status"], err_text[-300:]))

done()
