#!/usr/bin/env bash
# bench_layer.sh — wall time of `npusim layer` on the ResNet-18 topology
# (configs/topologies/resnet18.csv) on 32x32 and 128x128 arrays, each dataflow.
#
#   bench/bench_layer.sh [--json] [BUILD_DIR]      (default BUILD_DIR: build)
#
# For each array and dataflow it prints the wall time of the whole topology in one process
# and the slowest single layer, run alone in its own process (so that figure includes process
# start-up and is an upper bound on the layer's simulation time), with that process's CPU
# time (user + system: less sensitive than wall time to other load on the machine). Conv rows
# run the conv kernel (implicit im2col), the fc row the matmul. Target (issue 4): every
# layer well under 100 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
json=0
build=build
for a in "$@"; do
  case "$a" in
    --json) json=1 ;;
    -*) echo "bench_layer.sh: unknown option '$a'" >&2; exit 2 ;;
    *) build=$a ;;
  esac
done
npusim=$build/sim/npusim
topo=configs/topologies/resnet18.csv
[ -x "$npusim" ] || { echo "bench_layer.sh: $npusim not built (run scripts/setup.sh)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

now_ns() { date +%s%N; }
ms() { awk -v ns="$1" 'BEGIN { printf "%.3f", ns / 1e6 }'; }
header=$(head -n 1 "$topo")
mapfile -t rows < <(tail -n +2 "$topo" | grep -v '^[[:space:]]*$')

results=()
for arr in 32x32 128x128; do
  for df in os ws is; do
    t0=$(now_ns)
    "$npusim" layer --arch tpu-pod --array "$arr" --dataflow "$df" --topology "$topo" >/dev/null
    total_ns=$(( $(now_ns) - t0 ))
    max_ns=0 max_name="" max_cpu=0
    for row in "${rows[@]}"; do
      printf '%s\n%s\n' "$header" "$row" > "$tmp/one.csv"
      t0=$(now_ns)
      { TIMEFORMAT='%3U %3S'; time "$npusim" layer --arch tpu-pod --array "$arr" --dataflow "$df" \
          --topology "$tmp/one.csv" >/dev/null 2>"$tmp/err"; } 2>"$tmp/cpu"
      ns=$(( $(now_ns) - t0 ))
      if (( ns > max_ns )); then
        max_ns=$ns; max_name=${row%%,*}
        max_cpu=$(awk '{ printf "%.0f", ($1 + $2) * 1e9 }' "$tmp/cpu")
      fi
    done
    results+=("$arr $df ${#rows[@]} $total_ns $max_ns $max_name $max_cpu")
  done
done

if (( json )); then
  printf '{"topology": "%s", "runs": [' "$topo"
  sep=""
  for r in "${results[@]}"; do
    read -r arr df n total max name cpu <<<"$r"
    printf '%s{"array": "%s", "dataflow": "%s", "layers": %d, "topology_wall_ms": %.3f, "slowest_layer": "%s", "slowest_layer_wall_ms": %.3f, "slowest_layer_cpu_ms": %.3f}' \
      "$sep" "$arr" "$df" "$n" "$(ms "$total")" "$name" "$(ms "$max")" "$(ms "$cpu")"
    sep=", "
  done
  printf ']}\n'
else
  echo "npusim layer, $topo (ResNet-18), wall time on this machine"
  printf '%-8s %-3s %7s %18s %34s\n' array df layers "whole topology (ms)" \
    "slowest layer alone: wall, CPU (ms)"
  for r in "${results[@]}"; do
    read -r arr df n total max name cpu <<<"$r"
    printf '%-8s %-3s %7d %18.1f %18.1f %6.1f (%s)\n' "$arr" "$df" "$n" \
      "$(ms "$total")" "$(ms "$max")" "$(ms "$cpu")" "$name"
  done
fi
