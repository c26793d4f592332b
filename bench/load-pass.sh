#!/usr/bin/env bash
# The probes' cost left in a `--load CMD` run's CPU (issue 28): Debian's nginx (one worker,
# pinned to CPU 1, bench/lib.sh's nginx_keepalive_1k) driven by wrk -t1 -cCONNECTIONS for
# SECONDS (pinned to CPU 0), three ways interleaved in rotating order:
#   bare      wrk alone; nginx's CPU per request measured outside reqcost (schedstat of the
#             nginx tree over the wrk run / wrk's requests);
#   load      `reqcost run --pid --load 'wrk ...'`, the default: the command runs probed, then
#             a second time unprobed, and the CPU comes from that run scaled by the two runs'
#             work (cpu_windows.method unprobed-pass);
#   full      the same with --probes-full-time (the probed CPU, as --load had before).
# Each reqcost value is the CPU per request its record REPORTS (per_request.cpu_total_us).
# Result: load/bare and full/bare, paired ratios with 95 % intervals, and the pass's factor
# (its requests over the probed run's).
#
# Usage: bench/load-pass.sh [-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=3 rounds=5 conns=8
parse_options "[-d SECONDS_PER_RUN] [-r ROUNDS] [-c CONNECTIONS]" \
    d=secs r=rounds c=conns -- "$@"
need_tools nginx wrk taskset python3 bpftool
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
reqcost=$(build_reqcost)

make_workdir
nginx_keepalive_1k

# One `reqcost run --load` with FLAGS...; prints the CPU per request (ns) its record reports
# and the pass's factor (1 without a pass).
reported() {
    quiet
    taskset -c 0 "$reqcost" run --pid "$server_pid" --port "$port" --no-sample \
        --load "wrk -t1 -c$conns -d${secs}s $url" -o "$dir/run.json" "$@" > /dev/null
    python3 -c "
import json; p = json.load(open('$dir/run.json'))['phases'][0]
w = p['cpu_windows']
assert w['method'] == ('probed' if '$*' else 'unprobed-pass'), w['reason']
print(round(p['per_request']['cpu_total_us'] * 1000), (w.get('pass_work') or {}).get('factor', 1))"
}

# One way of measuring, by name; prints ns per request (and for reqcost, the pass's factor).
measure() {
    local load
    case $1 in
        bare) quiet; load=$(wrk_load); echo "${load#* } 1" ;;
        load) reported ;;
        full) reported --probes-full-time ;;
    esac
}

taskset -c 0 wrk -t1 -c"$conns" -d2s "$url" > /dev/null
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 KB file, wrk -c$conns keep-alive, ${secs}s runs, $rounds rounds"
echo "# round, then per way (bare load full): CPU ns/request, pass factor"
: > "$dir/rounds"
ways=(bare load full)
for i in $(seq "$rounds"); do
    declare -A v=()
    k=$((i % ${#ways[@]}))
    for way in "${ways[@]:k}" "${ways[@]:0:k}"; do
        v[$way]=$(measure "$way")
    done
    echo "$i ${v[bare]} ${v[load]} ${v[full]}" | tee -a "$dir/rounds"
done
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"

PYTHONPATH="$root/bench" python3 - "$dir/rounds" <<'PY'
import statistics, sys
from ratio import mean_ci
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
print(f"{'bare':26} median {statistics.median(r[1] for r in rows) / 1000:.2f} µs CPU/request")
for col, name in ((3, "--load reported (pass)"), (5, "--load --probes-full-time")):
    mean, low, high = mean_ci([r[col] / r[1] for r in rows])
    print(f"{name:26} median {statistics.median(r[col] for r in rows) / 1000:.2f} µs, "
          f"/bare {mean:.3f} (95% CI {low:.3f} .. {high:.3f})")
print(f"pass factor (its requests / the probed run's): median {statistics.median(r[4] for r in rows):.3f}")
PY
