#!/usr/bin/env bash
# booksim_noc.sh — regenerates tests/data/noc/booksim_mesh.csv, the BookSim 2 figures the mesh
# model is compared against (tests/test_noc.c, docs/noc.md "Agreement with BookSim").
#
#   scripts/booksim_noc.sh BOOKSIM [OUT.csv]     (default OUT: tests/data/noc/booksim_mesh.csv)
#
# BOOKSIM is a booksim binary built from https://github.com/booksim/booksim2 in a folder of your
# own, outside this repository (this script neither fetches nor builds it; CI never runs it).
# The commit recorded in the output is `git rev-parse HEAD` of the checkout BOOKSIM sits in, or
# $BOOKSIM_COMMIT when set. One BookSim run per row; a row's configuration is the base below
# plus its k, traffic, packet_size, sim_type and injection_rate.
#
# For every mesh (4x4, 8x8) x traffic (uniform, transpose, bitcomp, hotspot on the four centre
# nodes) x packet size (1, 4 flits), all in BookSim's latency mode:
#   1. the saturation rate S: the highest offered load BookSim still reports stable (average
#      latency under latency_thres and converged within max_samples), found by bisection on
#      [0, 1] until the unstable bound is within 1% of the stable one (rows "saturation",
#      offered = S, the highest stable rate run; the first unstable one is not written);
#   2. the latency at offered loads f x S for f = 0.05, 0.1 .. 0.8, 0.9, 0.95 (rows "latency",
#      written whether BookSim called them stable or not).
# (The accepted rate with every source backlogged is no measure of saturation here: on
# bitcomp it collapses to a third of S, and transpose's diagonal nodes send to themselves.)
# Rates are flits/node/cycle (injection_rate_uses_flits = 1). A full run takes 20-30 minutes.
set -euo pipefail

booksim=${1:?usage: booksim_noc.sh BOOKSIM [OUT.csv]}
out=${2:-"$(cd "$(dirname "$0")/.." && pwd)/tests/data/noc/booksim_mesh.csv"}
[[ -x $booksim ]] || { echo "booksim_noc.sh: '$booksim' is not an executable" >&2; exit 2; }
commit=${BOOKSIM_COMMIT:-$(git -C "$(dirname "$booksim")" rev-parse HEAD 2>/dev/null || echo unknown)}

base='topology = mesh;
n = 2;
routing_function = dor;
router = iq;
num_vcs = 2;
vc_buf_size = 8;
wait_for_tail_credit = 0;
vc_allocator = islip;
sw_allocator = islip;
alloc_iters = 1;
routing_delay = 1;
vc_alloc_delay = 1;
sw_alloc_delay = 1;
st_prepare_delay = 0;
st_final_delay = 1;
credit_delay = 0;
input_speedup = 1;
output_speedup = 1;
internal_speedup = 1.0;
injection_process = bernoulli;
injection_rate_uses_flits = 1;
sample_period = 10000;
warmup_periods = 3;
max_samples = 10;
latency_thres = 500.0;
include_queuing = 1;
seed = 1;'

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run K TRAFFIC F SIM_TYPE RATE: prints "stable accepted packet_latency network_latency hops"
run() {
    local k=$1 traffic=$2 f=$3 sim=$4 rate=$5 bs
    bs=$traffic
    if [[ $traffic == hotspot ]]; then # the four centre nodes
        local c=$((k / 2))
        bs="hotspot({{$(((c - 1) * k + c - 1)),$(((c - 1) * k + c)),$((c * k + c - 1)),$((c * k + c))}})"
    fi
    printf '%s\nk = %d;\ntraffic = %s;\npacket_size = %d;\nsim_type = %s;\ninjection_rate = %s;\n' \
        "$base" "$k" "$bs" "$f" "$sim" "$rate" > "$tmp/run.cfg"
    "$booksim" "$tmp/run.cfg" > "$tmp/run.out" 2>&1 || true
    awk '/====== Overall Traffic Statistics/ {o = 1}
         o && /^Packet latency average/ {pl = $5}
         o && /^Network latency average/ {nl = $5}
         o && /^Accepted flit rate average/ {acc = $6}
         o && /^Hops average/ {h = $4}
         END {if (o) print 1, acc, pl, nl, h; else print 0, "", "", "", ""}' "$tmp/run.out"
}

{
    echo "# BookSim 2 reference figures for npusim's mesh (tests/test_noc.c); written by scripts/booksim_noc.sh"
    echo "# booksim commit: $commit (https://github.com/booksim/booksim2)"
    echo "# command: booksim run.cfg, one run per row; run.cfg = the base below + k, traffic, packet_size and injection_rate (= offered) of the row, sim_type = latency"
    echo "# traffic hotspot = hotspot({{a,b,c,d}}) on the four centre nodes (k/2-1 .. k/2 in x and y)"
    echo "# rates in flits/node/cycle; latencies in cycles (BookSim 'Overall' averages); hops = BookSim 'Hops average' (routers visited)"
    echo "# kind saturation: offered = the highest stable rate of a bisection on [0, 1] to 1% (the saturation rate S); kind latency: offered = f x S"
    echo "# stable = 0: BookSim reported the run unstable (no figures)"
    echo "# base config:"
    sed 's/^/#   /' <<< "$base"
    echo "k,traffic,packet_flits,kind,offered,stable,accepted,packet_latency,network_latency,hops"
} > "$out"

for k in 4 8; do
    for traffic in uniform transpose bitcomp hotspot; do
        for f in 1 4; do
            lo=0 hi=1.0 best=
            while awk -v l="$lo" -v h="$hi" 'BEGIN {exit !(h - l > 0.01 * h)}'; do
                mid=$(awk -v l="$lo" -v h="$hi" 'BEGIN {printf "%.5f", (l + h) / 2}')
                read -r ok acc pl nl h < <(run "$k" "$traffic" "$f" latency "$mid")
                if [[ $ok == 1 ]]; then
                    lo=$mid best="$mid,1,$acc,$pl,$nl,$h"
                else
                    hi=$mid
                fi
            done
            [[ -n $best ]] || { echo "booksim_noc.sh: ${k}x$k $traffic $f-flit never stable" >&2; exit 1; }
            echo "$k,$traffic,$f,saturation,$best" >> "$out"
            echo "booksim_noc.sh: ${k}x$k $traffic $f-flit: saturates at $lo flits/node/cycle" >&2
            for frac in 0.05 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8 0.9 0.95; do
                rate=$(awk -v s="$lo" -v f="$frac" 'BEGIN {printf "%.5f", s * f}')
                read -r ok acc pl nl h < <(run "$k" "$traffic" "$f" latency "$rate")
                echo "$k,$traffic,$f,latency,$rate,$ok,$acc,$pl,$nl,$h" >> "$out"
            done
        done
    done
done
echo "booksim_noc.sh: wrote $out" >&2
