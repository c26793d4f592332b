#!/usr/bin/env bash
# How long `reqcost attach` (defaults: budget 3 %, sampling on) takes to exit once told to
# (SIGINT to exit, the record written), and to pause and resume its probes at each duty turn,
# on servers with and without uprobes (issue 44: under a second with many uprobes). Each
# server is attached for SECONDS under load (wrk for nginx; the Lua server idles: its uprobes
# are detached and re-attached all the same), then interrupted. The turns are timed by
# bpftrace uprobes on reqcost's own pause and resume functions.
#   nginx      Debian's nginx, plain HTTP (no uprobes);
#   nginx-tls  the same over HTTPS: uprobe-multi links on libssl in each process;
#   lua        testbed/lua/server.lua on lua5.4: perf-event uprobes on lua_resume and lua_pcallk.
# Prints per run the server, the exit time in ms, the budget's duty cycles in the record, and
# the pauses' and resumes' median and longest times in ms.
#
# Usage: bench/attach-exit.sh [-d SECONDS] [-r ROUNDS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=8 rounds=3 conns=8
parse_options "[-d SECONDS] [-r ROUNDS]" d=secs r=rounds -- "$@"
need_tools nginx wrk taskset python3 bpftool bpftrace nm openssl lua5.4 make
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
reqcost=${REQCOST:-$(build_reqcost)}
make -s -C "$root/testbed"
make_workdir
# turn_probes: bpftrace, in the background, printing "pause NS" and "resume NS" for each turn.
symbol() { nm "$reqcost" | awk -v f="$1" '$3 ~ f && !s {s = $3} END {print s}'; }
pause_fn=$(symbol '6Loaded5pause17h')
resume_fn=$(symbol '6Loaded6resume17h')
[ -n "$pause_fn" ] && [ -n "$resume_fn" ] || { echo "no pause/resume symbols in $reqcost" >&2; exit 1; }
write_1k "$dir/www"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=127.0.0.1 -keyout "$dir/key.pem" -out "$dir/cert.pem" 2> /dev/null

# serve KIND: starts the server, its pid in server_pid, its URL in url (none for Lua).
serve() {
    port=$(free_port)
    case $1 in
        nginx | nginx-tls)
            local listen="127.0.0.1:{port}" server="" scheme=http
            if [ "$1" = nginx-tls ]; then
                listen="127.0.0.1:{port} ssl" scheme=https
                server="ssl_certificate $dir/cert.pem; ssl_certificate_key $dir/key.pem;"
            fi
            fill_conf nginx.conf "$dir" "$port" main "events { worker_connections 1024; }" \
                http "keepalive_requests 1000000; access_log off;" \
                server "$server" listen "$listen" > "$dir/nginx.conf"
            taskset -c 1 nginx -p "$dir" -c "$dir/nginx.conf" &
            url=$scheme://127.0.0.1:$port/1k.txt
            ;;
        lua)
            taskset -c 1 lua5.4 "$root/testbed/lua/server.lua" "$port" &
            url=
            ;;
    esac
    server_pid=$!
    wait_port "$port"
}

# exit_ms KIND: one attach of SECONDS, then SIGINT; prints the ms from the signal to its exit.
exit_ms() {
    local a t0 t1
    serve "$1"
    quiet
    bpftrace -e "
        uprobe:$reqcost:$pause_fn, uprobe:$reqcost:$resume_fn { @t[tid] = nsecs; }
        uretprobe:$reqcost:$pause_fn /@t[tid]/ { printf(\"pause %d\\n\", nsecs - @t[tid]); delete(@t[tid]); }
        uretprobe:$reqcost:$resume_fn /@t[tid]/ { printf(\"resume %d\\n\", nsecs - @t[tid]); delete(@t[tid]); }
    " > "$dir/turns" 2>&1 &
    tracer=$!
    until grep -q Attaching "$dir/turns" 2> /dev/null; do sleep 0.1; done
    sleep 1
    taskset -c 0 "$reqcost" attach --pid "$server_pid" -o "$dir/exit.json" \
        > /dev/null 2> "$dir/attach.err" &
    a=$!
    wait_attached "$a" "$dir/attach.err"
    if [ -n "$url" ]; then
        taskset -c 0 wrk -t1 -c"$conns" -d"${secs}s" "$url" > /dev/null
    else
        sleep "$secs"
    fi
    t0=$(date +%s%N)
    kill -INT "$a"
    wait "$a" || true
    t1=$(date +%s%N)
    kill -INT "$tracer"
    wait "$tracer" 2> /dev/null || true
    kill "$server_pid"
    wait "$server_pid" 2> /dev/null || true
    server_pid=
    echo "$1 $(( (t1 - t0) / 1000000 )) $(python3 - "$dir/exit.json" "$dir/turns" <<'PY'
import json, statistics, sys
b = (json.load(open(sys.argv[1]))["phases"][0].get("cpu_windows") or {}).get("budget") or {}
turns = {"pause": [], "resume": []}
for line in open(sys.argv[2]):
    f = line.split()
    if len(f) == 2 and f[0] in turns:
        turns[f[0]].append(int(f[1]) / 1e6)
cols = [str(b.get("cycles", 0))]
for kind, ms in turns.items():
    cols.append(f"{kind}s {len(ms)} median {statistics.median(ms):.1f} max {max(ms):.1f}"
                if ms else f"{kind}s 0")
print(" ".join(cols))
PY
)"
}

echo "# $(date -u +%FT%TZ) uptime: $(uptime)"
echo "# server exit_ms budget_cycles pauses(ms) resumes(ms) (attach ${secs}s, then SIGINT)"
for _ in $(seq "$rounds"); do
    for kind in nginx nginx-tls lua; do
        exit_ms "$kind"
    done
done
