#!/usr/bin/env bash
# The probes' cost left in reqcost's figures (issue 16, issue 14).
#
# (a) run: Debian's nginx (one worker, pinned to CPU 1, bench/lib.sh's nginx_keepalive_1k) under
#     reqcost's own load at full rate (`reqcost run --pid`, -c CONNECTIONS keep-alive, pinned to
#     CPU 0), four ways interleaved in rotating order: --no-probes (bare: the server's CPU per
#     request with nothing attached), the default (probed and unprobed windows),
#     --probes-full-time, and a default run of 1000 requests (-n 1000). Each value is the CPU
#     per request the record REPORTS (main phase, per_request.cpu_total_us). Result:
#     windows/bare, full-time/bare and 1000-requests/bare, paired ratios with 95 % intervals.
# (b) attach: the same nginx under wrk -t1 -cCONNECTIONS at full rate (a fixed external load,
#     pinned to CPU 0), three ways interleaved: bare, `reqcost attach` full time, `reqcost attach
#     --duty 20%`. Each value is the server's CPU per request measured outside reqcost (schedstat
#     of the nginx tree over the wrk run / wrk's requests). Result: full/bare and duty/bare.
#
# Usage: bench/windows-overhead.sh [-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=6 rounds=5 conns=8
parse_options "[-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]" \
    d=secs r=rounds c=conns -- "$@"
need_tools nginx wrk taskset python3 bpftool
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
# REQCOST=PATH runs that binary instead of a release build (e.g. one built before a change).
reqcost=${REQCOST:-$(build_reqcost)}

make_workdir
nginx_keepalive_1k

# (a) One `reqcost run` with FLAGS... (a --duration of `secs` unless they give -n); prints the
# CPU per request (ns) its record reports.
reported() {
    local length=(--duration "${secs}s")
    [ "${1:-}" != -n ] || length=()
    quiet
    taskset -c 0 "$reqcost" run --url "$url" --pid "$server_pid" "${length[@]}" \
        -c "$conns" --warmup 2000 --no-slow-phase --no-sample -o "$dir/run.json" "$@" > /dev/null
    python3 -c "
import json; p = json.load(open('$dir/run.json'))['phases'][0]
print(round(p['per_request']['cpu_total_us'] * 1000))"
}

# (b) One wrk run with `reqcost attach FLAGS...` watching (none: bare); prints nginx's CPU per
# request (ns) by schedstat.
attached() {
    local a= load
    quiet
    if [ "$1" != bare ]; then
        taskset -c 0 "$reqcost" attach --pid "$server_pid" --duration "$((secs + 2))s" \
            --no-sample -o "$dir/live.json" "${@:2}" > /dev/null 2> "$dir/attach.err" &
        a=$!
        wait_attached "$a" "$dir/attach.err"
    fi
    load=$(wrk_load)
    [ -z "$a" ] || wait "$a"
    echo "${load#* }"
}

# One way of measuring, by name; prints ns per request.
measure() {
    case $1 in
        bare) reported --no-probes ;;
        windows) reported ;;
        full) reported --probes-full-time ;;
        default1k) reported -n 1000 ;;
        attach-bare) attached bare ;;
        attach-full) attached full ;;
        attach-duty) attached duty --duty 20% ;;
    esac
}

# rounds FILE WAY...: `rounds` rounds of every WAY, each round in a rotated order (each way goes
# first in turn), one line per round in FILE: "round ns/request of each WAY as listed".
rounds() {
    local file=$1 i way
    shift
    : > "$file"
    for i in $(seq "$rounds"); do
        local -A v=()
        local names=("$@") k=$((i % $#))
        for way in "${names[@]:k}" "${names[@]:0:k}"; do
            v[$way]=$(measure "$way")
        done
        local line=$i
        for way in "$@"; do line+=" ${v[$way]}"; done
        echo "$line" | tee -a "$file"
    done
}

taskset -c 0 wrk -t1 -c"$conns" -d2s "$url" > /dev/null
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 KB file, -c$conns keep-alive, ${secs}s runs, $rounds rounds"
echo "# (a) round bare windows full-time default-1000  (CPU ns/request the record reports)"
rounds "$dir/a" bare windows full default1k
echo "# (b) round bare attach duty20  (nginx schedstat ns/request under wrk)"
rounds "$dir/b" attach-bare attach-full attach-duty
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"

PYTHONPATH="$root/bench" python3 - "$dir/a" "$dir/b" <<'PY'
import statistics, sys
from ratio import mean_ci
for path, names in ((sys.argv[1], ("run reported, windows", "run reported, full time",
                                    "run -n 1000 reported")),
                    (sys.argv[2], ("attach full time", "attach --duty 20%"))):
    rows = [list(map(float, l.split())) for l in open(path)]
    print(f"{'bare':28} median {statistics.median(r[1] for r in rows) / 1000:.2f} µs CPU/request")
    for col, name in enumerate(names, 2):
        mean, low, high = mean_ci([r[col] / r[1] for r in rows])
        print(f"{name:28} median {statistics.median(r[col] for r in rows) / 1000:.2f} µs, "
              f"/bare {mean:.3f} (95% CI {low:.3f} .. {high:.3f})")
PY
