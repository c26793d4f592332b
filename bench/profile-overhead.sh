#!/usr/bin/env bash
# What call-chain sampling costs the server, and how long post-processing takes.
#
# apache2 (prefork, Debian's build: no frame pointers) serves a 1 KB file to one wrk connection
# (seeds/003's test case); apache2 is pinned to CPU 1, wrk and the sampler to CPU 0. Runs are
# interleaved (off/on, on/off, ...) and each reports server CPU per request (schedstat time of
# the apache2 tree / requests); the result is the paired sampled/unsampled ratio with a 95 %
# confidence interval. Then one -f second sampled run times Sampler::finish (draining,
# symbolization) and reports the profile size and peak memory. Last, the same pairing on a
# CPU-bound process (fixed work, its own CPU time): the cost of sampling alone.
#
# Usage: bench/profile-overhead.sh [-d SECONDS_PER_RUN] [-r PAIRS] [-f PROFILE_SECONDS] [-s SPIN_PAIRS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=1 reps=40 long=60 spins=10
parse_options "[-d SECONDS_PER_RUN] [-r PAIRS] [-f PROFILE_SECONDS] [-s SPIN_PAIRS]" \
    d=secs r=reps f=long s=spins -- "$@"
need_tools apache2 wrk taskset python3
need_root "sampling needs root"
need_two_cpus
overhead=$(build_example reqcost-profile overhead)

make_workdir
port=$(free_port)
write_1k "$dir/htdocs"
fill_conf apache2.conf "$dir" "$port" extra "MaxKeepAliveRequests 0" > "$dir/httpd.conf"
# Its own session: apache2 signals its whole process group when it stops.
setsid taskset -c 1 apache2 -f "$dir/httpd.conf" -DFOREGROUND &
server_pid=$!
wait_port "$port"

url=http://127.0.0.1:$port/1k.txt
echo "# apache2 prefork, 1 KB file, wrk -c1 keep-alive, ${secs}s runs, $reps pairs"
taskset -c 0 "$overhead" pairs "$server_pid" "$url" "$secs" "$reps"
echo "# post-processing"
taskset -c 0 "$overhead" finish "$server_pid" "$url" "$long"
echo "# sampling cost alone: a CPU-bound process on CPU 1, $spins pairs"
taskset -c 0 "$overhead" spin "$spins" </dev/null
