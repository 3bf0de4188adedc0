#!/usr/bin/env bash
# bench_serve.sh — the CPU time of `npusim serve` over 10,000 requests of a ShareGPT-like
# length distribution (issue 30, done-when 4; see bench/README.md), run twice: with a fresh
# kernel-timing cache (every distinct kernel compiled and simulated on the core model) and
# again with that cache warm (the scheduler and the composition of iteration times alone).
#
#   bench/bench_serve.sh                  llama2-13b on h100-sxm, 10,000 requests at 20/s
#   bench/bench_serve.sh ARGS...          npusim serve ARGS (replacing the defaults' model,
#                                         arch, rate, ...; the requests stay 10,000 unless
#                                         ARGS give --requests)
#   NPUSIM=build-release/sim/npusim bench/bench_serve.sh ...
#
# ShareGPT-like lengths: lognormal prompts of mean 161 tokens and outputs of mean 338 tokens,
# the means the vLLM paper reports for its ShareGPT workload (Kwon et al., "Efficient Memory
# Management for Large Language Model Serving with PagedAttention", SOSP 2023, Fig. 11); the
# standard deviations (equal to the means: a coefficient of variation of 1, the long tail of
# chat lengths) are this script's assumption, not the paper's.
#
# Prints wall time, user + system CPU and maximum resident memory of each run, then the
# summary of the warm one (its --json output kept in $OUT, default a fresh temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."

npusim=${NPUSIM:-build/sim/npusim}
out=${OUT:-$(mktemp -d /tmp/npusim_bench_serve.XXXXXX)}
mkdir -p "$out"
dist=(--prompt lognormal:161:161 --output lognormal:338:338 --requests 10000 --seed 1)
if (($#)); then
  args=("$@")
else
  args=(--model llama2-13b --arch h100-sxm --rate 20)
fi
case " ${args[*]} " in *" --requests "*) dist=(--prompt lognormal:161:161 --output lognormal:338:338 --seed 1) ;; esac
rm -f "$out/kernels.cache"
for pass in cold warm; do
  /usr/bin/time -f '%e %U %S %M' -o "$out/$pass.time" \
    "$npusim" serve "${args[@]}" "${dist[@]}" --kernel-cache "$out/kernels.cache" \
    --json >"$out/$pass.json"
  read -r wall user sys rss <"$out/$pass.time"
  printf '%s kernel cache: wall %.1f s, CPU %.1f s, max RSS %d MiB\n' "$pass" "$wall" \
    "$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" $((rss / 1024))
done
printf 'npusim serve %s %s\n' "${args[*]}" "${dist[*]}"
python3 - "$out/warm.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("%d of %d requests in %.1f s simulated: %d iterations, %d preemptions, %d shapes timed"
      % (d["finished"], d["requests"], d["duration_s"], d["iterations"], d["preemptions"],
         d["shapes_timed"]))
print("throughput %.0f output tokens/s, %.2f requests/s; kv cache %.1f %% mean, %.1f %% peak"
      % (d["output_tokens_per_s"], d["requests_per_s"], 100 * d["kv_mean"], 100 * d["kv_peak"]))
for k in ("ttft_s", "tpot_s", "e2e_s"):
    s = d[k]
    print("%-6s mean %.4g s, p50 %.4g s, p99 %.4g s" % (k[:-2], s["mean"], s["p50"], s["p99"]))
PY
echo "(the runs' --json output: $out/cold.json, $out/warm.json)"
