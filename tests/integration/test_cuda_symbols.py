"""tests/integration/test_cuda_symbols.py — the entry points the GPU code
looks up with dlsym exist in the CUDA 13 libraries, without a device.

kernels/gpu.c and policy/cuda/pcuda_device.c name every driver, CUPTI and
cuBLAS function they use as a string ("cuMemAlloc_v2", "cublasSgemm_v2",
...) and resolve it at run time, so a wrong name (an unsuffixed legacy
entry point, a _v2 that does not exist) compiles and fails only on a
device. Here every such string in those files is looked up in the
toolkit's own libraries: the driver's link stub (lib64/stubs/libcuda.so,
whose exports are the driver's), libcupti.so.13 and libcublas.so.13. Then
the two loaders themselves run against the stub, named libcuda.so.1 in a
temporary folder: each must get as far as cuInit (which the stub answers
with CUDA_ERROR_STUB_LIBRARY), so every name it resolved before that
exists. Exit 77 (skipped) where the toolkit is not installed.

Usage: test_cuda_symbols.py SOURCE_DIR TEST_GPU_PROBE TEST_POLICY_CUDA
"""
import ctypes
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kltest import check, done  # noqa: E402

src, probe, policy = sys.argv[1:4]
cuda = os.environ.get("CUDA_HOME", "/usr/local/cuda")
stub = os.path.join(cuda, "lib64", "stubs", "libcuda.so")
libs = {"cupti": os.path.join(cuda, "lib64", "libcupti.so.13"),
        "cublas": os.path.join(cuda, "lib64", "libcublas.so.13"),
        "cu": stub}
if not os.path.exists(stub):
    print("test_cuda_symbols: skipped: no CUDA 13 toolkit (%s)" % stub)
    sys.exit(77)

# "cuFoo", "cuptiFoo", "cublasFoo" string literals: the names handed to dlsym
# (messages quoting a call carry more than the bare name and do not match).
name_re = re.compile(r'"((?:cupti|cublas|cu)[A-Z][A-Za-z0-9_]*)"')
names = set()
for rel in ("kernels/gpu.c", "policy/cuda/pcuda_device.c"):
    with open(os.path.join(src, rel)) as f:
        names |= set(name_re.findall(f.read()))
check(len(names) > 30, "found only %d entry-point names in the sources" % len(names))
loaded = {}
for name in sorted(names):
    prefix = next(p for p in ("cupti", "cublas", "cu") if name.startswith(p))
    path = libs[prefix]
    if not os.path.exists(path):
        continue
    if path not in loaded:
        loaded[path] = ctypes.CDLL(path)
    check(hasattr(loaded[path], name),
          "%s is not exported by %s (expected every name the GPU code "
          "resolves with dlsym to exist in CUDA 13)" % (name, path))

# The loaders against the stub: as far as cuInit, every symbol resolved.
with tempfile.TemporaryDirectory() as tmp:
    os.symlink(stub, os.path.join(tmp, "libcuda.so.1"))
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = tmp + ":" + env.get("LD_LIBRARY_PATH", "")
    for argv in ([probe], [policy, "--device"]):
        p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        out = p.stdout + p.stderr
        check("CUDA_ERROR_STUB_LIBRARY" in out,
              "%s with the stub as libcuda.so.1: expected to reach cuInit "
              "(CUDA_ERROR_STUB_LIBRARY), got: %s" % (argv[0], out.strip()[-300:]))
done()
