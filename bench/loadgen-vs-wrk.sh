#!/usr/bin/env bash
# reqcost's load generator vs wrk on nginx serving a 1 KB file over loopback HTTP/1.1 keep-alive.
# Same connection count, each client pinned to CPU 0 and nginx (one worker) to CPU 1, runs
# interleaved (wrk, reqcost, wrk, reqcost, ...). Prints requests per second and client CPU per
# request for every run, then the medians and the reqcost/wrk ratios.
#
# Usage: bench/loadgen-vs-wrk.sh [-c CONNECTIONS] [-d SECONDS] [-r REPETITIONS]
set -euo pipefail

conns=16 secs=5 reps=5
while getopts "c:d:r:" opt; do
    case $opt in
        c) conns=$OPTARG ;;
        d) secs=$OPTARG ;;
        r) reps=$OPTARG ;;
        *) echo "usage: $0 [-c CONNECTIONS] [-d SECONDS] [-r REPETITIONS]" >&2; exit 2 ;;
    esac
done

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
need_tools nginx wrk taskset /usr/bin/time python3
need_two_cpus
loadgen=$(build_example reqcost-workload loadgen)

make_workdir
port=$(free_port)
start_nginx "$dir" "$port" "master_process off; events { worker_connections 4096; }" \
    "access_log off; keepalive_requests 100000000;"

url=http://127.0.0.1:$port/1k.txt
results=$dir/results.tsv
: > "$results"

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

printf "%-8s %4s %12s %12s %16s\n" tool rep requests "req/s" "client CPU us/req"
for rep in $(seq "$reps"); do
    for tool in wrk reqcost; do
        read -r n cpu < <("run_$tool")
        printf "%s\t%s\t%s\t%s\n" "$tool" "$rep" "$n" "$cpu" >> "$results"
        awk -v t="$tool" -v r="$rep" -v n="$n" -v c="$cpu" -v s="$secs" \
            'BEGIN { printf "%-8s %4d %12d %12.0f %16.2f\n", t, r, n, n / s, c * 1e6 / n }'
    done
done

python3 - "$results" "$secs" "$conns" <<'PY'
import statistics, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().split("\n") if l]
secs, conns = float(sys.argv[2]), sys.argv[3]
def med(tool, f):
    return statistics.median(f(int(n), float(c)) for t, _, n, c in rows if t == tool)
rps = {t: med(t, lambda n, c: n / secs) for t in ("wrk", "reqcost")}
cpu = {t: med(t, lambda n, c: c * 1e6 / n) for t in ("wrk", "reqcost")}
print(f"\nmedians over {len(rows)//2} interleaved runs, {conns} connections, {secs:g} s each:")
print(f"  wrk      {rps['wrk']:10.0f} req/s  {cpu['wrk']:6.2f} us client CPU/req")
print(f"  reqcost  {rps['reqcost']:10.0f} req/s  {cpu['reqcost']:6.2f} us client CPU/req")
print(f"  reqcost/wrk throughput {rps['reqcost']/rps['wrk']:.2f}x, "
      f"client CPU per request {cpu['reqcost']/cpu['wrk']:.2f}x (lower is better)")
PY
