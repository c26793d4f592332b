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

root=$(cd "$(dirname "$0")/.." && pwd)
for tool in nginx wrk taskset /usr/bin/time python3; do
    command -v "$tool" >/dev/null || { echo "$0: $tool is missing: run scripts/bootstrap" >&2; exit 1; }
done
[ "$(nproc)" -ge 2 ] || { echo "$0: needs 2 CPUs to pin client and server apart" >&2; exit 1; }

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$root/target}
cargo build --quiet --release -p reqcost-workload --example loadgen --manifest-path "$root/Cargo.toml"
loadgen=$CARGO_TARGET_DIR/release/examples/loadgen

dir=$(mktemp -d)
nginx_pid=
cleanup() {
    [ -n "$nginx_pid" ] && kill "$nginx_pid" 2>/dev/null && wait "$nginx_pid" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$dir/www" "$dir/logs"
head -c 1024 /dev/zero | tr '\0' 'x' > "$dir/www/1k.txt"
cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
daemon off;
master_process off;
pid $dir/nginx.pid;
error_log $dir/logs/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 100000000;
    client_body_temp_path $dir/tmp;
    proxy_temp_path $dir/tmp;
    fastcgi_temp_path $dir/tmp;
    uwsgi_temp_path $dir/tmp;
    scgi_temp_path $dir/tmp;
    server {
        listen 127.0.0.1:$port;
        root $dir/www;
    }
}
CONF
taskset -c 1 nginx -p "$dir" -c "$dir/nginx.conf" &
nginx_pid=$!
for _ in $(seq 50); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1',$port)).close()" 2>/dev/null && break
    sleep 0.1
done

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
