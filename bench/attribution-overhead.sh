#!/usr/bin/env bash
# What per-request attribution adds to the probes' cost, and how fast user space drains events.
#
# Debian's nginx (one worker, sendfile and access log on) serves a 1 KB file over loopback
# keep-alive connections to wrk at full rate; nginx is pinned to CPU 1, wrk to CPU 0. Every run
# has the probes attached through crates/probes/examples/requests.rs, with attribution off or
# on (ProbeOptions::attribute, a load-time switch), draining the ring buffer every 100 ms; runs
# are interleaved in pairs (off/on, on/off, ...). Each run reports the server CPU per request
# (schedstat run time of the nginx tree / requests wrk completed). The result is the paired
# on/off ratio with a 95 % confidence interval, and the drain rate of the "on" runs (events
# decoded per second of time spent draining).
#
# Usage: bench/attribution-overhead.sh [-d SECONDS_PER_RUN] [-r PAIRS] [-c CONNECTIONS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=5 pairs=10 conns=8
parse_options "[-d SECONDS_PER_RUN] [-r PAIRS] [-c CONNECTIONS]" d=secs r=pairs c=conns -- "$@"
need_tools nginx wrk taskset python3 bpftool
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
watcher=$(build_example reqcost-probes requests)

make_workdir
nginx_keepalive_1k

# One wrk run with the probes attached, attribution $1 (on|off); prints
# "requests cpu_ns_per_request events dropped drain_ns".
run() {
    local load w
    quiet
    "$watcher" "$server_pid" $((secs + 1)) "$1" > "$dir/watcher.out" 2> "$dir/watcher.err" &
    w=$!
    wait_attached "$w" "$dir/watcher.err"
    load=$(wrk_load)
    wait "$w"
    echo "$load $(cat "$dir/watcher.out")"
}

taskset -c 0 wrk -t1 -c"$conns" -d2s "$url" > /dev/null

echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 KB file, wrk -t1 -c$conns keep-alive, ${secs}s runs, $pairs pairs"
echo "# pair off: requests ns/req events dropped drain_ns | on: requests ns/req events dropped drain_ns"
: > "$dir/pairs"
for i in $(seq "$pairs"); do
    if [ $((i % 2)) -eq 1 ]; then
        off=$(run off); on=$(run on)
    else
        on=$(run on); off=$(run off)
    fi
    echo "$i $off $on" | tee -a "$dir/pairs"
done

PYTHONPATH="$root/bench" python3 - "$dir/pairs" <<'PY'
import statistics, sys
from ratio import mean_ci
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
# Columns: pair, off (requests, ns/req, events, dropped, drain_ns), on (the same).
mean, low, high = mean_ci([r[7] / r[2] for r in rows])
print(f"attribution off median {statistics.median(r[2] for r in rows) / 1000:.2f} µs CPU/request")
print(f"attribution on  median {statistics.median(r[7] for r in rows) / 1000:.2f} µs CPU/request")
print(f"on/off ratio {mean:.3f} (95% CI {low:.3f} .. {high:.3f}), "
      f"attribution adds {100 * (mean - 1):.1f} %")
events = sum(r[8] for r in rows)
print(f"on runs: {events / sum(r[6] for r in rows):.3f} events per request wrk completed, "
      f"{sum(r[9] for r in rows):.0f} dropped")
print(f"drain: {events / (sum(r[10] for r in rows) / 1e9):,.0f} events per second of draining "
      f"(ring buffer read + decode into RequestEvent)")
PY
