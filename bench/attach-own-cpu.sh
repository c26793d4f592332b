#!/usr/bin/env bash
# What `reqcost attach` itself burns while it watches a busy server (issue 28): its own CPU
# (user + system, /proc/PID/stat over the load's run, all its threads) per thousand of the
# server's requests. It drains one event per request and tallies it; on a machine with few
# CPUs that time is taken from the server or its clients.
#
# Debian's nginx (one worker pinned to CPU 1, bench/lib.sh's nginx_keepalive_1k) under wrk -t1
# at full rate, reqcost attach full time beside wrk on CPU 0, with call-chain sampling (the
# default) and without (--no-sample). With BEFORE=PATH (a reqcost built from an earlier commit),
# that build too, interleaved, for a before/after of one change.
#
# Usage: bench/attach-own-cpu.sh [-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=5 rounds=3 conns=8
parse_options "[-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]" \
    d=secs r=rounds c=conns -- "$@"
need_tools nginx wrk taskset python3 bpftool
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
reqcost=${REQCOST:-$(build_reqcost)}
before=${BEFORE:-}
ticks=$(getconf CLK_TCK)

make_workdir
nginx_keepalive_1k

# own_cpu PID: user + system ticks of all of PID's threads.
own_cpu() {
    cat /proc/"$1"/task/*/stat 2>/dev/null | awk '{s += $14 + $15} END {print s + 0}'
}

# One wrk run with BINARY attached (FLAGS...); prints "requests reqcost_cpu_us_per_1000".
attached() {
    local bin=$1 a c0 c1 load
    shift
    quiet
    taskset -c 0 "$bin" attach --pid "$server_pid" --duration "$((secs + 2))s" \
        -o "$dir/live.json" "$@" > /dev/null 2> "$dir/attach.err" &
    a=$!
    wait_attached "$a" "$dir/attach.err"
    c0=$(own_cpu "$a")
    load=$(wrk_load)
    c1=$(own_cpu "$a")
    wait "$a"
    echo "${load% *} $(( (c1 - c0) * 1000000 / ticks * 1000 / ${load% *} ))"
}

taskset -c 0 wrk -t1 -c"$conns" -d2s "$url" > /dev/null
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 KB file, wrk -t1 -c$conns keep-alive, ${secs}s runs, $rounds rounds"
echo "# round, then per way: requests and reqcost's own CPU in µs per 1000 requests"
ways=(sampled unsampled)
[ -z "$before" ] || ways+=(before-sampled before-unsampled)
echo "# ways: ${ways[*]}"
for i in $(seq "$rounds"); do
    line=$i
    for way in "${ways[@]}"; do
        bin=$reqcost
        [ "${way#before-}" = "$way" ] || bin=$before
        flags=()
        [ "${way#*unsampled}" = "$way" ] || flags=(--no-sample)
        line+=" $(attached "$bin" "${flags[@]}")"
    done
    echo "$line"
done
