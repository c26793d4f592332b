#!/usr/bin/env bash
# What `attach` with its default cost budget (1 %) costs a server, and whether its per-request
# figures hold against full time's (issue 44).
#
# One server under wrk (pinned to CPU 0; the server to CPU 1; reqcost to CPU 0 unless -p says
# otherwise), three ways interleaved in rotating order:
#   bare     wrk alone: the server's CPU per request by schedstat (tree CPU / wrk's requests);
#   budget   wrk under `reqcost attach` with its defaults (budget 1 %, call-chain sampling on);
#   full     wrk under `reqcost attach --probes-full-time` (sampling on);
#   extra    with -x FLAGS: wrk under `reqcost attach FLAGS` (e.g. -x "--freq 499" for the
#            sampler's old rate, -x --no-sample for the budget without it).
# Servers (-s):
#   nginx    Debian's nginx, one worker, a 1 KiB file over -c keep-alive connections (about
#            17 µs of CPU per request on a quiet machine);
#   python   a one-thread Python http.server that burns about 1 ms of CPU per request (one
#            connection: it serves one at a time).
# Prints per round each way's CPU per request, and for the attached ways the record's requests
# (over wrk's), CPU and syscalls per request, the budget's achieved cost and the share probed;
# then the ratios to bare with 95 % intervals, and budget's per-request figures over full's.
#
# -w WAYS runs only those ways (comma-separated, bare among them), e.g. -w bare,budget: more
# and shorter rounds in the same time, each ratio's two runs closer together on a machine whose
# speed drifts from minute to minute.
#
# -p CPUS pins reqcost elsewhere: 1 beside the server, 0-1 wherever the scheduler puts it. Beside
# wrk (the default) its own work slows the load generator, which raises the server's CPU per
# request (smaller batches per epoll_wait): a loop taking 10 % of CPU 0 raised nginx's by 8 %.
#
# Usage: bench/attach-budget.sh [-s nginx|python] [-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]
#                               [-x "ATTACH FLAGS"] [-p CPUS] [-w WAYS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
server=nginx secs=10 rounds=6 conns=8 extra= cpus=0 only=
parse_options "[-s nginx|python] [-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS] [-x FLAGS] [-p CPUS] [-w WAYS]" \
    s=server d=secs r=rounds c=conns x=extra p=cpus w=only -- "$@"
need_tools wrk taskset python3 bpftool
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
# REQCOST=PATH runs that binary instead of a release build.
reqcost=${REQCOST:-$(build_reqcost)}

make_workdir
case $server in
    nginx)
        need_tools nginx
        nginx_keepalive_1k
        ;;
    python)
        conns=1
        port=$(free_port)
        url=http://127.0.0.1:$port/
        cat > "$dir/slow.py" <<'PY'
import sys
from http.server import BaseHTTPRequestHandler, HTTPServer

N = int(sys.argv[2])

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_GET(self):
        x = 0
        for i in range(N):
            x += i * i
        body = b"%d\n" % (x & 0xff)
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
PY
        taskset -c 1 python3 "$dir/slow.py" "$port" 25000 2>/dev/null &
        server_pid=$!
        # One process: lib.sh's tree_cpu reads the master's and the worker's, so no worker.
        worker=
        wait_port "$port"
        ;;
    *) echo "usage: $0 [-s nginx|python] ..." >&2; exit 2 ;;
esac

# figures RECORD WRK_REQUESTS: the record's requests over wrk's, CPU per request (ns),
# syscalls per request, the budget's cost share (%) and the share of the time probed (%).
figures() {
    python3 - "$@" <<'PY'
import json, sys
ph = json.load(open(sys.argv[1]))['phases'][0]
w = ph.get('cpu_windows') or {}
b = w.get('budget') or {}
p, u = w.get('probed', {}), w.get('unprobed', {})
elapsed = p.get('elapsed_s', 0) + u.get('elapsed_s', 0)
probed = 100 * p.get('elapsed_s', 0) / elapsed if elapsed else 100
pr = ph['per_request']
calls = sum(pr.get('syscalls', {}).values())
print(f"{ph['requests']['requests'] / int(sys.argv[2]):.4f} {pr['cpu_total_us'] * 1000:.0f} "
      f"{calls:.3f} {100 * b.get('cost_share', 0):.2f} {probed:.1f}")
PY
}

attached() {
    local a load
    quiet
    taskset -c "$cpus" "$reqcost" attach --pid "$server_pid" --duration "$((secs + 2))s" \
        -o "$dir/live.json" "$@" > /dev/null 2> "$dir/attach.err" &
    a=$!
    wait_attached "$a" "$dir/attach.err"
    load=$(wrk_load)
    wait "$a"
    echo "$load $(figures "$dir/live.json" "${load%% *}")"
}

measure() {
    case $1 in
        bare) quiet; echo "$(wrk_load) - - - - -" ;;
        budget) attached ;;
        full) attached --probes-full-time ;;
        # shellcheck disable=SC2086 # the flags are words
        extra) attached $extra ;;
    esac
}

taskset -c 0 wrk -t1 -c"$conns" -d2s "$url" > /dev/null
echo "# $(date -u +%FT%TZ) uptime: $(uptime)"
echo "# $server, -c$conns keep-alive, ${secs}s runs, $rounds rounds, reqcost on CPU $cpus"
echo "# round way wrk_requests ns/request record_requests/wrk record_ns/request syscalls/request cost% probed%"
ways=(bare budget full)
[ -z "$extra" ] || { ways+=(extra); echo "# extra: attach $extra"; }
if [ -n "$only" ]; then
    IFS=, read -r -a ways <<< "$only"
    [[ " ${ways[*]} " == *" bare "* ]] || { echo "$0: -w needs bare among the ways" >&2; exit 2; }
fi
for i in $(seq "$rounds"); do
    k=$((i % ${#ways[@]}))
    for way in "${ways[@]:k}" "${ways[@]:0:k}"; do
        echo "$i $way $(measure "$way")" | tee -a "$dir/all"
    done
done
echo "# $(date -u +%FT%TZ) uptime: $(uptime)"

PYTHONPATH="$root/bench" python3 - "$dir/all" <<'PY'
import collections, statistics, sys
from ratio import mean_ci
v = collections.defaultdict(dict)
for line in open(sys.argv[1]):
    i, way, *f = line.split()
    v[way][i] = f
rounds = sorted(v['bare'])
med = statistics.median
num = lambda way, i, k: float(v[way][i][k])
print(f"bare: {med(num('bare', i, 1) for i in rounds) / 1000:.2f} µs/request (median)")
for way in [w for w in ("budget", "full", "extra") if w in v]:
    mean, low, high = mean_ci([num(way, i, 1) / num('bare', i, 1) for i in rounds])
    print(f"{way:6} / bare {mean:.3f} (95 % CI {low:.3f}-{high:.3f}); cost the budget "
          f"reported {med(num(way, i, 5) for i in rounds):.2f} %, probed "
          f"{med(num(way, i, 6) for i in rounds):.1f} % of the time (medians)")
for k, name in ((2, "requests (record / wrk)"), (3, "CPU per request (record)"),
                (4, "syscalls per request")) if 'full' in v and 'budget' in v else ():
    mean, low, high = mean_ci([num('budget', i, k) / num('full', i, k) for i in rounds])
    print(f"budget / full, {name}: {mean:.3f} (95 % CI {low:.3f}-{high:.3f})")
PY
