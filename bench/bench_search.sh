#!/usr/bin/env bash
# bench_search.sh — the wall and CPU time of `npusim search` (issue 28, done-when 1; see
# bench/README.md), its counts and its best strategy:
#
#   bench/bench_search.sh                   GPT-3 175B on the 1,024 chips of a100-cluster,
#                                           batch 1536, --top 10, -j 2 (the issue's case:
#                                           done-when 1 asks <= 5 minutes on 2 cores)
#   bench/bench_search.sh ARGS...           npusim search ARGS (model, arch, chips, batch, ...)
#   NPUSIM=build-release/sim/npusim JOBS=1 bench/bench_search.sh ...
#
# Prints the wall time, user + system CPU (the search's and its workers') and maximum
# resident memory, then the counts, the kernels timed and the ranking of the search's --json
# output (kept in $OUT, default a fresh temporary folder, as search.json). KCACHE=FILE passes
# --kernel-cache FILE (a warm file: no kernel compiled or simulated again).
set -euo pipefail
cd "$(dirname "$0")/.."

npusim=${NPUSIM:-build/sim/npusim}
out=${OUT:-$(mktemp -d /tmp/npusim_bench_search.XXXXXX)}
mkdir -p "$out"
if (($#)); then
  args=("$@")
else
  args=(--model gpt3-175b --arch a100-cluster --chips 1024 --batch 1536 --top 10)
fi
jobs=${JOBS:-2}
if [[ -n "${KCACHE:-}" ]]; then
  args+=(--kernel-cache "$KCACHE")
fi
/usr/bin/time -f '%e %U %S %M' -o "$out/search.time" \
  "$npusim" search "${args[@]}" -j "$jobs" --json >"$out/search.json"
read -r wall user sys rss <"$out/search.time"
printf 'npusim search %s -j %s\n' "${args[*]}" "$jobs"
printf 'wall %.1f s, CPU %.1f s, max RSS %d MiB\n' "$wall" \
  "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" $((rss / 1024))
python3 - "$out/search.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("candidates %d: %d illegal, %d oom, %d pruned by the cheap bound, %d by the tight "
      "bound, %d simulated, %d failed" % (d["candidates"], d["illegal"], d["oom"],
      d["pruned_cheap"], d["pruned_tight"], d["simulated"], d["failed"]))
print("kernels %d distinct (%d compiled and simulated in the search's own process, the rest "
      "by its workers or from the cache file)" % (d["kernels"], d["kernels_simulated"]))
for c in d["ranking"][:d["top"]]:
    print("%3d  %.6g s  %s" % (c["rank"], c["step_time_s"], c["strategy"]))
PY
echo "(the search's --json output: $out/search.json)"
