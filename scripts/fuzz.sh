#!/usr/bin/env bash
# fuzz.sh — build the libFuzzer harnesses of isa/fuzz (decoder, assembler, ELF loader) and
# hw-model/fuzz (the core model running what assembles) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and run each for a bounded time.
#
#   scripts/fuzz.sh [SECONDS]    seconds per harness (default 30)
#
# Needs clang and its libFuzzer runtime (Debian: clang libclang-rt-14-dev, or the pair of
# another LLVM version with CC set to that clang). Builds into build-fuzz/ (FUZZ_BUILD_DIR).
# Seeds: isa/examples/*.s and tests/data/isa/*.s for the assembler, those examples assembled
# into ELF files for the loader and the decoder, and the examples and hw-model/fuzz/*.s for
# the core model; the corpus grows in
# build-fuzz/fuzz-corpus/. A finding stops the script with a non-zero status and leaves the
# input in build-fuzz/fuzz-artifacts/ (reproduce: build-fuzz/isa/fuzz_isa_NAME FILE, or
# build-fuzz/hw-model/fuzz_core FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-30}
build=${FUZZ_BUILD_DIR:-build-fuzz}
cc=${CC:-clang}
jobs=$(nproc 2>/dev/null || echo 2)

CC=$cc cmake -S . -B "$build" -DNPUSIM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$jobs" --target fuzz_isa_decode fuzz_isa_asm fuzz_isa_elf fuzz_core \
  npusim

corpus=$build/fuzz-corpus
artifacts=$build/fuzz-artifacts
mkdir -p "$corpus/decode" "$corpus/asm" "$corpus/elf" "$corpus/core" "$artifacts"
cp isa/examples/*.s tests/data/isa/*.s "$corpus/asm/"
cp isa/examples/*.s hw-model/fuzz/*.s "$corpus/core/"
for s in isa/examples/*.s; do
  "$build/sim/npusim" asm "$s" -o "$corpus/elf/$(basename "$s" .s).elf"
done
cp "$corpus"/elf/*.elf "$corpus/decode/"

for h in decode asm elf; do
  echo "fuzz.sh: fuzz_isa_$h for ${secs}s"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
    "$build/isa/fuzz_isa_$h" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -max_len=65536 -print_final_stats=1 -artifact_prefix="$artifacts/$h-" "$corpus/$h"
done
echo "fuzz.sh: fuzz_core for ${secs}s"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
  "$build/hw-model/fuzz_core" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
  -max_len=16384 -print_final_stats=1 -artifact_prefix="$artifacts/core-" "$corpus/core"
echo "fuzz.sh: no findings"
