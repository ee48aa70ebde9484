"""tests/integration/kltest.py — the shared scaffolding of the CLI tests: a
check() that records a failure and carries on, and done() that prints the
"N passed, N failed" line ctest's log shows and exits with the verdict."""
import sys

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
