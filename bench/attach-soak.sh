#!/usr/bin/env bash
# A long `reqcost attach` with its defaults (budget 1 %, sampling on) under wrk: does reqcost's
# memory or its own CPU per request grow with time (issue 44)?
#
# Debian's nginx (one worker, CPU 1, bench/lib.sh's nginx_keepalive_1k without its access log,
# which would fill the disk) under wrk -t1 (CPU 0) in one-minute runs back to back for
# DURATION, reqcost attached throughout. After each minute: reqcost's RSS (VmRSS) and its CPU
# (all threads, schedstat) per 1000 of the minute's requests, and nginx's CPU per request.
# The summary compares the first minute with the last.
#
# Usage: bench/attach-soak.sh DURATION (e.g. 10m, 1h, 600s) [-c CONNECTIONS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
[ $# -ge 1 ] || { echo "usage: $0 DURATION [-c CONNECTIONS]" >&2; exit 2; }
duration=$1
shift
conns=8
parse_options "DURATION [-c CONNECTIONS]" c=conns -- "$@"
case $duration in
    *h) total=$(( ${duration%h} * 3600 )) ;;
    *m) total=$(( ${duration%m} * 60 )) ;;
    *s) total=${duration%s} ;;
    *) total=$duration ;;
esac
need_tools nginx wrk taskset python3 bpftool
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
reqcost=${REQCOST:-$(build_reqcost)}

make_workdir
start_nginx "events { worker_connections 1024; }" \
    "sendfile on; tcp_nopush on; keepalive_requests 1000000; access_log off;"
worker=$(cat "/proc/$server_pid/task/$server_pid/children")
worker=${worker%% *}

quiet
taskset -c 0 "$reqcost" attach --pid "$server_pid" -o "$dir/soak.json" \
    > /dev/null 2> "$dir/attach.err" &
attach=$!
wait_attached "$attach" "$dir/attach.err"

# reqcost_cpu: ns on CPU of reqcost's threads; rss: its VmRSS, RssAnon and RssFile in KiB (file
# pages are the mapped binaries symbolization reads: bounded by their sizes, not a leak).
reqcost_cpu() {
    cat /proc/"$attach"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'
}
rss() {
    awk '/^(VmRSS|RssAnon|RssFile)/ {printf "%s ", $2} END {print ""}' "/proc/$attach/status"
}

echo "# $(date -u +%FT%TZ) uptime: $(uptime)"
echo "# nginx 1 KiB, -c$conns keep-alive, $total s in 60 s wrk runs, reqcost attach (defaults) pid $attach"
echo "# minute requests nginx_ns/request reqcost_ms/1000_requests rss_kib anon_kib file_kib"
secs=60
minutes=$(( (total + 59) / 60 ))
for m in $(seq "$minutes"); do
    r0=$(reqcost_cpu)
    read -r n ns < <(wrk_load)
    r1=$(reqcost_cpu)
    echo "$m $n $ns $(python3 -c "print(f'{($r1 - $r0) / 1e6 / $n * 1000:.3f}')") $(rss)" |
        tee -a "$dir/minutes"
done
echo "# $(date -u +%FT%TZ) uptime: $(uptime)"
kill -INT "$attach"
wait "$attach" || true
grep -E "^  (budget|sampled)" <("$reqcost" report "$dir/soak.json") || true

python3 - "$dir/minutes" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
first, last = rows[0], rows[-1]
print(f"reqcost CPU per 1000 requests: first minute {first[3]} ms, last {last[3]} ms")
for col, name in ((4, "RSS"), (5, "anonymous RSS"), (6, "file RSS")):
    print(f"reqcost {name}: first minute {int(first[col]) / 1024:.1f} MiB, last {int(last[col]) / 1024:.1f} MiB, "
          f"largest {max(int(r[col]) for r in rows) / 1024:.1f} MiB")
print(f"nginx CPU per request: first minute {int(first[2]) / 1000:.2f} µs, last {int(last[2]) / 1000:.2f} µs")
PY
