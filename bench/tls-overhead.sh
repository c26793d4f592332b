#!/usr/bin/env bash
# What the TLS uprobes cost per request (issue 23).
#
# Debian's nginx (one worker, access log on) serves a 1 KB file over HTTPS (TLS 1.3, HTTP/1.1
# keep-alive) to wrk at full rate; nginx is pinned to CPU 1, wrk to CPU 0. Every run has the
# probes attached with attribution on through crates/probes/examples/requests.rs, with the
# uprobes on libssl (SSL_read, SSL_read_ex, SSL_write, SSL_write_ex) attached or not
# (ProbeOptions::tls); runs are interleaved in pairs (no-tls/tls, tls/no-tls, ...). Each run
# reports nginx's CPU per request (schedstat run time of the tree / requests wrk completed) and
# wrk's requests. The uprobes are attached to nginx's processes only, so wrk's own SSL calls do
# not trap: the requests ratio shows what the server's traps cost the client's throughput.
#
# Usage: bench/tls-overhead.sh [-d SECONDS_PER_RUN] [-r PAIRS] [-c CONNECTIONS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=5 pairs=6 conns=8
parse_options "[-d SECONDS_PER_RUN] [-r PAIRS] [-c CONNECTIONS]" d=secs r=pairs c=conns -- "$@"
need_tools nginx wrk taskset python3 bpftool openssl
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
watcher=$(build_example reqcost-probes requests)

make_workdir
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -keyout "$dir/key.pem" -out "$dir/cert.pem" 2> /dev/null
port=$(free_port)
url=https://127.0.0.1:$port/1k.txt
write_1k "$dir/www"
fill_conf nginx.conf "$dir" "$port" main "events { worker_connections 1024; }" \
    http "keepalive_requests 1000000; access_log $dir/access.log;" \
    server "ssl_certificate $dir/cert.pem; ssl_certificate_key $dir/key.pem;" \
    listen "127.0.0.1:{port} ssl" > "$dir/nginx.conf"
taskset -c 1 nginx -p "$dir" -c "$dir/nginx.conf" &
server_pid=$!
wait_port "$port"
worker=$(cat "/proc/$server_pid/task/$server_pid/children")
worker=${worker%% *}

# One wrk run with the probes attached, the TLS uprobes $1 (tls|no-tls); prints
# "requests cpu_ns_per_request events".
run() {
    local load w
    quiet
    "$watcher" "$server_pid" $((secs + 1)) on "$1" > "$dir/watcher.out" 2> "$dir/watcher.err" &
    w=$!
    wait_attached "$w" "$dir/watcher.err"
    load=$(wrk_load)
    wait "$w"
    echo "$load $(cut -d' ' -f1 "$dir/watcher.out")"
}

taskset -c 0 wrk -t1 -c"$conns" -d2s "$url" > /dev/null

echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///') HTTPS, 1 KB file, wrk -t1 -c$conns keep-alive, ${secs}s runs, $pairs pairs"
echo "# pair no-tls: requests ns/req events | tls: requests ns/req events"
on_off_pairs "$pairs"

PYTHONPATH="$root/bench" python3 - "$dir/pairs" <<'PY'
import sys
from ratio import events_per_request, mean_ci, on_off_summary
rows = on_off_summary(sys.argv[1], 2)
mean, low, high = mean_ci([r[4] / r[1] for r in rows])
print(f"on/off requests per run {mean:.3f} (95% CI {low:.3f} .. {high:.3f})")
events_per_request(rows)
PY
