#!/usr/bin/env bash
# bench_asm.sh — the assembler's time against the number of kernels in a program (one core,
# N kernels of one instruction each): it grows linearly with N.
#
#   bench/bench_asm.sh [N ...]    kernel counts (default 25000 50000 100000 200000)
set -euo pipefail
cd "$(dirname "$0")/.."
npusim=${NPUSIM:-build/sim/npusim}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
counts=("$@")
((${#counts[@]})) || counts=(25000 50000 100000 200000)
printf '%10s %12s %14s\n' kernels "wall (s)" "us per kernel"
for n in "${counts[@]}"; do
  awk -v n="$n" 'BEGIN { print ".core 0"; for (i = 0; i < n; i++) printf ".kernel k%d\nnop\n", i;
                         print "halt" }' > "$tmp/k.s"
  t0=$(date +%s.%N)
  "$npusim" asm "$tmp/k.s" -o "$tmp/k.elf"
  t1=$(date +%s.%N)
  awk -v n="$n" -v a="$t0" -v b="$t1" 'BEGIN { printf "%10d %12.3f %14.2f\n", n, b - a, (b - a) * 1e6 / n }'
done
