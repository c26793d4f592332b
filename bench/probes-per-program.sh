#!/usr/bin/env bash
# What each of reqcost's BPF programs costs, program by program (what bpftop shows).
#
# Debian's nginx (one worker pinned to CPU 1, bench/lib.sh's nginx_keepalive_1k) under wrk -t1
# at full rate (pinned to CPU 0), with the probes attached through
# crates/probes/examples/watch.rs --stats, which keeps the kernel's BPF run-time statistics on (what
# `kernel.bpf_stats_enabled` does). Around each wrk run, `bpftool prog show` gives every
# program's run time and run count; the script prints, per program, the runs and ns per
# request and the ns per run, and the total against nginx's own CPU per request (schedstat).
# The run counts include every process on the machine (wrk's syscalls, other engineers'
# builds): a program that rejects a process outside the tree still runs.
#
# With -a off, the probes are attached with per-request attribution off instead (through
# crates/probes/examples/requests.rs, statistics off: only the columns on nginx's events), which
# shows what attribution costs.
#
# Usage: bench/probes-per-program.sh [-d SECONDS_PER_RUN] [-r RUNS] [-c CONNECTIONS] [-a on|off]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
secs=5 runs=3 conns=8 attribution=on
parse_options "[-d SECONDS_PER_RUN] [-r RUNS] [-c CONNECTIONS] [-a on|off]" \
    d=secs r=runs c=conns a=attribution -- "$@"
need_tools nginx wrk taskset python3 bpftool
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
case $attribution in
    on) watch=$(build_example reqcost-probes watch) ;;
    off) requests=$(build_example reqcost-probes requests) ;;
    *) echo "usage: -a on|off" >&2; exit 2 ;;
esac

# Attaches the probes for SECONDS in the background; its pid in `w`.
attach() {
    if [ "$attribution" = on ]; then
        "$watch" --stats "$server_pid" "$1" > "$dir/watch.json" 2> "$dir/watch.err" &
    else
        "$requests" "$server_pid" "$1" off > "$dir/watch.json" 2> "$dir/watch.err" &
    fi
    w=$!
}

make_workdir
nginx_keepalive_1k

# The programs whose fds process $1 holds (/proc/PID/fdinfo names their ids), one line each:
# "name run_time_ns run_cnt tree_runs tree_ns", the last two from the probes' own map `own`
# (reqcost.h: runs on the tree's events, and their sampled run time) and, for the syscall
# programs, the calls' counts in `sys`.
programs() {
    local ids maps map
    ids=$(cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^prog_id:/ {print $2}' | sort -u | paste -sd,)
    maps=$(cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^map_id:/ {print $2}' | sort -u | paste -sd,)
    for map in own sys; do
        bpftool map dump id "$(bpftool map show --json | python3 -c "
import json, sys
print(*[m['id'] for m in json.load(sys.stdin) if m['id'] in {$maps} and m.get('name') == '$map'])")" \
            --json > "$dir/$map.json"
    done
    bpftool prog show --json | python3 -c "
import json, sys
ids = {$ids}
names = ['sys_enter', 'sys_exit', 'sched_switch', 'sched_wakeup', 'sched_wakeup_new',
         'page_fault_user', 'page_fault_kernel', 'sched_process_fork', 'sched_process_exit']
own = [0] * 2 * len(names)
for cpu in json.load(open('$dir/own.json'))[0]['values']:
    raw = bytes(int(b, 16) for b in cpu['value'])
    for i in range(len(own)):
        own[i] += int.from_bytes(raw[8 * i:8 * i + 8], 'little')
# The syscall programs' runs on tracked calls are the calls' counts in sys (its first field of
# three per syscall); own holds only their other runs.
calls = 0
for cpu in json.load(open('$dir/sys.json'))[0]['values']:
    raw = bytes(int(b, 16) for b in cpu['value'])
    calls += sum(int.from_bytes(raw[i:i + 8], 'little') for i in range(0, len(raw), 24))
own[0] += calls
own[2] += calls
for p in json.load(sys.stdin):
    if p['id'] in ids:
        # The TLS uprobes and the sample tagger have no slot in the own map: whole-machine figures only.
        tree = own[2 * names.index(p['name']):][:2] if p['name'] in names else [0, 0]
        print(p['name'], p.get('run_time_ns', 0), p.get('run_cnt', 0), *tree)"
}

taskset -c 0 wrk -t1 -c"$conns" -d2s "$url" > /dev/null
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "# nginx $(nginx -v 2>&1 | sed 's/.*\///'), 1 KB file, wrk -t1 -c$conns keep-alive, ${secs}s runs, $runs runs, attribution $attribution"
: > "$dir/all"
for i in $(seq "$runs"); do
    quiet
    attach $((secs + 3))
    wait_attached "$w" "$dir/watch.err"
    programs "$w" > "$dir/before"
    load=$(wrk_load)
    programs "$w" > "$dir/after"
    wait "$w"
    python3 - "$dir/before" "$dir/after" "$load" "$i" >> "$dir/all" <<'PY'
import sys
read = lambda p: {l.split()[0]: tuple(map(int, l.split()[1:])) for l in open(p)}
before, after = read(sys.argv[1]), read(sys.argv[2])
requests, cpu = map(int, sys.argv[3].split())
for name, now in after.items():
    print(sys.argv[4], name, requests, cpu, *(a - b for a, b in zip(now, before[name])))
PY
done
echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$dir/all" <<'PY'
import collections, statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
per = collections.defaultdict(list)
cpu = {}
for run, name, requests, nginx_ns, *v in rows:
    per[name].append((int(requests), *map(int, v)))
    cpu[run] = int(nginx_ns)
med = statistics.median
print(f"nginx CPU per request (median of runs): {med(cpu.values()) / 1000:.2f} µs")
print("program              all events: runs/req ns/run ns/req | tree's events: runs/req ns/run ns/req")
tot, tree = collections.defaultdict(float), collections.defaultdict(float)
for name, vals in sorted(per.items(), key=lambda kv: -sum(v[1] for v in kv[1])):
    div = lambda a, b: a / b if b else 0.0
    print(f"{name:20} {med(n / r for r, ns, n, tr, tns in vals):20.2f}"
          f" {med(div(ns, n) for r, ns, n, tr, tns in vals):6.0f}"
          f" {med(ns / r for r, ns, n, tr, tns in vals):6.0f} |"
          f" {med(tr / r for r, ns, n, tr, tns in vals):23.2f}"
          f" {med(div(tns, tr) for r, ns, n, tr, tns in vals):6.0f}"
          f" {med(tns / r for r, ns, n, tr, tns in vals):6.0f}")
for run, name, requests, nginx_ns, ns, n, tr, tns in rows:
    tot[run] += int(ns) / int(requests)
    tree[run] += int(tns) / int(requests)
c = med(cpu.values())
print(f"all programs, ns/request: {med(tot.values()):.0f} on every event of the machine "
      f"({med(tot.values()) / c:.1%} of nginx's CPU/request), {med(tree.values()):.0f} on nginx's "
      f"events ({med(tree.values()) / c:.1%})")
PY
