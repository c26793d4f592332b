#!/usr/bin/env bash
# The probes' cost across a stack of three trees (issue 43, docs/stack.md).
#
# Debian's nginx (one worker, pinned to CPU 1) proxies to a WSGI application under gunicorn (one
# sync worker, testbed/stack/redis_app.py) that asks Redis three times per request over one kept
# connection, all on loopback TCP. `reqcost run` drives nginx with its own load generator
# (pinned apart), in three modes interleaved round by round:
#   none      --no-probes
#   front     --probes-full-time --no-follow-upstreams: the probes on nginx's tree alone
#   stack     --probes-full-time: the probes on nginx, gunicorn and Redis, requests linked
#   default   no option: the probes on the three trees, each tree's CPU figures from the run's
#             unprobed pass (docs/stack.md, "Scaled phases")
# Each run reports CPU per front request of each tree: nginx's from the record (its cgroup),
# gunicorn's and Redis' from their schedstat around the run (warm-up requests included, so over
# the run's requests and warm-up's), but in `default` from the record's hops, as reqcost reports
# them (the probed pass and the unprobed one both ran). The result is each mode's median per tree
# and the stack's total, with the ratio to `none`.
#
# Usage: bench/stack-probe-cost.sh [-n REQUESTS] [-r ROUNDS] [-c CONNECTIONS]
#        REQCOST=path/to/reqcost uses that binary instead of building a release one.
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
requests=5000 rounds=5 conns=4 warmup=1000
parse_options "[-n REQUESTS] [-r ROUNDS] [-c CONNECTIONS]" n=requests r=rounds c=conns -- "$@"
need_tools nginx gunicorn redis-server python3
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
reqcost=${REQCOST:-$(build_reqcost)}

make_workdir
redis_port=$(free_port) app_port=$(free_port)
redis-server --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no \
    > "$dir/redis.log" 2>&1 &
redis_pid=$!
REDIS=127.0.0.1:$redis_port gunicorn --workers 1 --worker-class sync \
    --chdir "$root/testbed/stack" --bind "127.0.0.1:$app_port" redis_app:app \
    > "$dir/gunicorn.log" 2>&1 &
app_pid=$!
trap 'kill $app_pid $redis_pid 2>/dev/null; cleanup' EXIT
wait_port "$redis_port"
wait_port "$app_port"
port=$(free_port)
mkdir -p "$dir/tmp"
fill_conf nginx.conf "$dir" "$port" main "events { worker_connections 1024; }" \
    http "access_log off;" server "location / { proxy_pass http://127.0.0.1:$app_port; }" \
    listen "127.0.0.1:{port}" > "$dir/nginx.conf"

# ns on CPU of gunicorn's and Redis' trees (threads and children included).
upstream_cpu() {
    local pids
    pids="$app_pid $(cat /proc/"$app_pid"/task/*/children 2>/dev/null) $redis_pid"
    # shellcheck disable=SC2086
    for p in $pids; do cat /proc/"$p"/task/*/schedstat 2>/dev/null; done |
        awk '{s += $1} END {printf "%.0f\n", s}'
}

# One run in mode $1; prints "mode nginx_ns app_ns redis_ns" per front request.
run() {
    local extra c0 c1 rec=$dir/run-$1.json
    case $1 in
        none) extra=(--no-probes) ;;
        front) extra=(--probes-full-time --no-follow-upstreams) ;;
        stack) extra=(--probes-full-time) ;;
        default) extra=() ;;
    esac
    quiet
    c0=$(upstream_cpu)
    "$reqcost" run --url "http://127.0.0.1:$port/" -n "$requests" -c "$conns" \
        --warmup "$warmup" --no-slow-phase --no-sample "${extra[@]}" -o "$rec" \
        -- nginx -e stderr -p "$dir" -c "$dir/nginx.conf" > "$dir/run.out" 2>&1 ||
        { cat "$dir/run.out" >&2; exit 1; }
    c1=$(upstream_cpu)
    python3 - "$1" "$rec" $((c1 - c0)) $((requests + warmup)) <<'PY'
import json, sys
mode, rec, upstream_ns, sent = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
main = [p for p in json.load(open(rec))["phases"] if p["name"] == "main"][0]
n = main["client"]["requests"]
if mode == "default":
    upstream = sum(h["cpu"]["total_ns"] for h in main["hops"]) / n
else:
    upstream = upstream_ns / sent
print(mode, main["server"]["cpu"]["total_ns"] / n, upstream)
PY
}

echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///') -> gunicorn $(gunicorn --version | sed 's/.*version //; s/)//') -> redis $(redis-server --version | awk '{print $3}'),"
echo "# reqcost run -n $requests -c $conns --warmup $warmup, $rounds rounds of none/front/stack/default"
: > "$dir/runs"
for i in $(seq "$rounds"); do
    modes=(none front stack default)
    [ $((i % 2)) -eq 0 ] && modes=(default stack front none)
    for m in "${modes[@]}"; do
        run "$m" | tee -a "$dir/runs"
    done
done

python3 - "$dir/runs" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    mode, nginx, upstream = line.split()
    runs.setdefault(mode, []).append((float(nginx), float(upstream)))
med = {m: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs))
       for m, rs in runs.items()}
base = sum(med["none"])
print("| mode | nginx µs/req | gunicorn+redis µs/req | stack µs/req | stack / none |")
print("|---|---|---|---|---|")
for m in ("none", "front", "stack", "default"):
    ng, up = med[m]
    print(f"| {m} | {ng / 1e3:.1f} | {up / 1e3:.1f} | {(ng + up) / 1e3:.1f} | {(ng + up) / base:.2f} |")
PY
