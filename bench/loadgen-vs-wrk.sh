#!/usr/bin/env bash
# reqcost's load generator vs wrk on nginx serving a 1 KB file over loopback HTTP/1.1 keep-alive.
# Same connection count, each client pinned to CPU 0 and nginx (one worker) to CPU 1, runs
# interleaved in pairs whose order alternates (wrk reqcost, reqcost wrk, ...). Prints, for every
# run, requests per second, client CPU per request and nginx's CPU per request (schedstat), then
# the paired reqcost/wrk ratios with 95 % intervals. When nginx's CPU is saturated, throughput
# measures the server and the machine's noise; client CPU per request measures the client.
#
# Usage: bench/loadgen-vs-wrk.sh [-c CONNECTIONS] [-d SECONDS] [-r REPETITIONS]
# shellcheck source-path=SCRIPTDIR source=lib.sh
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
conns=16 secs=5 reps=5
parse_options "[-c CONNECTIONS] [-d SECONDS] [-r REPETITIONS]" c=conns d=secs r=reps -- "$@"
need_tools nginx wrk taskset /usr/bin/time python3
need_two_cpus
loadgen=$(build_example reqcost-workload loadgen)

make_workdir
start_nginx "master_process off; events { worker_connections 4096; }" \
    "access_log off; keepalive_requests 100000000;"

results=$dir/results.tsv
: > "$results"

# nginx's CPU time so far, in ns (master_process off: one process).
server_ns() { awk '{print $1}' "/proc/$server_pid/schedstat"; }

# Prints "REQUESTS CPU_SECONDS" for one wrk run.
run_wrk() {
    /usr/bin/time -f "cpu %U %S" -o "$dir/time" taskset -c 0 wrk -t1 -c"$conns" -d"${secs}s" "$url" > "$dir/out"
    local n; n=$(awk '/requests in/ {print $1}' "$dir/out")
    grep -q "Non-2xx" "$dir/out" && { echo "wrk saw errors:" >&2; cat "$dir/out" >&2; exit 1; }
    echo "$n $(awk '/^cpu/ {print $2 + $3}' "$dir/time")"
}

run_reqcost() {
    /usr/bin/time -f "cpu %U %S" -o "$dir/time" taskset -c 0 "$loadgen" --url "$url" -c "$conns" --duration "${secs}s" --warmup 0 > "$dir/out"
    local n; n=$(awk '/^main:/ {print $2}' "$dir/out")
    grep -q "errors {}" "$dir/out" || { echo "reqcost saw errors:" >&2; cat "$dir/out" >&2; exit 1; }
    echo "$n $(awk '/^cpu/ {print $2 + $3}' "$dir/time")"
}

printf "%-8s %4s %12s %10s %18s %18s\n" tool rep requests "req/s" "client CPU us/req" "server CPU us/req"
for rep in $(seq "$reps"); do
    order="wrk reqcost"
    [ $((rep % 2)) -eq 0 ] && order="reqcost wrk"
    for tool in $order; do
        before=$(server_ns)
        read -r n cpu < <("run_$tool")
        server=$(( $(server_ns) - before ))
        printf "%s\t%s\t%s\t%s\t%s\n" "$tool" "$rep" "$n" "$cpu" "$server" >> "$results"
        awk -v t="$tool" -v r="$rep" -v n="$n" -v c="$cpu" -v s="$secs" -v srv="$server" \
            'BEGIN { printf "%-8s %4d %12d %10.0f %18.2f %18.2f\n", t, r, n, n / s, c * 1e6 / n, srv / 1e3 / n }'
    done
done

PYTHONPATH="$root/bench" python3 - "$results" "$secs" "$conns" <<'PY'
import statistics, sys
from ratio import mean_ci
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
secs, conns = float(sys.argv[2]), sys.argv[3]
runs = {(t, r): (int(n), float(c), int(s)) for t, r, n, c, s in rows}
reps = sorted({r for _, r in runs}, key=int)
figures = {
    "throughput": lambda n, c, s: n / secs,
    "client CPU per request": lambda n, c, s: c / n,
    "server CPU per request": lambda n, c, s: s / n,
}
print(f"\n{len(reps)} interleaved pairs, {conns} connections, {secs:g} s each; reqcost/wrk:")
for name, f in figures.items():
    mean, low, high = mean_ci([f(*runs["reqcost", r]) / f(*runs["wrk", r]) for r in reps])
    print(f"  {name:24} {mean:.3f}x (95% CI {low:.3f} .. {high:.3f})")
wrk_rps = statistics.median(runs["wrk", r][0] / secs for r in reps)
rq_rps = statistics.median(runs["reqcost", r][0] / secs for r in reps)
print(f"  medians: wrk {wrk_rps:.0f} req/s, reqcost {rq_rps:.0f} req/s")
PY
