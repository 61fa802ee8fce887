#!/usr/bin/env bash
# On a device machine (the device tool's run, carry [".device"]), from the repository's root:
#
#   bash bench/device/remote.sh          the device check: verdict, bench/results/device.json
#   bash bench/device/remote.sh --sim    a dry run of its suite and bench on the simulated runtime
#
# The lent machines have a GPU, nvcc and Python but no Node.js and no network, so everything
# the check runs comes from the bundle npm run device-bundle wrote here (bench/device/bundle.mjs):
# it is unpacked over this tree, its Node.js goes first on the PATH, and the check runs without
# a build (the bundle's native build has the CUDA library). What the check wrote, and a log,
# go to $OUT (the device tool brings that folder back), else to /tmp/moetier-device-out.
# Exit: the check's (0 pass, 1 fail, 2 no device or not built); 3 when the bundle is missing.
set -u -o pipefail
cd "$(dirname "$0")/../.."
bundle=.device/moetier-device.tar.xz
out=${OUT:-/tmp/moetier-device-out}
mkdir -p "$out"
if [ ! -f "$bundle" ]; then
  echo "remote.sh: $bundle is missing: run npm run device-bundle on the machine that has nvcc and Node.js, and carry .device" >&2
  exit 3
fi
# tar needs the xz program for -J; Python's tarfile reads xz without it.
if ! tar -xJf "$bundle" 2>"$out/unpack.log"; then
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(".")' "$bundle" >>"$out/unpack.log" 2>&1 || {
    echo "remote.sh: could not unpack $bundle (see $out/unpack.log)" >&2
    exit 3
  }
fi
export PATH="$PWD/.device/node/bin:$PATH"
echo "remote.sh: node $(node --version) at $(command -v node); $(nproc) cores"
nvidia-smi >"$out/nvidia-smi.txt" 2>&1 || echo "remote.sh: nvidia-smi failed (see $out/nvidia-smi.txt)"
if [ "${1:-}" = "--sim" ]; then
  set -e
  MOETIER_DEVICE=cuda-sim node node_modules/vitest/vitest.mjs run --project device 2>&1 | tee "$out/suite-sim.log"
  MOETIER_DEVICE_BACKEND=cuda-sim MOETIER_DEVICE_PRESET=tiny node bench/device/bench-device.mjs 2>"$out/bench-sim.err" | tee "$out/bench-sim.json"
  exit 0
fi
node bench/device/device-check.mjs --no-build --update-results 2>&1 | tee "$out/device-check.log"
rc=${PIPESTATUS[0]}
cp bench/results/device.json "$out/device.json" 2>/dev/null || true
exit "$rc"
