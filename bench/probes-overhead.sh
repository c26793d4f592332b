#!/usr/bin/env bash
# What reqcost's eBPF probes cost the server they measure.
#
# Debian's nginx (one worker, sendfile and access log on, as Debian ships it) serves a 1 KB file
# over loopback keep-alive connections to wrk at full rate; nginx is pinned to CPU 1, wrk to
# CPU 0. Runs are interleaved in pairs (bare/probed, probed/bare, ...); each reports the server
# CPU per request (schedstat run time of the nginx tree / requests wrk completed). The result is
# the paired probed/bare ratio with a 95 % confidence interval. The probed runs attach
# reqcost-probes through crates/probes/examples/watch.rs (Probes::attach, two reads).
# Then the same workload once under `strace -f -c` and once under `perf trace -s`, as anchors.
#
# With -m SECONDS, instead: the probes stay attached for SECONDS of continuous load (3600 for the
# one-hour check), read every 60 s, and the script prints the watcher's resident memory and its
# maps' kernel memory at the first and the last read.
#
# Usage: bench/probes-overhead.sh [-d SECONDS_PER_RUN] [-r PAIRS] [-c CONNECTIONS] [-m SECONDS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=5 pairs=10 conns=8 memory=
parse_options "[-d SECONDS_PER_RUN] [-r PAIRS] [-c CONNECTIONS] [-m SECONDS]" \
    d=secs r=pairs c=conns m=memory -- "$@"
need_tools nginx wrk taskset python3 strace perf bpftool
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
watch=$(build_example reqcost-probes watch)

make_workdir
nginx_keepalive_1k

bare() { quiet; wrk_load; }

probed() {
    local out
    quiet
    "$watch" "$server_pid" $((secs + 3)) > "$dir/watch.json" 2> "$dir/watch.err" &
    local w=$!
    wait_attached "$w" "$dir/watch.err"
    out=$(wrk_load)
    wait "$w"
    echo "$out"
}

# Runs an attached tracer around one load; $1 names it, the rest is its command before -p PID.
anchored() {
    local name=$1; shift
    "$@" -p "$worker" -o "$dir/$name.txt" 2> "$dir/$name.err" &
    local t=$!
    sleep 1
    local out
    out=$(wrk_load)
    kill -INT "$t"
    wait "$t" 2>/dev/null || true
    echo "$out"
}

taskset -c 0 wrk -t1 -c"$conns" -d2s "$url" > /dev/null

if [ -n "$memory" ]; then
    echo "# memory: probes attached for ${memory}s of wrk -t1 -c$conns load, read every 60 s"
    "$watch" "$server_pid" "$memory" 60 > "$dir/watch.json" 2> "$dir/watch.err" &
    w=$!
    until grep -q attached "$dir/watch.err" 2>/dev/null; do sleep 0.05; done
    taskset -c 0 wrk -t1 -c"$conns" -d"$((memory + 5))s" "$url" | grep "requests in"
    wait "$w"
    grep "t=" "$dir/watch.err" | sed -n '1p;$p'
    exit 0
fi

echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 KB file, wrk -t1 -c$conns keep-alive, ${secs}s runs, $pairs pairs"
echo "# pair bare_requests bare_ns/req probed_requests probed_ns/req"
: > "$dir/pairs"
for i in $(seq "$pairs"); do
    if [ $((i % 2)) -eq 1 ]; then
        b=$(bare); p=$(probed)
    else
        p=$(probed); b=$(bare)
    fi
    echo "$i $b $p" | tee -a "$dir/pairs"
done
syscalls=$(python3 -c "
import json; k = json.load(open('$dir/watch.json'))
print(sum(s['count'] for s in k['syscalls']))")

echo "# anchors: one run each"
st=$(anchored strace strace -f -c)
pt=$(anchored perf-trace perf trace -s)
b=$(bare)

PYTHONPATH="$root/bench" python3 - "$dir/pairs" "$st" "$pt" "$b" "$syscalls" <<'PY'
import statistics, sys
from ratio import mean_ci
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
mean, low, high = mean_ci([r[4] / r[2] for r in rows])
bare = statistics.median(r[2] for r in rows)
probed = statistics.median(r[4] for r in rows)
print(f"bare   median {bare / 1000:.2f} µs CPU/request")
print(f"probed median {probed / 1000:.2f} µs CPU/request")
print(f"probed/bare ratio {mean:.3f} (95% CI {low:.3f} .. {high:.3f}), "
      f"overhead {100 * (mean - 1):.1f} % (target <= 2 %)")
last_probed_requests = rows[-1][3]
print(f"syscalls per request seen by the probes (last probed run): "
      f"{int(sys.argv[5]) / last_probed_requests:.2f}")
b_req, b_ns = map(float, sys.argv[4].split())
for name, arg in (("strace -f -c", sys.argv[2]), ("perf trace -s", sys.argv[3])):
    req, ns = map(float, arg.split())
    print(f"{name}: {ns / 1000:.2f} µs CPU/request ({ns / b_ns:.1f}x bare), "
          f"throughput {req / b_req:.3f}x bare")
PY
