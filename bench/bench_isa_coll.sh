#!/usr/bin/env bash
# bench_isa_coll.sh — speed and memory of collectives lowered to ISA programs and run on the
# core model (`npusim collective --isa`, one program per chip), against the flow-level engine
# on the same network in the same run.
#
#   bench/bench_isa_coll.sh [--json] [BUILD_DIR]      (default BUILD_DIR: build)
#
# A 16 MiB ring all-reduce on tiny's ring (8 GB/s links, one core per chip) at 64, 256 and
# 1024 chips: wall time, peak memory (max RSS) and messages per second of wall time
# (2 (p - 1) messages per chip) for both engines, and their ratio.
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
[ -x "$npusim" ] || { echo "bench_isa_coll.sh: $npusim not built (run scripts/setup.sh)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# wall seconds and max RSS (KiB) of one run: "SECONDS KIB"
measure() {
  /usr/bin/time -f '%e %M' -o "$tmp/t" "$npusim" collective --set chip.cores=1 --chips "$1" \
    --op all_reduce --min-bytes 16M --max-bytes 16M "${@:2}" >/dev/null
  cat "$tmp/t"
}

rows=()
for p in 64 256 1024; do
  read -r isa_s isa_kb <<<"$(measure "$p" --isa)"
  read -r flow_s flow_kb <<<"$(measure "$p")"
  rows+=("$p $isa_s $isa_kb $flow_s $flow_kb")
done

rate() { awk -v p="$1" -v s="$2" 'BEGIN { printf "%.0f", (s > 0 ? 2 * (p - 1) * p / s : 0) }'; }
if (( json )); then
  printf '{"op": "all_reduce", "bytes": 16777216, "runs": ['
  sep=""
  for r in "${rows[@]}"; do
    read -r p is ik fs fk <<<"$r"
    printf '%s{"chips": %d, "isa_wall_s": %s, "isa_max_rss_kib": %d, "isa_messages_per_s": %s, "flow_wall_s": %s, "flow_max_rss_kib": %d, "flow_messages_per_s": %s}' \
      "$sep" "$p" "$is" "$ik" "$(rate "$p" "$is")" "$fs" "$fk" "$(rate "$p" "$fs")"
    sep=", "
  done
  printf ']}\n'
else
  echo "16 MiB ring all-reduce, tiny's ring, one core per chip: ISA programs on the core model vs the flow engine"
  printf '%6s %12s %12s %14s %12s %12s %14s %8s\n' chips "isa (s)" "isa (MiB)" "isa (msg/s)" \
    "flow (s)" "flow (MiB)" "flow (msg/s)" "isa/flow"
  for r in "${rows[@]}"; do
    read -r p is ik fs fk <<<"$r"
    printf '%6d %12.2f %12.1f %14s %12.2f %12.1f %14s %7.1fx\n' "$p" "$is" \
      "$(awk -v k="$ik" 'BEGIN { print k / 1024 }')" "$(rate "$p" "$is")" "$fs" \
      "$(awk -v k="$fk" 'BEGIN { print k / 1024 }')" "$(rate "$p" "$fs")" \
      "$(awk -v a="$is" -v b="$fs" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')"
  done
fi
