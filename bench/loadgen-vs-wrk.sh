#!/usr/bin/env bash
# reqcost's load generator vs wrk on nginx serving a 1 KB file over loopback HTTP/1.1 keep-alive.
# Same connection count and client threads (reqcost --threads N against wrk -tN, for each N of
# -t), runs interleaved in pairs whose order alternates (wrk reqcost, reqcost wrk, ...). With one
# nginx worker (-w 1), each client is pinned to CPU 0 and nginx to CPU 1; with two (-w 2), one
# worker is pinned to each of CPUs 0 and 1 and the clients run on both, sharing them with nginx.
# Prints, for every run, requests per second, client CPU per request and nginx's CPU per request
# (schedstat of all its processes), then per thread count the paired reqcost/wrk ratios with 95 %
# intervals. When nginx's CPU is saturated, throughput measures the server and the machine's
# noise; client CPU per request measures the client.
#
# Usage: bench/loadgen-vs-wrk.sh [-c CONNECTIONS] [-d SECONDS] [-r REPETITIONS] [-t THREADS,...]
#        [-w 1|2]
# shellcheck source-path=SCRIPTDIR source=lib.sh
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
conns=16 secs=5 reps=5 threads=1 workers=1
parse_options "[-c CONNECTIONS] [-d SECONDS] [-r REPETITIONS] [-t THREADS,...] [-w 1|2]" \
    c=conns d=secs r=reps t=threads w=workers -- "$@"
need_tools nginx wrk taskset /usr/bin/time python3
need_two_cpus
case $workers in
    1) client_cpus=0 main="master_process off;" ;;
    2) client_cpus=0,1 main="worker_cpu_affinity 01 10;" ;;
    *) echo "$0: -w takes 1 or 2 (nginx workers), not $workers" >&2; exit 2 ;;
esac
loadgen=$(build_example reqcost-workload loadgen)

make_workdir
start_nginx "$main events { worker_connections 4096; }" \
    "access_log off; keepalive_requests 100000000;" "$workers"

results=$dir/results.tsv
: > "$results"

# nginx's CPU time so far, in ns: its master and, with -w 2, its workers.
server_ns() {
    local pid sum=0
    for pid in "$server_pid" $(cat /proc/"$server_pid"/task/*/children); do
        sum=$((sum + $(awk '{print $1}' "/proc/$pid/schedstat")))
    done
    echo "$sum"
}

# Prints "REQUESTS CPU_SECONDS" for one wrk run with `t` threads.
run_wrk() {
    /usr/bin/time -f "cpu %U %S" -o "$dir/time" taskset -c "$client_cpus" wrk -t"$t" -c"$conns" -d"${secs}s" "$url" > "$dir/out"
    local n; n=$(awk '/requests in/ {print $1}' "$dir/out")
    grep -q "Non-2xx" "$dir/out" && { echo "wrk saw errors:" >&2; cat "$dir/out" >&2; exit 1; }
    echo "$n $(awk '/^cpu/ {print $2 + $3}' "$dir/time")"
}

run_reqcost() {
    /usr/bin/time -f "cpu %U %S" -o "$dir/time" taskset -c "$client_cpus" "$loadgen" --url "$url" -c "$conns" --threads "$t" --duration "${secs}s" --warmup 0 > "$dir/out"
    local n; n=$(awk '/^main:/ {print $2}' "$dir/out")
    grep -q "errors {}" "$dir/out" || { echo "reqcost saw errors:" >&2; cat "$dir/out" >&2; exit 1; }
    echo "$n $(awk '/^cpu/ {print $2 + $3}' "$dir/time")"
}

printf "%-8s %7s %4s %12s %10s %18s %18s\n" tool threads rep requests "req/s" "client CPU us/req" "server CPU us/req"
for rep in $(seq "$reps"); do
    for t in ${threads//,/ }; do
        order="wrk reqcost"
        [ $((rep % 2)) -eq 0 ] && order="reqcost wrk"
        for tool in $order; do
            before=$(server_ns)
            read -r n cpu < <("run_$tool")
            server=$(( $(server_ns) - before ))
            printf "%s\t%s\t%s\t%s\t%s\t%s\n" "$tool" "$t" "$rep" "$n" "$cpu" "$server" >> "$results"
            awk -v tool="$tool" -v t="$t" -v r="$rep" -v n="$n" -v c="$cpu" -v s="$secs" -v srv="$server" \
                'BEGIN { printf "%-8s %7d %4d %12d %10.0f %18.2f %18.2f\n", tool, t, r, n, n / s, c * 1e6 / n, srv / 1e3 / n }'
        done
    done
done

PYTHONPATH="$root/bench" python3 - "$results" "$secs" "$conns" "$workers" <<'PY'
import statistics, sys
from ratio import mean_ci
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
secs, conns, workers = float(sys.argv[2]), sys.argv[3], sys.argv[4]
runs = {(tool, t, r): (int(n), float(c), int(s)) for tool, t, r, n, c, s in rows}
threads = sorted({t for _, t, _ in runs}, key=int)
reps = sorted({r for _, _, r in runs}, key=int)
figures = {
    "throughput": lambda n, c, s: n / secs,
    "client CPU per request": lambda n, c, s: c / n,
    "server CPU per request": lambda n, c, s: s / n,
}
for t in threads:
    print(f"\n{len(reps)} interleaved pairs, {t} client thread(s), {conns} connections, "
          f"{workers} nginx worker(s), {secs:g} s each; reqcost/wrk:")
    for name, f in figures.items():
        ratios = [f(*runs["reqcost", t, r]) / f(*runs["wrk", t, r]) for r in reps]
        mean, low, high = mean_ci(ratios)
        print(f"  {name:24} {mean:.3f}x (95% CI {low:.3f} .. {high:.3f})")
    wrk_rps = statistics.median(runs["wrk", t, r][0] / secs for r in reps)
    rq_rps = statistics.median(runs["reqcost", t, r][0] / secs for r in reps)
    print(f"  medians: wrk {wrk_rps:.0f} req/s, reqcost {rq_rps:.0f} req/s")
if len(threads) > 1:
    first, last = threads[0], threads[-1]
    print(f"\n{last} threads / {first} thread, requests per second (paired, same tool):")
    for tool in ("wrk", "reqcost"):
        ratios = [runs[tool, last, r][0] / runs[tool, first, r][0] for r in reps]
        mean, low, high = mean_ci(ratios)
        print(f"  {tool:8} {mean:.3f}x (95% CI {low:.3f} .. {high:.3f})")
PY
