#!/usr/bin/env bash
# setup.sh — install what npusim needs from Debian's packages (only what is missing), then
# configure and build. Safe to run again: it installs nothing when all is there and rebuilds
# only what changed.
#
#   scripts/setup.sh               build into build/
#   scripts/setup.sh --sanitize    build into build-sanitize/ with ASan + UBSan
#   BUILD_DIR=dir scripts/setup.sh build into dir
set -euo pipefail
cd "$(dirname "$0")/.."

# The one list of Debian packages npusim builds and tests with.
packages=(
  cmake make gcc pkg-config
  libelf-dev zlib1g-dev libcunit1-dev
  libyaml-dev      # architecture configs (YAML with comments)
  libjansson-dev   # --json output and JSON input
  protobuf-c-compiler libprotobuf-c-dev libonnx-dev   # ONNX import (onnx.proto via protoc-c), Chakra traces (et_def.proto)
  python3-onnx     # the ONNX test models (tests/onnx_models.py)
  clang libclang-rt-14-dev   # libFuzzer harnesses (scripts/fuzz.sh)
  g++ verilator    # the RTL test benches (tests/tb_*_rtl.cpp)
  libsystemc-dev   # the SystemC TLM-2.0 chip and npusim-vp (hw-model/systemc/)
  chromium         # the HTML report rendered headless (tests/test_report.c)
  libopenmpi-dev openmpi-bin   # npusim sweep across machines (mpirun; optional to build)
)

sanitize=OFF
build_dir=${BUILD_DIR:-build}
for arg in "$@"; do
  case "$arg" in
    --sanitize) sanitize=ON; build_dir=${BUILD_DIR:-build-sanitize} ;;
    *) echo "setup.sh: unknown option '$arg' (known: --sanitize)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup.sh: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNPUSIM_SANITIZE="$sanitize" >/dev/null
# The build's own lines (hundreds) go to a log; a terminal sees its percentage, a failure the
# log's last lines.
log="$build_dir/build.log"
echo "setup.sh: building into $build_dir/ with $jobs jobs (a first build takes about 6 minutes on 2 cores; log: $log)"
if [ -t 1 ]; then
  progress() { awk '/^\[ *[0-9]+%\]/ { printf "\rsetup.sh: %s", substr($0, 2, 4); fflush() } END { print "" }'; }
else
  progress() { cat >/dev/null; }
fi
if ! cmake --build "$build_dir" -j "$jobs" 2>&1 | tee "$log" | progress; then
  tail -n 40 "$log" >&2
  echo "setup.sh: the build failed (the whole log: $log)" >&2
  exit 1
fi
# warnings are kept in sight (the code builds without any)
grep -F 'warning:' "$log" >&2 || true
