"""tests/gpu/nvrtc_vm.py — how much address space NVRTC takes on this machine.

A diagnostic for check.sh (step 2), unconfined: the compile worker runs NVRTC
under an RLIMIT_AS (sandbox.c's compile profile), and on the first device run
every seed's compile ended `oom` in NVRTC's builtin header while a 2-core
machine's worker peaked at 330 MiB. This loads libnvrtc.so.13 with ctypes
(from LD_LIBRARY_PATH, as the lab does), compiles a small kernel three times
and prints, after each stage, the process's VmSize, VmPeak and threads, then
the largest mappings: what a reservation the limit counts comes from.
Usage: python3 tests/gpu/nvrtc_vm.py   (prints one line per stage)
"""
import ctypes
import os
import resource

SRC = b"""
extern "C" __global__ void matmul(const float* A, const float* B, float* C,
                                  int M, int N, int K) {
  int r = blockIdx.y * blockDim.y + threadIdx.y;
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= M || c >= N) return;
  float s = 0.f;
  for (int k = 0; k < K; k++) s += A[r * K + k] * B[k * N + c];
  C[r * N + c] = s;
}
"""


def status():
    f = {}
    for line in open("/proc/self/status"):
        k, _, v = line.partition(":")
        if k in ("VmSize", "VmPeak", "Threads"):
            f[k] = v.strip()
    return "VmSize %s, VmPeak %s, threads %s" % (f["VmSize"], f["VmPeak"], f["Threads"])


def biggest(n=6):
    rows = []
    for line in open("/proc/self/maps"):
        parts = line.split()
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        rows.append((hi - lo, parts[1], parts[5] if len(parts) > 5 else "[anon]"))
    rows.sort(reverse=True)
    return "; ".join("%d MiB %s %s" % (s >> 20, p, os.path.basename(name)) for s, p, name in rows[:n])


def main():
    print("nvrtc_vm: start: %s; RLIMIT_STACK %s; cpus %d" %
          (status(), resource.getrlimit(resource.RLIMIT_STACK), os.cpu_count()))
    lib = ctypes.CDLL("libnvrtc.so.13")
    print("nvrtc_vm: loaded: " + status())
    major, minor = ctypes.c_int(), ctypes.c_int()
    lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    for i in range(3):
        prog = ctypes.c_void_p()
        rc = lib.nvrtcCreateProgram(ctypes.byref(prog), SRC, b"k.cu", 0, None, None)
        opts = (ctypes.c_char_p * 2)(b"--gpu-architecture=sm_90", b"--std=c++17")
        rc = rc or lib.nvrtcCompileProgram(prog, 2, opts)
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
        print("nvrtc_vm: NVRTC %d.%d compile %d (rc %d): %s; RLIMIT_STACK now %s" %
              (major.value, minor.value, i + 1, rc, status(),
               resource.getrlimit(resource.RLIMIT_STACK)))
    cuda = any("libcuda.so" in line for line in open("/proc/self/maps"))
    print("nvrtc_vm: CUDA_CACHE_DISABLE=%s: libcuda %s; largest mappings: %s" %
          (os.environ.get("CUDA_CACHE_DISABLE", ""),
           "loaded (NVRTC's cache through the driver)" if cuda else "not loaded",
           biggest()))


if __name__ == "__main__":
    main()
