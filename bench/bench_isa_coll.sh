#!/usr/bin/env bash
# bench_isa_coll.sh — speed and memory of collectives lowered to ISA programs and run on the
# core model (`npusim collective --isa`: one SPMD program of 26 instructions that every chip
# runs), against the flow-level engine on the same network in the same run.
#
#   bench/bench_isa_coll.sh [--json] [BUILD_DIR]      (default BUILD_DIR: build)
#
# A 16 MiB ring all-reduce on tiny's ring (8 GB/s links, one core per chip) at 64, 256 and
# 1024 chips: wall time, CPU time (user + system: what a busy shared machine changes least),
# peak memory (max RSS) and messages per second of CPU time (2 (p - 1) messages per chip) for
# both engines, and their CPU-time ratio. Then memory against message count: at 1024 chips a
# reduce-scatter sends p - 1 messages per chip, an all-reduce 2 (p - 1) over the same ring
# and the same program; the difference in peak memory per million more messages. A table of
# every message would be about 60 MiB per million; message records are recycled and the
# program does not grow with the chips, so the difference is about zero: memory is flat in
# the number of messages.
set -euo pipefail
cd "$(dirname "$0")/.."
json=0
build=build
for a in "$@"; do
  case "$a" in
    --json) json=1 ;;
    -*) echo "bench_isa_coll.sh: unknown option '$a'" >&2; exit 2 ;;
    *) build=$a ;;
  esac
done
npusim=$build/sim/npusim
if [ ! -x "$npusim" ]; then
  echo "bench_isa_coll.sh: $npusim not built (run scripts/setup.sh)" >&2
  exit 2
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# wall seconds, CPU seconds and max RSS (KiB) of one run: "WALL CPU KIB"
measure() {
  /usr/bin/time -f '%e %U %S %M' -o "$tmp/t" "$npusim" collective --set chip.cores=1 \
    --chips "$1" --min-bytes 16M --max-bytes 16M "${@:2}" >/dev/null
  awk '{ printf "%s %.2f %s\n", $1, $2 + $3, $4 }' "$tmp/t"
}

rows=()
for p in 64 256 1024; do
  [ -t 2 ] && echo "bench_isa_coll: $p chips..." >&2
  read -r isa_w isa_s isa_kb <<<"$(measure "$p" --op all_reduce --isa)"
  read -r flow_w flow_s flow_kb <<<"$(measure "$p" --op all_reduce)"
  rows+=("$p $isa_w $isa_s $isa_kb $flow_w $flow_s $flow_kb")
done
[ -t 2 ] && echo "bench_isa_coll: memory against message count..." >&2
read -r _ rs_s rs_kb <<<"$(measure 1024 --op reduce_scatter --isa)"
ar_kb=$(awk '{ print $4 }' <<<"${rows[2]}")
p=1024
mib_per_m=$(awk -v a="$ar_kb" -v b="$rs_kb" -v p="$p" \
  'BEGIN { printf "%.1f", (a - b) / 1024 / ((p - 1) * p / 1e6) }')

# messages per CPU second; "-" when the run is too short for time's 10 ms resolution
rate() {
  awk -v p="$1" -v s="$2" 'BEGIN { if (s >= 0.05) printf "%.0f", 2 * (p - 1) * p / s; else printf "-" }'
}
mib() { awk -v k="$1" 'BEGIN { print k / 1024 }'; }
if (( json )); then
  printf '{"op": "all_reduce", "bytes": 16777216, "runs": ['
  sep=""
  for r in "${rows[@]}"; do
    read -r p iw is ik fw fs fk <<<"$r"
    printf '%s{"chips": %d, "messages": %d, ' "$sep" "$p" "$((2 * (p - 1) * p))"
    printf '"isa_wall_s": %s, "isa_cpu_s": %s, "isa_max_rss_kib": %d, ' "$iw" "$is" "$ik"
    printf '"flow_wall_s": %s, "flow_cpu_s": %s, "flow_max_rss_kib": %d}' "$fw" "$fs" "$fk"
    sep=", "
  done
  printf '], "memory": {"chips": 1024, "reduce_scatter_max_rss_kib": %d, ' "$rs_kb"
  printf '"all_reduce_max_rss_kib": %d, "mib_per_million_messages": %s}}\n' "$ar_kb" "$mib_per_m"
else
  echo "16 MiB ring all-reduce, tiny's ring, one core per chip:" \
    "ISA programs on the core model vs the flow engine"
  printf '%6s %9s %9s %10s %14s %9s %9s %10s %14s %8s\n' chips "isa wall" "isa cpu" "isa mem" \
    "isa msg/cpu-s" "flow wall" "flow cpu" "flow mem" "flow msg/cpu-s" "isa/flow"
  for r in "${rows[@]}"; do
    read -r p iw is ik fw fs fk <<<"$r"
    ratio=$(awk -v a="$is" -v b="$fs" 'BEGIN { if (b >= 0.05) printf "%.1fx", a / b; else printf "-" }')
    printf '%6d %8.2fs %8.2fs %7.1f MiB %14s %8.2fs %8.2fs %7.1f MiB %14s %8s\n' "$p" "$iw" "$is" \
      "$(mib "$ik")" "$(rate "$p" "$is")" "$fw" "$fs" "$(mib "$fk")" "$(rate "$p" "$fs")" "$ratio"
  done
  printf 'memory at 1024 chips: reduce-scatter (1.0 M messages) %.1f MiB, all-reduce (2.1 M) ' \
    "$(mib "$rs_kb")"
  printf '%.1f MiB: %s MiB per million messages\n' "$(mib "$ar_kb")" "$mib_per_m"
fi
