#!/usr/bin/env bash
# fidelity_table.sh — re-measures docs/run.md's "Full against fast" rows (step times of
# gpt-tiny unfused, gpt-tiny fused attention and mlp-tiny at fast and full fidelity on 8 chips
# of tpu-pod), the composite-attention line and the README's default job. Run from anywhere,
# after `cmake --build build`; takes a few minutes (the default job's full run about 40 s).
cd "$(dirname "$0")/.." || exit 1
st() { build/sim/npusim run "$@" --json 2>/dev/null | python3 -c "import json,sys;print('%.2f'%(json.load(sys.stdin)['step_time_s']*1e6))"; }
row() { name=$1; shift
  out="| $name |"
  for m in "gpt-tiny --attention unfused" "gpt-tiny" "mlp-tiny"; do
    f=$(st --arch tpu-pod --model $m "$@" --fidelity fast); u=$(st --arch tpu-pod --model $m "$@" --fidelity full)
    r=$(python3 -c "print('%+.1f'%(100*($f-$u)/$u))")
    out="$out $f µs | $u µs | $r % |"
  done; echo "$out"; }
row "dp 2 × tp 2 × pp 2 (8)" --batch 8 --dp 2 --tp 2 --pp 2
row "dp 8 (16)" --batch 16 --dp 8
row "dp 2 × tp 4 (16)" --batch 16 --dp 2 --tp 4
row "dp 4 × pp 2, 4 micro-batches (16)" --batch 16 --dp 4 --pp 2 --microbatch 1
row "dp 4 × tp 2 (16)" --batch 16 --dp 4 --tp 2
row "dp 8, ZeRO 1 (16)" --batch 16 --dp 8 --zero 1
row "dp 8, ZeRO 3 (16)" --batch 16 --dp 8 --zero 3
echo composite: $(st --arch tpu-pod --model gpt-tiny --attention composite --batch 8 --dp 2 --tp 2 --pp 2 --fidelity fast) $(st --arch tpu-pod --model gpt-tiny --attention composite --batch 8 --dp 2 --tp 2 --pp 2 --fidelity full)
echo default job: $(st --fidelity fast) $(st --fidelity full)
