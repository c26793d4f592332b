#!/usr/bin/env bash
# How far the probes' CPU counters fall from the server's CPU (issue 40, the cpu-total
# invariant of docs/analysis.md): a testbed server under `strace -f -c` (whose stops make
# thousands of switches per phase) measured by `reqcost run --pid`, RUNS times; per run, the
# phase's CPU less attributed + unattributed. What threads hold at the phase's ends (one loop
# turn, tens of µs) is all that should remain; a run the kernel switched in with no
# sched_switch event once lost up to 2.9 ms here (docs/request-attribution.md).
#
# Usage: bench/cpu-total-gap.sh [-r RUNS] [-n REQUESTS] [-s TESTBED_SERVER]
#   REQCOST=path/to/reqcost to measure a given build (default: a release build of this tree)
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
runs=40 requests=100 name=small-writes
parse_options "[-r RUNS] [-n REQUESTS] [-s TESTBED_SERVER]" r=runs n=requests s=name -- "$@"
need_tools strace python3 make
need_root "the probes and strace -p need root"
reqcost=${REQCOST:-$(build_reqcost)}
make -s -C "$root/testbed"

make_workdir
for i in $(seq "$runs"); do
    port=$(free_port)
    "$root/testbed/build/$name" --port "$port" --root "$root/testbed/content" 2>/dev/null &
    server_pid=$!
    wait_port "$port"
    strace -f -c -o "$dir/strace-$i.txt" -p "$server_pid" 2>"$dir/strace-$i.err" &
    strace_pid=$!
    until grep -qs attached "$dir/strace-$i.err"; do sleep 0.05; done
    "$reqcost" run --url "gopher://127.0.0.1:$port/0/1k.txt" --pid "$server_pid" \
        -n "$requests" -c 1 --warmup 0 --no-slow-phase --no-sample --probes-full-time \
        -o "$dir/run-$i.json" >/dev/null 2>&1
    kill -INT "$strace_pid"
    wait "$strace_pid" || true
    kill "$server_pid"
    wait "$server_pid" 2>/dev/null || true
    server_pid=
done

python3 - "$dir" "$runs" <<'PY'
import json, statistics, sys
gaps = []
for i in range(1, int(sys.argv[2]) + 1):
    phase = json.load(open(f"{sys.argv[1]}/run-{i}.json"))["phases"][0]
    r = phase["requests"]
    cpu = phase["server"]["cpu"]["total_ns"]
    gap = cpu - r["attributed_cpu_ns"] - r["unattributed_cpu_ns"]
    gaps.append(gap)
    print(f"run {i}: CPU {cpu / 1e6:.3f} ms, attributed + unattributed "
          f"{(cpu - gap) / 1e6:.3f} ms, gap {gap / 1e3:+.1f} µs")
print(f"{len(gaps)} runs: gap median {statistics.median(gaps) / 1e3:+.1f} µs, "
      f"max {max(gaps) / 1e3:+.1f} µs, over 200 µs in {sum(g > 200_000 for g in gaps)}")
PY
