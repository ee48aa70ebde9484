#!/bin/sh
# tests/gpu/bundle.sh — builds kernlab here (the CPU machine) and packs what
# a device machine lacks into tests/gpu/bundle.tar.gz (git-ignored, < 60 MB):
#   bin/kernlab, bin/test_gpu_probe, bin/test_policy_cuda(_gen),
#   bin/test_policy_cuda_arena, bin/test_policy_matmul,
#   bin/bench_policy_cuda,
#   bin/bench_verify                 the binaries
#   lib/*                             every shared library ldd lists except
#                                     glibc's own and libcuda; plus
#                                     libcupti.so.13 (small, dlopened)
# NVRTC (110 MB) and cuBLAS (600 MB with cublasLt) are too large: check.sh
# finds the device image's own (CUDA 13.0, /usr/local/cuda or the python
# nvidia-* wheels).
# Usage: bash tests/gpu/bundle.sh [BUILD_DIR]   (default: build); run it
# right before the call: the bundle is what the device tests
# Then carry it: run(command="bash tests/gpu/check.sh",
#                    carry=["tests/gpu/bundle.tar.gz"], timeout_s=450)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
cd "$root"
cmake -S . -B "$build" >/dev/null
cmake --build "$build" -j"$(nproc)" --target kernlab test_gpu_probe test_policy_cuda test_policy_cuda_gen test_policy_cuda_bf16 test_policy_cuda_arena test_policy_matmul bench_policy_cuda bench_verify
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp "$build/kernlab" "$stage/bin/"
probe=$(find "$build" -name test_gpu_probe -type f -perm -u+x | head -n1)
[ -n "$probe" ] && cp "$probe" "$stage/bin/"
for t in test_policy_cuda test_policy_cuda_gen test_policy_cuda_bf16 test_policy_cuda_arena test_policy_matmul bench_policy_cuda bench_verify; do
  f=$(find "$build" -name "$t" -type f -perm -u+x | head -n1)
  [ -n "$f" ] && cp "$f" "$stage/bin/"
done
for bin in "$stage"/bin/*; do
  ldd "$bin" | awk '/=> \// {print $3}'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
    libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|\
    libresolv.so*|libutil.so*|libcuda.so*) ;;
    *) cp -L "$lib" "$stage/lib/" ;;
  esac
done
for c in /usr/local/cuda/lib64/libcupti.so.13 \
         /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13; do
  if [ -f "$c" ]; then cp -L "$c" "$stage/lib/"; break; fi
done
git describe --always --dirty >"$stage/COMMIT" 2>/dev/null || echo unknown >"$stage/COMMIT"
date -u +%Y-%m-%dT%H:%MZ >"$stage/BUILT"
out="$root/tests/gpu/bundle.tar.gz"
tar -C "$stage" -czf "$out" .
size=$(du -m "$out" | cut -f1)
echo "bundle: $out (${size} MB): $(ls "$stage/bin" | tr '\n' ' ')+ $(ls "$stage/lib" | wc -l) libraries"
if [ "$size" -ge 60 ]; then
  echo "bundle.sh: the bundle is ${size} MB, over the 60 MB budget" >&2
  exit 1
fi
