#!/usr/bin/env bash
# What following HTTP/2 frames costs the probes per request (issue 23).
#
# Debian's nginx (one worker) serves a 1 KB file on two loopback ports: one HTTP/2 in the clear
# (h2c, `listen ... http2;`), whose reads the probes walk frame by frame and whose header blocks
# they hand to user space, and one HTTP/1.1. h2load drives each with -c 4 -m 1 (one stream in
# flight per connection, so both see one read and one write per request), the two alternating
# (h2c, h1, h2c, ...), each under `reqcost run --no-sample`. Each run reports, from its record,
# the probes' own run time on the server's events per request (probe_cost.tree_ns, timed on one
# run in 16 and scaled), their runs per request, and the server's attributed CPU per request.
#
# Usage: bench/http2-probe-cost.sh [-n REQUESTS_PER_RUN] [-r PAIRS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
requests=20000 pairs=3
parse_options "[-n REQUESTS_PER_RUN] [-r PAIRS]" n=requests r=pairs -- "$@"
need_tools nginx h2load python3
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
reqcost=$(build_reqcost)

make_workdir
write_1k "$dir/www"
h2c=$(free_port)
h1=$(free_port)
cat > "$dir/nginx.conf" <<CONF
worker_processes 1; daemon off; pid $dir/nginx.pid; error_log $dir/error.log;
events { worker_connections 1024; }
http { access_log off; client_body_temp_path $dir/tmp; keepalive_requests 1000000;
       server { listen 127.0.0.1:$h2c http2; root $dir/www; }
       server { listen 127.0.0.1:$h1; root $dir/www; } }
CONF

# One run: $1 is h2c or h1; prints "probe_ns/req probe_runs/req cpu_ns/req requests".
run() {
    local load=("h2load -n $requests -c 4 -m 1 http://127.0.0.1:$h2c/1k.txt")
    [ "$1" = h1 ] && load=("h2load --h1 -n $requests -c 4 -m 1 http://127.0.0.1:$h1/1k.txt")
    "$reqcost" run -o "$dir/run.json" --no-sample --url "http://127.0.0.1:$h2c/1k.txt" \
        --load "${load[0]}" -- nginx -e stderr -p "$dir" -c "$dir/nginx.conf" > /dev/null 2>&1
    python3 - "$dir/run.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))["phases"][0]
n = p["requests"]["requests"]
cost = p["server"]["probe_cost"]
print(f"{cost['tree_ns'] / n:.0f} {cost['tree_runs'] / n:.2f} {p['requests']['attributed_cpu_ns'] / n:.0f} {n}")
PY
}

echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 KB file, h2load -n $requests -c 4 -m 1, $pairs pairs"
echo "# pair | h2c: probe ns/req, runs/req, CPU ns/req, requests | h1: the same"
for i in $(seq "$pairs"); do
    echo "$i | $(run h2c) | $(run h1)"
done
