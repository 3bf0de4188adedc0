#!/usr/bin/env bash
# bench_kernels_attn.sh — issue 10's attention target (done-when 4): the fused attention
# kernels' HBM bytes within 10% of the analytical minimum (every input read once, every output
# written once) and no score-matrix traffic, on one GPT-3 175B layer's attention (batch 1,
# sequence 2048, 96 heads of 128, bf16, causal) over the 8 cores of a tpu-pod chip, forward
# (attention: out and lse) and backward (attention_grad), through `npusim kernel`.
#
#   bench/bench_kernels_attn.sh [--json] [BUILD_DIR]      (default BUILD_DIR: build)
#
# Exit status 1 when a target is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
json=0
build=build
for a in "$@"; do
  case "$a" in
    --json) json=1 ;;
    -*) echo "bench_kernels_attn.sh: unknown option '$a'" >&2; exit 2 ;;
    *) build=$a ;;
  esac
done
npusim=$build/sim/npusim
[ -x "$npusim" ] || {
  echo "bench_kernels_attn.sh: $npusim not built (run scripts/setup.sh)" >&2
  exit 2
}
shape=1x96x2048x128
status=0
out="["
sep=""
for spec in "attention shape=$shape dtype=bf16 causal=1" \
            "attention_grad shape=$shape dtype=bf16 causal=1" \
            "attention shape=$shape dtype=bf16 causal=0" \
            "attention_grad shape=$shape dtype=bf16 causal=0"; do
  j=$("$npusim" kernel --arch tpu-pod --op "$spec" --cores 8 --json)
  line=$(python3 - "$j" "$shape" <<'PY'
import json, sys
d = json.loads(sys.argv[1])
B, H, S, Dh = (int(v) for v in sys.argv[2].split("x"))
score = B * H * S * S * 2            # one bf16 score matrix of the layer's heads
extra = d["hbm_bytes"] - d["hbm_bytes_min"]
ratio = d["hbm_bytes"] / d["hbm_bytes_min"]
ok = ratio <= 1.10 and extra < S * S * 2   # not even one head's score matrix
mib = 1 << 20
print("%s|%-44s %s cycles (%.3f ms), %.1f TFLOP/s (MXU %.1f%%); HBM %.1f MiB, minimum %.1f MiB "
      "(x%.4f, target <= 1.10: %s); a score matrix of the layer would be %.0f MiB; %s"
      % ("ok" if ok else "MISS", d["spec"], format(d["cycles"], ","), d["time_us"] / 1e3,
         d["tflops"], d["mxu_util_pct"], d["hbm_bytes"] / mib, d["hbm_bytes_min"] / mib, ratio,
         "met" if ok else "missed", score / mib, d["schedule"]))
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
