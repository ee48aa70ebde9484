#!/usr/bin/env bash
# scripts/deps.sh — installs the Debian packages kernlab builds and tests
# with, when they are missing. Needs root (or sudo) only if something is
# missing. The CUDA 13 toolkit (NVRTC) is expected in /usr/local/cuda; without
# it kernlab still runs on the CPU emulator and says what it lacks.
set -euo pipefail
pkgs=(build-essential cmake pkg-config python3 liblua5.4-dev libhdf5-dev
      hdf5-tools libseccomp-dev libopenblas-dev python3-h5py
      python3-torch # policy cross-check against PyTorch (tests/python)
      chromium # chromium: headless, for the report test (tests/integration)
      strace) # delays one syscall of a writer in the results race test
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
