#!/bin/bash
# tests/gpu/check.sh — the one prepared script for a session lent a device
# (issue 4; /work/.library/device/README.md). One call, about 7 minutes:
#
#   run(command="bash tests/gpu/check.sh", carry=["tests/gpu/bundle.tar.gz"],
#       timeout_s=450)
#
# (a rerun of some steps only, on the still-warm machine:
#   CHECK_BUDGET=150 CHECK_STEPS="7" bash tests/gpu/check.sh, timeout_s=180)
# right after `bash tests/gpu/bundle.sh` on the CPU machine (a stale bundle
# tests old code: the summary names the commit it was built from; the device image lacks
# our Debian libraries: Lua, HDF5, seccomp, OpenBLAS; the bundle carries
# them next to the binary). Without a bundle it uses build/kernlab, or
# builds one if the machine can.
#
# Steps, in this order (each under its own `timeout -k`; a failing step is
# reported and the rest still run; a step that would start with under 15 s
# of the budget left is skipped and says so):
#   1. the device, read-only (nvidia-smi query; never changes clocks, power,
#      persistence, MIG or compute mode, never resets)
#   2. test_gpu_probe (must find the device) and `kernlab eval --backend gpu`
#      on every seed at the default shape: correctness incl. ragged shapes;
#      if the run-gpu filter killed a worker, this eval once more and every
#      later GPU step with the worker in record mode (unconfined), said so
#   2b. (only when named in CHECK_STEPS) tests/gpu/test_gpu_eval.py, what
#      ctest -L gpu runs: mostly steps 2 and 3 again
#   3. a faulting kernel: expects a cuda:* status and a lab that carries on;
#      then tests/gpu/lazy_after_checks.cu (honest while checked, C = 0 once
#      timed): expects timed_output_wrong and correct false
#   7. (run before 4-6: the newest code) the policy's CUDA runtime, below
#   8. (only when named in CHECK_STEPS) tests/kernels/honest and tests/cheats
#      on the device: false positives and misses of the anti-cheat checks
#   4. every seed at 4096x4096x4096 against the cuBLAS baseline: the table
#      (kernel, time_us, TFLOP/s, % of cuBLAS, CV, flags); then
#      bench_verify, the host's work per timed launch (fresh inputs and the
#      launch checks) on all cores and on one
#   5. the run-gpu worker in seccomp record mode: the syscalls it made after
#      CUDA init, and those the run-gpu profile does not allow; then one
#      seed with the worker in user + network namespaces (opt-in so far)
#   6. a short GPU campaign: a tiny policy primed on the spot, two GRPO steps
#      with --backend gpu (the loop on the device; its kernels are garbage)
#   7. the policy's CUDA runtime (policy/cuda, issue 10): test_policy_cuda
#      --device (every kernel against its CPU twin, cuBLAS and tiled GEMMs,
#      ten training steps), test_policy_cuda_gen --device (sampler, KV
#      cache, generation against the CPU's), test_policy_cuda_arena
#      --device (the memory arena and the stream: no backend allocation in
#      a steady training loop), test_policy_matmul --device (a
#      kernel from a results file behind the policy's GEMMs, compiled by
#      NVRTC, against cuBLAS; the files it must refuse), then prime + one
#      campaign step with --policy-device gpu, a bf16 prime
#      (--policy-dtype bf16), `generate` on the device
#      against the CPU's tokens, a prime with --policy-matmul
#      (a seed's results file from `eval --backend gpu --out`), and
#      bench_policy_cuda (training and sampling tokens/s: the device vs the
#      CPU path, vs a candidate kernel behind the GEMMs, vs PyTorch on the
#      device); the policy-matmul part of this step takes about a minute
# $OUT gets three files, since at most 8 come back: check.log, summary.md
# and logs.tgz (every step's logs and JSON, re-packed after each step, so a
# run cut short still returns them). summary.md is printed last. Append it
# to tests/gpu/LOG.md (format there) and commit.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
OUT=${OUT:-$root/runs/gpu-check}
mkdir -p "$OUT"
L=/tmp/gpu-check-logs # the step logs; $OUT/logs.tgz carries them back
rm -rf "$L" && mkdir -p "$L"
exec > >(tee -a "$OUT/check.log") 2>&1
tee_pid=$!
t_start=$(date +%s)
elapsed() { echo $(($(date +%s) - t_start)); }
# One budget for the whole script (run's timeout_s is 450: with the
# machine's start-up, a rerun must still fit in the session's 15 device
# minutes): each command's timeout is cut to what is left, at least 1 s,
# so a hung step costs its share and the summary of the steps before it
# still comes back. `timeout $(t N)` expands to `timeout -k 5 N`: a
# process stuck in the driver that ignores SIGTERM is killed 5 s later.
BUDGET=${CHECK_BUDGET:-420}
# STEP_END (seconds since the start; unset: none) caps the step running
# now too, so that one slow step leaves the later ones their share.
STEP_END=
t() {
  local left=$((BUDGET - $(elapsed)))
  if [ -n "$STEP_END" ] && [ $((STEP_END - $(elapsed))) -lt "$left" ]; then
    left=$((STEP_END - $(elapsed)))
  fi
  [ "$left" -lt 1 ] && left=1
  echo "-k 5 $(($1 < left ? $1 : left))"
}
pack() { tar -czf "$OUT/logs.tgz" -C "$L" . 2>/dev/null; }
note() {
  pack
  echo "== [$(elapsed)s] $*"
}
summary="$OUT/summary.md"
: >"$summary"
sum() { echo "$*" >>"$summary"; }
# CHECK_STEPS="2 7" runs only those steps (say, a rerun of what failed,
# within the session's device minutes; step 1, the device query, always
# runs). Unset: every step. The step bodies below are not indented inside
# their `if want N` because of their here-documents.
# Over budget (under 15 s left), a step is skipped and the summary says so.
want() {
  local steps=${CHECK_STEPS:-"1 2 3 4 5 6 7"}
  [[ " $steps " == *" $1 "* ]] || return 1
  if [ $((BUDGET - $(elapsed))) -lt 15 ]; then
    sum "- step $1: skipped: the budget (${BUDGET} s) is spent"
    return 1
  fi
}

# ---- the binary ----
KLLIB=""
if [ -f tests/gpu/bundle.tar.gz ]; then
  b=/tmp/kernlab-bundle
  rm -rf "$b" && mkdir -p "$b" && tar -xzf tests/gpu/bundle.tar.gz -C "$b" ||
    { echo "check.sh: tests/gpu/bundle.tar.gz does not unpack"; exit 3; }
  KL="$b/bin/kernlab"
  PROBE="$b/bin/test_gpu_probe"
  KLLIB="$b/lib"
  built="bundle built $(cat "$b/BUILT" 2>/dev/null) from $(cat "$b/COMMIT" 2>/dev/null)"
elif [ -x build/kernlab ]; then
  KL="$root/build/kernlab"
  PROBE=$(find build -name test_gpu_probe -type f | head -n1)
  built="build/kernlab from the working tree"
else
  note "no bundle and no build: trying to build here"
  if timeout $(t 240) cmake -S . -B build >/dev/null && timeout $(t 240) cmake --build build -j16 >/dev/null; then
    KL="$root/build/kernlab"
    PROBE=$(find build -name test_gpu_probe -type f | head -n1)
    built="built on the device"
  else
    echo "check.sh: no tests/gpu/bundle.tar.gz and no build possible here;"
    echo "run 'sh tests/gpu/bundle.sh' on the CPU machine and carry the tarball"
    exit 3
  fi
fi

# CUDA's own libraries from the device image (NVRTC, cuBLAS; CUPTI if the
# bundle has none): the toolkit, then the python nvidia-* wheels.
cudalibs=""
for d in /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64; do
  [ -d "$d" ] && cudalibs="$cudalibs:$d"
done
for d in $(python3 - 2>/dev/null <<'PY'
import importlib
for m in ("nvidia.cublas", "nvidia.cuda_nvrtc", "nvidia.cuda_cupti", "nvidia.cu13"):
    try:
        p = importlib.import_module(m)
        for base in list(getattr(p, "__path__", [])):
            print(base + "/lib")
    except Exception:
        pass
PY
); do
  [ -d "$d" ] && cudalibs="$cudalibs:$d"
done
kl() {
  local path="${KLLIB}${cudalibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  LD_LIBRARY_PATH="${path#:}" \
    KERNLAB_CACHE=/tmp/kernlab-cache "$@"
}

# the commit the binaries come from: the bundle's (bundle.sh records it,
# with -dirty for uncommitted changes), else the tree's
commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
[ -f "${b:-/nonexistent}/COMMIT" ] && commit=$(cat "$b/COMMIT")
note "kernlab: $built; tree at $commit"

# ---- 1. the device (read-only queries) ----
device="unknown"
if command -v nvidia-smi >/dev/null; then
  device=$(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -n1)
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu,mig.mode.current --format=csv 2>&1 | tee "$L/device.csv"
fi
note "device: $device"
sum "## $(date -u +%Y-%m-%d) · commit $commit · $device"
sum ""
sum "kernlab: $built"
sum ""

seeds=(kernels/seeds/*.cu)

# ---- 2. probe and correctness at the default shape ----
if want 2; then
note "probe"
# test_gpu_probe passes without a device too (it is a CI test): here the
# device must answer.
if [ -n "${PROBE:-}" ] && kl timeout $(t 60) "$PROBE" >"$L/probe.log" 2>&1 &&
   grep -q "a device answers here" "$L/probe.log"; then
  sum "- probe: ok: $(grep -o 'answers here ([^)]*)' "$L/probe.log")"
else
  sum "- probe: FAILED: $(tr '\n' ' ' <"$L/probe.log" | head -c 300)"
fi
note "correctness: ${#seeds[@]} seeds, --backend gpu, default shapes"
kl timeout $(t 150) "$KL" eval --backend gpu --json --jobs 1 "${seeds[@]}" \
  >"$L/eval_default.jsonl" 2>"$L/eval_default.err"
rc=$?
cat "$L/eval_default.err"
# The run-gpu allowlist was measured on one H200 (LOG.md, 2026-12-04); on
# another driver it may lack a call. A worker killed for a call it lacks would take every
# GPU result of this run with it, so from here on the worker runs in record
# mode (unconfined, its calls counted: step 5's), and this step once more.
trapped=$(grep -o '"status":"killed:seccomp:[A-Za-z0-9_-]*' "$L/eval_default.jsonl" |
  sed 's/.*seccomp://' | sort -u | tr '\n' ' ')
if [ -n "$trapped" ]; then
  sum "- WARNING: the run-gpu filter killed workers (${trapped% }): the GPU steps below run them UNCONFINED (KERNLAB_GPU_SECCOMP=record); first try: eval_default.confined.jsonl"
  export KERNLAB_GPU_SECCOMP=record
  mv "$L/eval_default.jsonl" "$L/eval_default.confined.jsonl"
  note "correctness again, the run-gpu worker in record mode"
  kl timeout $(t 150) "$KL" eval --backend gpu --json --jobs 1 "${seeds[@]}" \
    >"$L/eval_default.jsonl" 2>"$L/eval_default.err"
  rc=$?
fi
python3 - "$L/eval_default.jsonl" "$rc" "${#seeds[@]}" >>"$summary" <<'PY'
import json, sys
rows = []
for l in open(sys.argv[1]):
    try:
        rows.append(json.loads(l))
    except ValueError:  # a line cut short by a timeout
        pass
bad = [r for r in rows if not r.get("correct") or r.get("status") != "ok"]
n = int(sys.argv[3])
print(f"- correctness (exit {sys.argv[2]}): {len(rows) - len(bad)}/{n} seeds ok"
      + ("" if len(rows) == n else f" ({n - len(rows)} with no result)")
      + "".join(f"; {r.get('file','?').split('/')[-1]}: {r.get('status')} {r.get('error','')[:120]}" for r in bad))
for r in rows:
    if r.get("flags"):
        print(f"  - {r.get('file','?').split('/')[-1]} flags: {', '.join(r['flags'])}")
PY

# NVRTC's own address space here, unconfined (the compile worker's limit is
# 4 GiB above its peak after a warm-up: an oom above names both numbers)
# (the worker sets CUDA_CACHE_DISABLE=1; here with and without)
for c in "" 1; do
  CUDA_CACHE_DISABLE=$c kl timeout $(t 30) python3 tests/gpu/nvrtc_vm.py >"$L/nvrtc_vm$c.log" 2>&1
  sum "- NVRTC address space (tests/gpu/nvrtc_vm.py): $(grep -E 'compile 3|largest|Error' "$L/nvrtc_vm$c.log" | sed 's/^nvrtc_vm: //' | tr '\n' ' ' | head -c 600)"
done

fi # step 2

# ---- 2b. the gpu-labelled test (what `ctest -L gpu` runs on a build) ----
if want 2b; then
note "ctest -L gpu equivalent: tests/gpu/test_gpu_eval.py"
if kl timeout $(t 300) python3 tests/gpu/test_gpu_eval.py "$KL" "$root" >"$L/test_gpu_eval.log" 2>&1; then
  sum "- gpu test (test_gpu_eval.py): $(tail -n1 "$L/test_gpu_eval.log")"
else
  sum "- gpu test (test_gpu_eval.py): FAILED: $(tail -n3 "$L/test_gpu_eval.log" | tr '\n' ' ')"
fi

fi # step 2b

# ---- 3. a faulting kernel ----
if want 3; then
# one kernel through `eval --backend gpu --json` into $L/$2; rc its exit
eval_one() {
  kl timeout $(t 90) "$KL" eval --backend gpu --json "$1" >"$L/$2" 2>&1
  rc=$?
}
note "fault: tests/gpu/fault_null_write.cu"
eval_one tests/gpu/fault_null_write.cu eval_fault.jsonl
fault=$(python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
print(r[0]["status"] if r else "no JSON")' "$L/eval_fault.jsonl" 2>/dev/null)
case "$fault" in
  cuda:*) sum "- fault kernel: status $fault (exit $rc): ok" ;;
  *) sum "- fault kernel: status '${fault:-none}' (exit $rc): EXPECTED cuda:*" ;;
esac
# a kernel honest through the checks and the warm-up, lazy (C = 0) after:
# the launch checks of every timed launch must say so
note "lazy after the checks: tests/gpu/lazy_after_checks.cu"
eval_one tests/gpu/lazy_after_checks.cu eval_lazy.jsonl
lazy=$(python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
if not r: print("no JSON"); sys.exit()
r=r[0]; f=r.get("flags") or []
ok=("timed_output_wrong" in f and not r.get("correct"))
print("%s: status %s, correct %s, flags %s; %s" % ("ok" if ok else "EXPECTED timed_output_wrong and correct false", r.get("status"), r.get("correct"), ",".join(f), r.get("flag_detail","")[:160]))' "$L/eval_lazy.jsonl" 2>/dev/null)
sum "- lazy after the checks (exit $rc): ${lazy:-no result}"

fi # step 3

# A tiny policy primed on the CPU (steps 6 and 7 use it): $cdir/p.ckpt, its
# corpus, and gpu.lua, a two-step campaign on --backend gpu.
cdir=/tmp/kernlab-campaign
tiny_policy() {
  rm -rf "$cdir" && mkdir -p "$cdir/corpus"
  cp kernels/seeds/*.cu tests/kernels/honest/*.cu "$cdir/corpus/" 2>/dev/null
  cat >"$cdir/gpu.lua" <<LUA
return { name = "gpu-check", backend = "gpu", checkpoint = "$cdir/p.ckpt",
  task = { M = 512, N = 512, K = 512 }, group_size = 2, steps = 2,
  sampling = { max_tokens = 256, min_p = 0.1 }, out = "$cdir/gpu.h5" }
LUA
  kl timeout $(t 60) "$KL" prime --corpus "$cdir/corpus" --out "$cdir/p.ckpt" \
    --size tiny --steps 30 --lr 3e-3
}

# ---- 7. the policy's CUDA runtime against the CPU model ----
if want 7; then
# at most STEP7_CAP seconds (200; a rerun of step 7 alone has its budget),
# so that steps 4 to 6 keep time after it on a full run
STEP_END=$(($(elapsed) + ${STEP7_CAP:-200}))
if [ ! -f "$cdir/p.ckpt" ]; then
  note "policy: the tiny policy (none made yet)"
  tiny_policy >"$L/tiny_policy.log" 2>&1 ||
    sum "- tiny policy for step 7: FAILED: $(tail -n 3 "$L/tiny_policy.log" | tr '\n' ' ')"
fi
# test_policy_cuda: every kernel against its CPU twin, ten training steps;
# test_policy_cuda_gen: the device sampler, the KV cache and pcuda_generate
# against pl_generate, and the lab's --policy-device facade; then a tiny
# prime and one campaign step with --policy-device gpu (the policy on the
# device, end to end).
for t in test_policy_cuda test_policy_cuda_gen test_policy_cuda_bf16 test_policy_cuda_arena test_policy_matmul; do
  note "policy: $t --device"
  PCUDA=$(dirname "$KL")/$t
  [ -x "$PCUDA" ] || PCUDA=$(find build -name "$t" -type f 2>/dev/null | head -n1)
  if [ -n "$PCUDA" ] && [ -x "$PCUDA" ]; then
    KL_SOURCE_DIR="$root" kl timeout $(t 120) "$PCUDA" --device >"$L/$t.log" 2>&1
    prc=$?
    sum "- policy CUDA runtime ($t --device): exit $prc; $(grep -E 'passed|failed|skip|SKIP|worst' "$L/$t.log" | tail -n 2 | tr '\n' ' ')"
    # a failure: once more without the memory arena (a buffer per
    # cuMemAlloc), to tell an arena fault from a kernel's
    # (not after a timeout: a hang would cost its time twice)
    if [ "$prc" -ne 0 ] && [ "$prc" -ne 77 ] && [ "$prc" -ne 124 ] &&
       [ "$prc" -ne 137 ] && [ "$t" != test_policy_cuda_arena ]; then
      PCUDA_ARENA=off KL_SOURCE_DIR="$root" kl timeout $(t 120) "$PCUDA" --device >"$L/$t.arena_off.log" 2>&1
      sum "  - again with PCUDA_ARENA=off: exit $?; $(grep -E 'passed|failed' "$L/$t.arena_off.log" | tail -n 1)"
    fi
  else
    sum "- policy CUDA runtime: no $t binary in the bundle"
  fi
done
note "policy: prime and a campaign step with --policy-device gpu"
if kl timeout $(t 90) "$KL" prime --corpus "$cdir/corpus" --out "$cdir/pg.ckpt" \
     --size tiny --steps 30 --lr 3e-3 --policy-device gpu >"$L/policy_device.log" 2>&1 &&
   sed -e "s|$cdir/p.ckpt|$cdir/pg.ckpt|; s|steps = 2|steps = 1|; s|$cdir/gpu.h5|$cdir/pgpu.h5|" \
     "$cdir/gpu.lua" >"$cdir/pgpu.lua" &&
   kl timeout $(t 180) "$KL" run "$cdir/pgpu.lua" --policy-device gpu >>"$L/policy_device.log" 2>&1; then
  sum "- --policy-device gpu: prime $(grep -o 'loss [0-9.]* -> [0-9.]*' "$L/policy_device.log" | head -n1), $(grep -m1 'policy on' "$L/policy_device.log"); campaign: $(grep -m1 '^step [0-9]*/[0-9]*  reward' "$L/policy_device.log" | grep -o '[0-9]* tok/s'); $(grep 'policy device memory' "$L/policy_device.log" | tail -n1)"
else
  sum "- --policy-device gpu: FAILED: $(tail -n 3 "$L/policy_device.log" | tr '\n' ' ')"
fi

note "policy: prime with --policy-dtype bf16 (bf16 GEMMs, fp32 master)"
if kl timeout $(t 60) "$KL" prime --corpus "$cdir/corpus" --out "$cdir/pb.ckpt" \
     --size tiny --steps 30 --lr 3e-3 --policy-device gpu --policy-dtype bf16 \
     >"$L/policy_bf16.log" 2>&1; then
  sum "- --policy-dtype bf16: prime $(grep -o 'loss [0-9.]* -> [0-9.]*' "$L/policy_bf16.log" | head -n1) (fp32 above: $(grep -o 'loss [0-9.]* -> [0-9.]*' "$L/policy_device.log" | head -n1))"
else
  sum "- --policy-dtype bf16: FAILED: $(tail -n 3 "$L/policy_bf16.log" | tr '\n' ' ')"
fi

note "policy: generate with a fixed seed, --policy-device cpu vs gpu"
gen() {
  kl timeout $(t 60) "$KL" generate --ckpt "$cdir/p.ckpt" --tok "$cdir/p.ckpt.tok" \
    --prompt "// task" -n 4 --max-tokens 64 --seed 11 --policy-device "$1"
}
if gen cpu >"$L/gen_cpu.txt" 2>"$L/gen.err" && gen gpu >"$L/gen_gpu.txt" 2>>"$L/gen.err"; then
  if cmp -s "$L/gen_cpu.txt" "$L/gen_gpu.txt"; then
    sum "- generate --policy-device gpu: the CPU's tokens (4 x 64, seed 11): ok"
  else
    sum "- generate --policy-device gpu: DIFFERS from the CPU's tokens (see gen_cpu.txt, gen_gpu.txt)"
  fi
else
  sum "- generate --policy-device gpu: FAILED: $(tail -n 2 "$L/gen.err" | tr '\n' ' ')"
fi
if kl timeout $(t 60) "$KL" generate --ckpt "$cdir/p.ckpt" --tok "$cdir/p.ckpt.tok" \
     --prompt "// task" -n 4 --max-tokens 64 --seed 11 --policy-device gpu \
     --policy-dtype bf16 >"$L/gen_bf16.txt" 2>>"$L/gen.err"; then
  sum "- generate --policy-dtype bf16: $(grep -c '^== completion' "$L/gen_bf16.txt") of 4 completions (gen_bf16.txt; bf16 tokens may differ from fp32's)"
else
  sum "- generate --policy-dtype bf16: FAILED: $(tail -n 2 "$L/gen.err" | tr '\n' ' ')"
fi

note "policy: --policy-matmul (prime through a seed's kernel) and bench_policy_cuda"
if kl timeout $(t 60) "$KL" eval --backend gpu --jobs 1 kernels/seeds/07_warptile.cu \
     --out "$cdir/mm.h5" >"$L/policy_matmul.log" 2>&1 &&
   kl timeout $(t 60) "$KL" prime --corpus "$cdir/corpus" --out "$cdir/pm.ckpt" \
     --size tiny --steps 10 --lr 3e-3 --policy-device gpu \
     --policy-matmul "$cdir/mm.h5" >>"$L/policy_matmul.log" 2>&1; then
  sum "- --policy-matmul (gpu): prime $(grep -o 'loss [0-9.]* -> [0-9.]*' "$L/policy_matmul.log" | head -n1); $(grep -m1 -o 'policy GEMMs through kernel [^;]*' "$L/policy_matmul.log")"
else
  sum "- --policy-matmul (gpu): FAILED: $(tail -n 3 "$L/policy_matmul.log" | tr '\n' ' ')"
fi
BENCH=$(dirname "$KL")/bench_policy_cuda
[ -x "$BENCH" ] || BENCH=$(find build -name bench_policy_cuda -type f 2>/dev/null | head -n1)
if [ -n "$BENCH" ] && [ -x "$BENCH" ]; then
  kl timeout $(t 120) "$BENCH" --python "env -u LD_LIBRARY_PATH python3" "$root" >"$L/bench_policy_cuda.log" 2>&1
  brc=$?
  sum ""
  sum "### bench_policy_cuda (exit $brc)"
  sum ""
  grep -E '^(model|pcuda|cpu|torch|kernel|first|bench_policy_cuda)' "$L/bench_policy_cuda.log" | sed 's/^/    /' >>"$summary"
  sum ""
  grep ' vs ' "$L/bench_policy_cuda.log" | sed 's/^/- /' >>"$summary"
else
  sum "- bench_policy_cuda: no binary in the bundle"
fi
STEP_END=
fi # step 7

# ---- 4. the seeds at 4096^3 against cuBLAS ----
if want 4; then
note "timing: ${#seeds[@]} seeds at 4096x4096x4096"
kl timeout $(t 300) "$KL" eval --backend gpu --json --jobs 1 \
  --shape 4096x4096x4096 "${seeds[@]}" \
  >"$L/eval_4096.jsonl" 2>"$L/eval_4096.err"
rc=$?
cat "$L/eval_4096.err"
sum ""
sum "### 4096x4096x4096, fp32 (exit $rc)"
sum ""
python3 - "$L/eval_4096.jsonl" >>"$summary" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip().startswith("{")]
flop = 2.0 * 4096 ** 3
print("| kernel | status | time_us | TFLOP/s | % of cuBLAS | CV | timer | flags |")
print("|---|---|---:|---:|---:|---:|---|---|")
base = None
for r in rows:
    t = r.get("time_us", -1)
    b = r.get("baseline_us", -1)
    if b and b > 0:
        base = b
    cv = r.get("cv", r.get("time_cv", -1))
    name = r.get("file", "?").split("/")[-1]
    tf = f"{flop / (t * 1e-6) / 1e12:.2f}" if t and t > 0 else "-"
    pct = f"{100.0 * b / t:.1f}" if t and t > 0 and b and b > 0 else "-"
    cvs = f"{100.0 * cv:.2f}%" if cv is not None and cv >= 0 else "n/a"
    ts = f"{t:.1f}" if t and t > 0 else "-"
    fl = r.get("flags") or []
    fl = ", ".join(fl) if isinstance(fl, list) else str(fl)
    print(f"| {name} | {r.get('status')} | {ts} | {tf} | {pct} | {cvs} | {r.get('timer', r.get('backend', ''))} | {fl or '-'} |")
if base:
    print(f"| **cuBLAS** SGEMM (baseline_us) | ok | {base:.1f} | {flop / (base * 1e-6) / 1e12:.2f} | 100.0 | | | |")
else:
    print("| **cuBLAS** SGEMM | no baseline_us reported | | | | | | |")
PY
# every timed launch is checked on the host (kernels/gpu_run.c): a flag on
# an honest seed, or a warning about cuBLAS's own launches, is the checks'
# fault; and what the host's share of a sample costs at this shape
grep -h "cuBLAS's own timed launches" "$L/eval_4096.err" | head -n 2 |
  sed 's/^/- WARNING: /' >>"$summary"
BV=$(dirname "$KL")/bench_verify
[ -x "$BV" ] || BV=$(find build -name bench_verify -type f 2>/dev/null | head -n1)
if [ -n "$BV" ] && kl timeout $(t 60) "$BV" 4096 5 >"$L/bench_verify.log" 2>&1; then
  sum "- host work per timed launch at 4096^3 (fresh A, B and the launch checks): $(grep -o 'baseline, 1 thread *[0-9.]* ms' "$L/bench_verify.log" | tr -s ' '); $(grep -o '[0-9]* threads *[0-9.]* ms' "$L/bench_verify.log" | tr -s ' ')"
else
  sum "- bench_verify: FAILED or missing: $(tail -n 2 "$L/bench_verify.log" 2>/dev/null | tr '\n' ' ')"
fi

fi # step 4

# ---- 5. the run-gpu worker's syscalls (seccomp record mode) ----
if want 5; then
note "seccomp record: run-gpu on one seed"
KERNLAB_GPU_SECCOMP=record kl timeout $(t 90) "$KL" eval --backend gpu --json \
  kernels/seeds/05_blocktile_2d.cu >/dev/null 2>"$L/record.err"
# "NAME COUNT" per worker (the baseline's and the kernel's): one line per
# name, the counts summed
grep -h "seccomp-record:" "$L/record.err" | sed 's/.*seccomp-record: //' \
  | awk '{n[$1] += $2} END {for (k in n) print k, n[k]}' | sort \
  >"$L/syscalls_recorded.txt"
kl timeout $(t 20) "$KL" sandbox --explain 2>/dev/null | awk '
  /^profile /{inside = ($2 == "run-gpu")}
  inside && /^    [a-z_0-9]+ / && !/\[fails: /{print $1}' | sort -u >"$L/syscalls_allowed.txt"
sum ""
sum "### run-gpu syscalls after CUDA init (record mode)"
sum ""
if [ -s "$L/syscalls_recorded.txt" ]; then
  sum "recorded (name count): $(tr '\n' ';' <"$L/syscalls_recorded.txt")"
  missing=$(awk '{print $1}' "$L/syscalls_recorded.txt" | grep -v '^ioctl$' \
    | grep -vxFf "$L/syscalls_allowed.txt" | tr '\n' ' ')
  sum ""
  sum "not in the run-gpu allowlist (open/openat: refused with EACCES, not trapped): ${missing:-none}"
else
  sum "no record (see record.err): $(head -c 300 "$L/record.err" | tr '\n' ' ')"
fi

note "run-gpu in user + network namespaces (KERNLAB_GPU_NAMESPACES=1)"
# The worker enters them before CUDA starts threads only on request, until
# this line shows the driver works inside them (sandbox/worker.c).
KERNLAB_GPU_NAMESPACES=1 kl timeout $(t 60) "$KL" eval --backend gpu --json \
  kernels/seeds/05_blocktile_2d.cu >"$L/eval_ns.jsonl" 2>"$L/eval_ns.err"
ns=$(python3 -c 'import json,sys
r=[json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print("status %s, correct %s, sandbox %s" % (r[0]["status"], r[0]["correct"], r[0]["sandbox"]) if r else "no JSON")' "$L/eval_ns.jsonl" 2>/dev/null)
sum ""
sum "- run-gpu with KERNLAB_GPU_NAMESPACES=1: ${ns:-no result} (works when ok and seccomp+rlimits+namespaces): $(tail -n 1 "$L/eval_ns.err" | head -c 200)"

fi # step 5

# ---- 6. a short GPU campaign: a tiny policy primed here, two GRPO steps ----
if want 6; then
note "campaign: tiny prime + 2 steps on --backend gpu"
if tiny_policy >"$L/campaign.log" 2>&1 &&
   kl timeout $(t 240) "$KL" run "$cdir/gpu.lua" >>"$L/campaign.log" 2>&1; then
  sum "- campaign (backend gpu, 2 steps): ok: $(grep -c '^step [0-9]*/[0-9]*  reward' "$L/campaign.log") step lines"
else
  sum "- campaign (backend gpu, 2 steps): FAILED: $(tail -n 3 "$L/campaign.log" | tr '\n' ' ')"
fi

fi # step 6

# ---- 8. (only when named in CHECK_STEPS) the corpora on the device ----
# False positives and misses of the anti-cheat checks on a real GPU: every
# tests/kernels/honest/*.cu must be ok, correct and unflagged; every
# tests/cheats/*.cu caught (not correct, flagged, or not ok), and wrong where
# its header says EXPECT-VERDICT: wrong. Some cheats aim at cpu-emu only
# (forging the runner's report in its process): a miss is listed, not judged.
if want 8; then
for corpus in honest cheats; do
  note "corpus on the device: $corpus"
  files=(tests/kernels/honest/*.cu)
  [ "$corpus" = cheats ] && files=(tests/cheats/*.cu)
  kl timeout $(t 150) "$KL" eval --backend gpu --json "${files[@]}" \
    >"$L/corpus_$corpus.jsonl" 2>"$L/corpus_$corpus.err"
  python3 - "$corpus" "$L/corpus_$corpus.jsonl" "$?" "${#files[@]}" >>"$summary" <<'PY'
import json, re, sys
corpus, path, rc, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
rows = []
for l in open(path):
    try:
        rows.append(json.loads(l))
    except ValueError:
        pass
def name(r):
    return r.get("file", "?").split("/")[-1]
def clean(r):
    return r.get("status") == "ok" and r.get("correct") and not r.get("flags")
if corpus == "honest":
    bad = [r for r in rows if not clean(r)]
    print(f"- honest corpus on the device (exit {rc}): {len(rows) - len(bad)}/{n} ok, correct and unflagged"
          + ("" if len(rows) == n else f" ({n - len(rows)} with no result)"))
    for r in bad:
        print(f"  - {name(r)}: {r.get('status')}, correct {r.get('correct')}, flags {','.join(r.get('flags') or []) or '-'}; {(r.get('flag_detail') or r.get('error') or '')[:200]}")
else:
    missed, verdict = [], []
    for r in rows:
        head = open(r.get("file", "")).read(4000) if r.get("file") else ""
        if clean(r):
            missed.append(name(r))
        if re.search(r"EXPECT-VERDICT:\s*wrong", head) and r.get("correct"):
            verdict.append(name(r))
    print(f"- cheat corpus on the device (exit {rc}): {len(rows) - len(missed)}/{len(rows)} caught"
          + ("" if len(rows) == n else f" ({n - len(rows)} of {n} with no result)")
          + f"; not caught (ok, correct, unflagged): {', '.join(missed) or 'none'}"
          + f"; EXPECT-VERDICT wrong but correct: {', '.join(verdict) or 'none'}")
PY
done
fi # step 8

note "done in $(elapsed)s"
sum ""
sum "total: $(elapsed) s"
pack
echo
cat "$summary"
# the tee of check.log ends with our output: wait for it, so output_tail
# holds the whole summary
exec >&- 2>&-
wait "$tee_pid" 2>/dev/null
