#!/usr/bin/env bash
# fuzz.sh — build every libFuzzer harness with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer, and run each for a bounded time:
#
#   isa/fuzz       decode, asm, elf     the decoder, the assembler, the ELF loader
#   hw-model/fuzz  core                 the core model running what assembles
#                  topo, scalecfg       SCALE-Sim topology CSV and .cfg files
#   noc/fuzz       booksim              BookSim reference files (npusim noc --compare)
#   compiler/fuzz  kspec                npusim kernel --op specs
#   base/fuzz      config, set, parse   architecture configs, --set values, the one door
#   framework/fuzz model                model files
#                  model_hf             Hugging Face config.json files
#                  model_onnx           ONNX files (seeds: tests/onnx_models.py's, with python3-onnx)
#   traces/fuzz    trace                the trace reader and analyzer
#                  sweep                sweep files (npusim sweep) and the results' CSV reader
#   sim/fuzz       cli                  the command-line option parser
#                  chakra               one rank's Chakra execution trace (npusim replay)
#
#   scripts/fuzz.sh [--cpu] [SECONDS] [HARNESS ...]
#       seconds per harness (default 30) of wall time, or with --cpu of the harness process's
#       CPU time (user + system, polled every 5 s; the run is then stopped with SIGINT, on which
#       libFuzzer prints its final stats: use it on a loaded machine, where wall time overstates
#       the fuzzing done); all harnesses unless some are named
#
# Each harness asserts its parser's contract (what is accepted round-trips or re-validates;
# what is refused is a bad-input error with a message) and prints libFuzzer's final stats
# (executions, time). Needs clang and its libFuzzer runtime (Debian: clang
# libclang-rt-14-dev, or the pair of another LLVM version with CC set to that clang). Builds
# into build-fuzz/ (FUZZ_BUILD_DIR). Seeds come from the repository (the corpora under
# */fuzz/corpus, the examples, presets, zoo, topologies and test data); the corpus grows in
# build-fuzz/fuzz-corpus/. A finding stops the script with a non-zero status and leaves the
# input in build-fuzz/fuzz-artifacts/ (reproduce: build-fuzz/<dir>/fuzz_NAME FILE).
set -euo pipefail
cd "$(dirname "$0")/.."

cpu=0
if [ "${1:-}" = --cpu ]; then cpu=1; shift; fi
secs=${1:-30}
shift || true
build=${FUZZ_BUILD_DIR:-build-fuzz}
cc=${CC:-clang}
jobs=$(nproc 2>/dev/null || echo 2)
all=(decode asm elf core config set parse model model_hf model_onnx topo scalecfg booksim kspec trace sweep cli chakra)
only=("$@")
((${#only[@]})) || only=("${all[@]}")

target() { # the CMake target of harness $1
  case "$1" in decode|asm|elf) echo "fuzz_isa_$1" ;; *) echo "fuzz_$1" ;; esac
}
binary() { # the executable of harness $1
  case "$1" in
    decode|asm|elf) echo "$build/isa/fuzz_isa_$1" ;;
    core) echo "$build/hw-model/fuzz_core" ;;
    *) echo "$build/fuzz/fuzz_$1" ;;
  esac
}

CC=$cc cmake -S . -B "$build" -DNPUSIM_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
targets=(npusim)
for h in "${only[@]}"; do targets+=("$(target "$h")"); done
cmake --build "$build" -j "$jobs" --target "${targets[@]}"

corpus=$build/fuzz-corpus
artifacts=$build/fuzz-artifacts
mkdir -p "$artifacts"
for h in "${all[@]}"; do mkdir -p "$corpus/$h"; done
cp isa/examples/*.s tests/data/isa/*.s "$corpus/asm/"
cp isa/examples/*.s hw-model/fuzz/*.s "$corpus/core/"
for s in isa/examples/*.s; do
  "$build/sim/npusim" asm "$s" -o "$corpus/elf/$(basename "$s" .s).elf"
done
cp "$corpus"/elf/*.elf "$corpus/decode/"
cp configs/*.yaml tests/data/arch/*.yaml "$corpus/config/"
cp base/fuzz/corpus/set/* "$corpus/set/"
cp base/fuzz/corpus/parse/* "$corpus/parse/"
cp models/*.model tests/data/bad/files/*.model "$corpus/model/"
for f in models/hf/*/config.json tests/data/hf/*/config.json tests/data/hf/bad/*.json; do
  cp "$f" "$corpus/model_hf/$(echo "${f%/config.json}" | tr / _).json"
done
/usr/bin/python3 tests/onnx_models.py "$corpus/model_onnx" resnet-tiny gpt-tiny erf 2>/dev/null ||
  echo "fuzz.sh: no ONNX seeds (python3-onnx is not installed)" >&2
cp configs/topologies/*.csv tests/data/bad/files/*.csv "$corpus/topo/"
cp tests/data/hw/*.cfg "$corpus/scalecfg/"
cp tests/data/noc/*.csv "$corpus/booksim/"
cp compiler/fuzz/corpus/* "$corpus/kspec/"
for f in tests/data/bad/files/*.cfg; do # the seeds stay small: not the 64 KiB ones
  [ "$(stat -c %s "$f")" -lt 4096 ] && cp "$f" "$corpus/scalecfg/"
done
cp traces/fuzz/corpus/* "$corpus/trace/"
cp tests/data/bad/files/sweep_*.yaml "$corpus/sweep/"
cp sim/fuzz/corpus/* "$corpus/cli/"
for f in tests/data/bad/files/chakra_*/*.et; do cp "$f" "$corpus/chakra/$(echo "$f" | tr / _)"; done
"$build/sim/npusim" run --model gpt-tiny --batch 8 --chakra "$build/chakra-seed" >/dev/null 2>&1 &&
  cp "$build"/chakra-seed/gpt-tiny.0.et "$corpus/chakra/"

for h in "${only[@]}"; do
  case "$h" in core) limit=16384; tmo=20 ;; model_onnx) limit=262144; tmo=20 ;; *) limit=65536; tmo=10 ;; esac
  if ((cpu)); then wall=$((secs * 1000)); else wall=$secs; fi
  echo "fuzz.sh: $(target "$h") for ${secs}s$( ((cpu)) && echo " of CPU time")"
  ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
    "$(binary "$h")" -max_total_time="$wall" -timeout="$tmo" -rss_limit_mb=2048 \
    -max_len="$limit" -print_final_stats=1 -artifact_prefix="$artifacts/$h-" "$corpus/$h" &
  pid=$!
  while ((cpu)) && kill -0 "$pid" 2>/dev/null; do
    used=$(ps -o times= -p "$pid" | tr -d ' ') || break
    if [ "${used:-0}" -ge "$secs" ]; then
      echo "fuzz.sh: $h used ${used}s of CPU time: stopping it"
      kill -INT "$pid"
      break
    fi
    sleep 5
  done
  status=0
  wait "$pid" || status=$?
  # 72 is libFuzzer's exit status after SIGINT (-interrupted_exitcode); anything else non-zero
  # is a finding (or a harness that cannot run)
  if ((status)) && ! ((cpu && status == 72)); then exit "$status"; fi
done
echo "fuzz.sh: no findings"
