#!/usr/bin/env bash
# bench_kernel.sh — issue 10's matmul targets: bf16 4096^3 on tpu-pod, one core (>= 90% of the
# MXU peak) and all 8 cores of the chip (>= 80%), through `npusim kernel` (the cost model's
# tiling; bench/README.md explains the settings).
#
#   bench/bench_kernel.sh [--json] [BUILD_DIR]      (default BUILD_DIR: build)
#
# Exit status 1 when a target is missed. Then, for comparison and without a target, the same
# matrices unpadded: rows 8 KiB apart, the period of tpu-pod's HBM channels (bench/README.md).
set -euo pipefail
cd "$(dirname "$0")/.."
json=0
build=build
for a in "$@"; do
  case "$a" in
    --json) json=1 ;;
    -*) echo "bench_kernel.sh: unknown option '$a'" >&2; exit 2 ;;
    *) build=$a ;;
  esac
done
npusim=$build/sim/npusim
[ -x "$npusim" ] || { echo "bench_kernel.sh: $npusim not built (run scripts/setup.sh)" >&2; exit 2; }
op="matmul m=4096 n=4096 k=4096 dtype=bf16 pad=128"
status=0
out="["
sep=""
for run in 1 8 1u 8u; do
  cores=${run%u}
  target=$([ "$cores" = 1 ] && echo 90 || echo 80)
  spec=$op
  if [ "$run" != "$cores" ]; then  # unpadded: informational
    spec=${op% pad=128}
    target=0
  fi
  j=$("$npusim" kernel --arch tpu-pod --op "$spec" --cores "$cores" --json)
  line=$(python3 - "$j" "$cores" "$target" <<'PY'
import json, sys
d = json.loads(sys.argv[1]); cores = int(sys.argv[2]); target = float(sys.argv[3])
ok = d["mxu_util_pct"] >= target
goal = ("target %.0f%%: %s" % (target, "met" if ok else "missed")) if target else "unpadded, no target"
print("%s|%d core%s: %s cycles (%.3f ms), %.1f TFLOP/s, MXU %.1f%% of peak (%s), HBM %.1f GB/s, tiles %s"
      % ("ok" if ok else "MISS", cores, "" if cores == 1 else "s", format(d["cycles"], ","),
         d["time_us"] / 1e3, d["tflops"], d["mxu_util_pct"], goal,
         d["gbps"], d["schedule"].split("tiles ")[1]))
PY
)
  [ "${line%%|*}" = ok ] || status=1
  if [ "$json" = 1 ]; then
    out+="$sep$j"
    sep=","
  else
    echo "${line#*|}"
  fi
done
[ "$json" = 1 ] && echo "$out]"
exit $status
