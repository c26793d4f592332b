#!/usr/bin/env bash
# What the uprobes on Go's crypto/tls cost per request (issue 23).
#
# Debian's molly-brown (Gemini, Go 1.19, stripped) serves a small file; a Python client opens
# one TLS connection per request (as Gemini does) in a loop for SECONDS, pinned to CPU 0,
# molly-brown to CPU 1. Every run has the probes attached with attribution on through
# crates/probes/examples/requests.rs, with the Go uprobes (entries and RETs of
# crypto/tls.(*Conn).Read and Write, RETs of serverHandshake) attached or not
# (ProbeOptions::tls); runs are interleaved in pairs (no-tls/tls, tls/no-tls, ...). Each run
# reports molly-brown's CPU per request (schedstat run time of its threads / requests the
# client completed). The client's libssl is not hooked (molly-brown does not map it).
#
# Usage: bench/gotls-overhead.sh [-d SECONDS_PER_RUN] [-r PAIRS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=5 pairs=6
parse_options "[-d SECONDS_PER_RUN] [-r PAIRS]" d=secs r=pairs -- "$@"
need_tools molly-brown taskset python3 bpftool openssl
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
watcher=$(build_example reqcost-probes requests)

make_workdir
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -keyout "$dir/key.pem" -out "$dir/cert.pem" 2> /dev/null
port=$(free_port)
mkdir -p "$dir/docs"
printf '# Hello\n=> /about.gmi About\n' > "$dir/docs/index.gmi"
cat > "$dir/molly.conf" <<CONF
Port = $port
Hostname = "localhost"
CertPath = "$dir/cert.pem"
KeyPath = "$dir/key.pem"
DocBase = "$dir/docs"
AccessLog = "$dir/access.log"
ErrorLog = "$dir/error.log"
CONF
taskset -c 1 molly-brown -c "$dir/molly.conf" &
server_pid=$!
wait_port "$port"

# molly-brown's ns on CPU, all its threads.
molly_cpu() {
    cat /proc/"$server_pid"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'
}

# One client loop of $1 seconds on CPU 0; prints the requests it completed.
gemini_load() {
    taskset -c 0 python3 - "$port" "$1" <<'PY'
import socket, ssl, sys, time
port, secs = int(sys.argv[1]), float(sys.argv[2])
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
n, end = 0, time.monotonic() + secs
while time.monotonic() < end:
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost") as s:
            s.sendall(f"gemini://localhost:{port}/index.gmi\r\n".encode())
            while s.recv(4096):
                pass
    n += 1
print(n)
PY
}

# One run with the probes attached, the Go uprobes $1 (tls|no-tls); prints
# "requests cpu_ns_per_request events".
run() {
    local w c0 c1 n
    quiet
    "$watcher" "$server_pid" $((secs + 1)) on "$1" > "$dir/watcher.out" 2> "$dir/watcher.err" &
    w=$!
    wait_attached "$w" "$dir/watcher.err"
    c0=$(molly_cpu)
    n=$(gemini_load "$secs")
    c1=$(molly_cpu)
    wait "$w"
    echo "$n $(( (c1 - c0) / n )) $(cut -d' ' -f1 "$dir/watcher.out")"
}

gemini_load 2 > /dev/null

echo "# molly-brown $(dpkg-query -W -f='${Version}' molly-brown) Gemini, one connection per request, ${secs}s runs, $pairs pairs"
echo "# pair no-tls: requests ns/req events | tls: requests ns/req events"
on_off_pairs "$pairs"

PYTHONPATH="$root/bench" python3 - "$dir/pairs" <<'PY'
import sys
from ratio import events_per_request, on_off_summary
rows = on_off_summary(sys.argv[1], 1)
events_per_request(rows)
PY
