#!/usr/bin/env bash
# astra_roundtrip.sh — the ASTRA-sim round trip of docs/interop.md: npusim runs a job with
# --chakra, ASTRA-sim 2's analytical backend replays the exported traces with the exported
# system and network files, and npusim replays them too; prints one CSV row per job: npusim's
# step time, npusim replay's, ASTRA-sim's (the last rank's finish, 1 cycle = 1 ns) and ASTRA-sim
# against npusim, with the provenance: npusim's commit (git describe of this checkout) and the
# npusim arguments of the job.
#
#   scripts/astra_roundtrip.sh ASTRA_DIR [OUT.csv]
#
# ASTRA_DIR holds AstraSim_Analytical_Congestion_Aware and _Unaware, built from https://github.com/astra-sim/astra-sim
# in a folder of your own, outside this repository (this script neither fetches nor builds it;
# CI never runs it). $ASTRA_COMMIT names its commit in the output (default: unknown). Jobs: GPT-tiny
# (global batch 8, sequence 16) and GPT-2 small (global batch 16, sequence 1,024), dp 2 x tp 2 x
# pp 2 on 8 chips of tpu-pod, as a ring of 8 (ASTRA-sim's congestion-aware backend, which takes one
# dimension only, and its congestion-unaware one) and as a 2 x 2 x 2 torus (its congestion-unaware
# backend: three Ring dimensions). $JOBS replaces the jobs ("MODEL ARGS;MODEL ARGS", each run with
# --dp 2 --tp 2 --pp 2 unless ARGS give a strategy) and $NETS the networks ("ring:Aware ...").
set -euo pipefail

astra_dir=${1:?usage: astra_roundtrip.sh ASTRA_DIR [OUT.csv]}
out=${2:-/dev/stdout}
for b in Aware Unaware; do
  [[ -x $astra_dir/AstraSim_Analytical_Congestion_$b ]] ||
    { echo "astra_roundtrip.sh: no $astra_dir/AstraSim_Analytical_Congestion_$b" >&2; exit 2; }
done
root=$(cd "$(dirname "$0")/.." && pwd)
npusim=${NPUSIM:-$root/build/sim/npusim}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ring=(--arch tpu-pod --set system.chips=8 --set system.topology=ring --set system.torus_x=1
      --set system.torus_y=1 --set system.torus_z=1)
torus=(--arch tpu-pod --set system.chips=8 --set system.torus_x=2 --set system.torus_y=2
       --set system.torus_z=2)
jobs=("gpt-tiny --batch 8" "gpt2-small --batch 16 --seq 1024")
[[ -n ${JOBS:-} ]] && IFS=';' read -r -a jobs <<<"$JOBS"
read -r -a nets <<<"${NETS:-ring:Aware ring:Unaware torus:Unaware}"

npusim_commit=$(git -C "$root" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
echo "model,strategy,network,astra_backend,npusim_run_s,npusim_replay_s,astra_s,astra_vs_npusim_pct,astra_commit,npusim_commit,npusim_args" >"$out"
for nb in "${nets[@]}"; do
for job in "${jobs[@]}"; do
  net=${nb%%:*} backend=${nb#*:}
  read -r model rest <<<"$job"
  if [[ $net == ring ]]; then arch=("${ring[@]}"); else arch=("${torus[@]}"); fi
  [[ -n ${ARCH:-} ]] && read -r -a arch <<<"$ARCH"
  strategy=(--dp 2 --tp 2 --pp 2)
  [[ $rest == *--dp* ]] && strategy=()
  astra=$astra_dir/AstraSim_Analytical_Congestion_$backend
  dir=$work/$net-$backend-$model
  # shellcheck disable=SC2086
  run_s=$("$npusim" run "${arch[@]}" --model $model $rest "${strategy[@]}" --chakra "$dir" --json 2>/dev/null |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["step_time_s"])')
  replay_s=$("$npusim" replay "$dir" "${arch[@]}" --json |
             python3 -c 'import json,sys; print(json.load(sys.stdin)["step_time_ps"] * 1e-12)')
  (cd "$dir" && "$astra" --workload-configuration="$dir/$model" \
      --comm-group-configuration="$dir/$model.comm_group.json" \
      --system-configuration="$dir/system.json" --network-configuration="$dir/network.yml" \
      --remote-memory-configuration="$dir/remote_memory.json" >"$dir/astra.log" 2>&1)
  astra_s=$(grep -o 'finished, [0-9]* cycles' "$dir/astra.log" | awk '{print $2}' | sort -n | tail -1 |
            awk '{print $1 * 1e-9}')
  pct=$(python3 -c "print(round(($astra_s / $run_s - 1) * 100, 1))")
  strat=$(grep -o -- '--dp [0-9]* --tp [0-9]* --pp [0-9]*' <<<"$rest ${strategy[*]}" | awk '{print "dp" $2 "xtp" $4 "xpp" $6}')
  args="${arch[*]} --model $model $rest ${strategy[*]}"
  echo "$model,$strat,$net,congestion_${backend,,},$run_s,$replay_s,$astra_s,$pct,${ASTRA_COMMIT:-unknown},$npusim_commit,${args% }" >>"$out"
done
done
