#!/usr/bin/env bash
# test.sh — set up (scripts/setup.sh), build and run every test with ctest.
#
#   scripts/test.sh               the normal build (build/)
#   scripts/test.sh --sanitize    everything built with ASan + UBSan (build-sanitize/)
#   extra arguments after --      go to ctest (e.g. -- -R evq)
set -euo pipefail
cd "$(dirname "$0")/.."

setup_args=()
build_dir=${BUILD_DIR:-build}
while (($#)); do
  case "$1" in
    --sanitize) setup_args+=(--sanitize); build_dir=${BUILD_DIR:-build-sanitize}; shift ;;
    --) shift; break ;;
    *) echo "test.sh: unknown option '$1' (known: --sanitize, -- CTEST_ARGS)" >&2; exit 2 ;;
  esac
done

BUILD_DIR=$build_dir scripts/setup.sh "${setup_args[@]+"${setup_args[@]}"}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
ctest --test-dir "$build_dir" -j "$(nproc 2>/dev/null || echo 2)" --output-on-failure "$@"
