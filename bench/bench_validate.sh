#!/usr/bin/env bash
# bench_validate.sh — the wall and CPU time of the whole `npusim validate` run, per suite
# (issue 24, done-when 7; see bench/README.md). Each suite runs in a process of its own with
# no kernel cache (a first run), its output kept beside the figures:
#
#   bench/bench_validate.sh                 every suite of `npusim validate --list`
#   bench/bench_validate.sh SUITE ...       these suites
#   NPUSIM=build-release/sim/npusim bench/bench_validate.sh
#   JOBS=2 bench/bench_validate.sh          each suite with `npusim validate -j 2`
#
# Prints one line per suite (rows, wall, user + system CPU, max RSS) and the total; each
# suite's `npusim validate --suite S` output is left in $OUT (default: a fresh temporary
# folder) as S.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

npusim=${NPUSIM:-build/sim/npusim}
out=${OUT:-$(mktemp -d /tmp/npusim_bench_validate.XXXXXX)}
mkdir -p "$out"
if (($#)); then
  suites=("$@")
else
  mapfile -t suites < <("$npusim" validate --list --json |
    sed -n 's/^    "name": "\(.*\)",$/\1/p')
fi

printf '%-20s %6s %12s %12s %10s\n' suite rows wall CPU "max RSS"
total_wall=0
total_cpu=0
for s in "${suites[@]}"; do
  /usr/bin/time -f '%e %U %S %M' -o "$out/$s.time" "$npusim" validate -j "${JOBS:-1}" --suite "$s" >"$out/$s.txt"
  read -r wall user sys rss <"$out/$s.time"
  rows=$(sed -n 's/^# npusim validate: \([0-9,]*\) rows\{0,1\} .*/\1/p' "$out/$s.txt")
  cpu=$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')
  printf '%-20s %6s %10.1f s %10.1f s %6d MiB\n' "$s" "$rows" "$wall" "$cpu" $((rss / 1024))
  total_wall=$(awk -v a="$total_wall" -v b="$wall" 'BEGIN { print a + b }')
  total_cpu=$(awk -v a="$total_cpu" -v b="$cpu" 'BEGIN { print a + b }')
done
printf '%-20s %6s %10.1f s %10.1f s\n' total "" "$total_wall" "$total_cpu"
echo "(each suite's output: $out/SUITE.txt)"
