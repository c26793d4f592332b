#!/usr/bin/env bash
# What the probes cost nginx beyond their programs' run time (issue 28): the kernel's price for
# any program on the syscall and scheduler tracepoints (the slow syscall path, the trampoline)
# against the programs' work on a tracked process.
#
# Debian's nginx (one worker pinned to CPU 1, bench/lib.sh's nginx_keepalive_1k) under wrk -t1
# at full rate (pinned to CPU 0), three ways interleaved in rotating order, each value nginx's CPU
# per request by schedstat:
#   bare       nothing attached;
#   untracked  the probes attached (crates/probes/examples/watch.rs) to another process (a
#              `sleep`): every hook runs on nginx's events and rejects them at its first test;
#   tracked    the probes attached to nginx: everything counted, requests attributed.
# untracked/bare is the trap's price; tracked/untracked the programs' work. With
# BEFORE=PATH (a watch example built from an earlier commit), a fourth way, `before`: that
# build's probes on nginx, interleaved with the others, for a before/after of one change.
#
# Usage: bench/probes-trap-cost.sh [-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=5 rounds=4 conns=8
parse_options "[-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]" \
    d=secs r=rounds c=conns -- "$@"
need_tools nginx wrk taskset python3 bpftool
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
watch=$(build_example reqcost-probes watch)
before=${BEFORE:-}

make_workdir
nginx_keepalive_1k
sleep 100000 &
idle=$!
trap 'kill "$idle" 2>/dev/null; cleanup' EXIT

# One wrk run with the probes of WATCH on PID (none: bare); prints nginx's CPU per request (ns).
watched() {
    local w= load
    quiet
    if [ "$2" != none ]; then
        taskset -c 0 "$1" "$2" $((secs + 3)) > /dev/null 2> "$dir/watch.err" &
        w=$!
        wait_attached "$w" "$dir/watch.err"
    fi
    load=$(wrk_load)
    [ -z "$w" ] || { kill "$w" 2>/dev/null; wait "$w" 2>/dev/null || true; }
    echo "${load#* }"
}

taskset -c 0 wrk -t1 -c"$conns" -d2s "$url" > /dev/null
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 KB file, wrk -t1 -c$conns keep-alive, ${secs}s runs, $rounds rounds"
echo "# round bare untracked tracked${before:+ before}  (nginx schedstat ns/request under wrk)"
ways=(bare untracked tracked)
[ -z "$before" ] || ways+=(before)
for i in $(seq "$rounds"); do
    declare -A v=()
    k=$((i % ${#ways[@]}))
    for way in "${ways[@]:k}" "${ways[@]:0:k}"; do
        case $way in
            bare) v[$way]=$(watched "$watch" none) ;;
            untracked) v[$way]=$(watched "$watch" "$idle") ;;
            tracked) v[$way]=$(watched "$watch" "$server_pid") ;;
            before) v[$way]=$(watched "$before" "$server_pid") ;;
        esac
    done
    line=$i
    for way in "${ways[@]}"; do line+=" ${v[$way]}"; done
    echo "$line" | tee -a "$dir/all"
done
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"

PYTHONPATH="$root/bench" python3 - "$dir/all" <<'PY'
import statistics, sys
from ratio import mean_ci
rows = [list(map(float, l.split()[1:])) for l in open(sys.argv[1])]
med = lambda c: statistics.median(r[c] for r in rows) / 1000
print(f"bare {med(0):.2f} µs, untracked {med(1):.2f} µs, tracked {med(2):.2f} µs CPU/request")
pairs = [("untracked / bare (the trap)", 1, 0), ("tracked / untracked (the work)", 2, 1),
         ("tracked / bare (all)", 2, 0)]
if len(rows[0]) > 3:
    print(f"before {med(3):.2f} µs CPU/request")
    pairs += [("before / bare", 3, 0), ("tracked / before", 2, 3)]
for name, a, b in pairs:
    mean, low, high = mean_ci([r[a] / r[b] for r in rows])
    print(f"{name:32} {mean:.3f} (95 % CI {low:.3f} .. {high:.3f})")
PY
