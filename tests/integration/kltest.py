"""tests/integration/kltest.py — the shared scaffolding of the CLI tests: a
check() that records a failure and carries on, and done() that prints the
"N passed, N failed" line ctest's log shows and exits with the verdict,
and interrupted(), a command stopped with Ctrl-C as a terminal sends it."""
import os
import signal
import subprocess
import sys
import time

passed = failed = 0


def check(cond, what):
    """Counts cond; on failure prints what (a sentence saying what was
    expected and what came) and carries on."""
    global passed, failed
    if cond:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what, file=sys.stderr)


def done():
    print("%d passed, %d failed" % (passed, failed))
    sys.exit(1 if failed else 0)


def interrupted(argv, after, stream="stdout", signals=1, delay=0, env=None):
    """Runs argv in a process group of its own, waits for a line of `stream`
    starting with `after`, then sends SIGINT to the group as a terminal's
    Ctrl-C does (after `delay` seconds); with signals=2 a second one once
    the first is acknowledged on stderr (two at once would merge). Returns
    (exit status, stdout, stderr), the lines read before included."""
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            errors="replace", start_new_session=True, env=env)
    seen = {"stdout": [], "stderr": []}
    for line in getattr(proc, stream):
        seen[stream].append(line)
        if line.startswith(after):
            break
    time.sleep(delay)
    os.killpg(proc.pid, signal.SIGINT)
    if signals == 2:
        for line in proc.stderr:
            seen["stderr"].append(line)
            if "interrupted" in line:
                break
        os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=600)
    return (proc.returncode, "".join(seen["stdout"]) + out,
            "".join(seen["stderr"]) + err)
