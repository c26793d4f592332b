#!/usr/bin/env bash
# Why `attach` full time and `run --probes-full-time` show different costs on
# bench/windows-overhead.sh (issue 28): the probes' work per request against what each way's
# CPU figure says, in one run.
#
# Debian's nginx (one worker pinned to CPU 1, bench/lib.sh's nginx_keepalive_1k), four ways
# interleaved in rotating order, the load always pinned to CPU 0:
#   run-bare   `reqcost run --pid --no-probes`: the CPU per request its record reports;
#   run-full   `reqcost run --pid --probes-full-time`: the same, probed;
#   wrk-bare   wrk -t1 alone: nginx's CPU per request by schedstat (tree CPU / wrk's requests);
#   attach     wrk under `reqcost attach` full time: the same, probed.
# For the probed ways, the record's probe cost: the BPF programs' runs and run time on nginx's
# events per request (timed on one run in 16). The summary gives, per pair, the ratio to bare
# and what the probed figure carries beyond bare plus the programs' own time (the trap, cache
# effects, a different batching of the load): if attach did extra work per event, its program
# time per request would be higher than run's.
#
# Usage: bench/run-vs-attach.sh [-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=5 rounds=3 conns=8
parse_options "[-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]" \
    d=secs r=rounds c=conns -- "$@"
need_tools nginx wrk taskset python3 bpftool
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
# REQCOST=PATH runs that binary instead of a release build (e.g. one built before a change).
reqcost=${REQCOST:-$(build_reqcost)}

make_workdir
nginx_keepalive_1k

# figures RECORD [REQUESTS NS]: "ns/request tree_ns/request tree_runs/request" of a record's
# main phase; with REQUESTS and NS (measured outside), those are the requests and CPU.
figures() {
    python3 - "$@" <<'PY'
import json, sys
ph = json.load(open(sys.argv[1]))['phases'][0]
cost = ph['server'].get('probe_cost') or {}
if len(sys.argv) > 2:
    requests, ns = int(sys.argv[2]), int(sys.argv[3])
else:
    requests, ns = ph['client']['requests'], ph['per_request']['cpu_total_us'] * 1000
print(round(ns), round(cost.get('tree_ns', 0) / requests), round(cost.get('tree_runs', 0) / requests, 2))
PY
}

reported() {
    quiet
    taskset -c 0 "$reqcost" run --url "$url" --pid "$server_pid" --duration "${secs}s" \
        -c "$conns" --warmup 2000 --no-slow-phase --no-sample -o "$dir/run.json" "$@" > /dev/null
    figures "$dir/run.json"
}

attached() {
    local a load
    quiet
    taskset -c 0 "$reqcost" attach --pid "$server_pid" --duration "$((secs + 2))s" \
        --no-sample -o "$dir/live.json" > /dev/null 2> "$dir/attach.err" &
    a=$!
    wait_attached "$a" "$dir/attach.err"
    load=$(wrk_load)
    wait "$a"
    figures "$dir/live.json" $load
}

measure() {
    case $1 in
        run-bare) reported --no-probes ;;
        run-full) reported --probes-full-time ;;
        wrk-bare) quiet; echo "$(wrk_load | cut -d' ' -f2) 0 0" ;;
        attach) attached ;;
    esac
}

taskset -c 0 wrk -t1 -c"$conns" -d2s "$url" > /dev/null
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 KB file, -c$conns keep-alive, ${secs}s runs, $rounds rounds"
echo "# round way ns/request tree_ns/request tree_runs/request"
ways=(run-bare run-full wrk-bare attach)
for i in $(seq "$rounds"); do
    k=$((i % ${#ways[@]}))
    for way in "${ways[@]:k}" "${ways[@]:0:k}"; do
        echo "$i $way $(measure "$way")" | tee -a "$dir/all"
    done
done
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"

PYTHONPATH="$root/bench" python3 - "$dir/all" <<'PY'
import collections, statistics, sys
from ratio import mean_ci
v = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    i, way, ns, tree_ns, runs = line.split()
    v[way][i] = (float(ns), float(tree_ns), float(runs))
med = statistics.median
for probed, bare in (("run-full", "run-bare"), ("attach", "wrk-bare")):
    rounds = sorted(v[probed])
    mean, low, high = mean_ci([v[probed][i][0] / v[bare][i][0] for i in rounds])
    beyond = med(v[probed][i][0] - v[bare][i][0] - v[probed][i][1] for i in rounds)
    print(f"{probed:9} / {bare:9} {mean:.3f} (95 % CI {low:.3f}-{high:.3f}); bare "
          f"{med(v[bare][i][0] for i in rounds) / 1000:.2f} µs, probed "
          f"{med(v[probed][i][0] for i in rounds) / 1000:.2f} µs; programs on nginx's events "
          f"{med(v[probed][i][1] for i in rounds) / 1000:.2f} µs/request in "
          f"{med(v[probed][i][2] for i in rounds):.2f} runs; beyond bare + programs "
          f"{beyond / 1000:+.2f} µs/request")
PY
