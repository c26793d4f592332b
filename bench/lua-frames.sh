#!/usr/bin/env bash
# What Lua frames cost (docs/interpreters.md): testbed/lua/server.lua run by Debian's lua5.4
# (`wrap` and `links` requests, about 20 and 4 ms of CPU) under `reqcost run --probe-stats
# --probes-full-time --freq 997` (the kernel's BPF run-time statistics on), and the testbed's C
# server `cost-classes` the same way (`a/20000` and `b/4000`, the same CPU) as the baseline
# without Lua. From each record's main phase: the run time of `tag_sample` (the sampling
# program, which walks the Lua stack on a Lua server and only tests a flag elsewhere) per
# sample of the server's main phase (it also runs, and returns at once, on every other
# process's samples, which this includes: its ns per run is given too), and the Lua uprobes' programs (`lua_resume_enter` on coroutine
# resumes, `lua_run_enter` on lua_pcallk) per request. The walk's cost is tag_sample's time
# per server sample on the Lua server less on the C server.
# A uprobe also costs its trap (int3 and the kernel's dispatch), which BPF statistics do not
# count: bench/tls-overhead.sh measures that per call for the TLS uprobes.
#
# Usage: bench/lua-frames.sh [-n REQUESTS] [-r ROUNDS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
requests=600 rounds=3
parse_options "[-n REQUESTS] [-r ROUNDS]" n=requests r=rounds -- "$@"
need_tools lua5.4 python3 make
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
# REQCOST=PATH runs that binary instead of a release build: the figures are the BPF programs'
# run times, which do not depend on how reqcost itself was built.
reqcost=${REQCOST:-$(build_reqcost)}
make -s -C "$root/testbed"
make_workdir
printf 'wrap\nlinks\n' > "$dir/lua.txt"
printf 'a/20000\nb/4000\n' > "$dir/c.txt"

# measure NAME SERVER...: one reqcost run with the requests of $dir/NAME.txt, its record in
# $dir/NAME.json.
measure() {
    local name=$1 port
    shift
    port=$(free_port)
    "$reqcost" run --no-slow-phase --probe-stats --probes-full-time --freq 997 \
        --url "gopher://127.0.0.1:$port/" --requests "$dir/$name.txt" -n "$requests" -c 2 \
        -o "$dir/$name.json" -- "${@//PORT/$port}" \
        > /dev/null 2> "$dir/$name.err" || { cat "$dir/$name.err" >&2; exit 1; }
}

report() {
    python3 - "$1" "$2" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
rec = json.load(open(path))
main = next(p for p in rec["phases"] if p["name"] == "main")
n = main["requests"]["requests"]
progs = {p["name"]: p for p in (main["server"].get("probe_cost") or {}).get("programs", [])}
prof = rec["profile"]
samples = sum(s["count"] for s in prof["stacks"]
              if s.get("tag") is not None and prof["tags"][s["tag"]]["phase"] == "main")
tag = progs.get("tag_sample", {"runs": 0, "run_ns": 0})
cols = [f"{samples} samples; tag_sample {tag['run_ns'] / max(samples, 1):.0f} ns per server sample, {tag['run_ns'] / max(tag['runs'], 1):.0f} ns/run"]
for prog in ["lua_resume_enter", "lua_run_enter"]:
    p = progs.get(prog, {"runs": 0, "run_ns": 0})
    cols.append(f"{prog} {p['runs'] / n:.2f} runs/req {p['run_ns'] / max(p['runs'], 1):.0f} ns/run")
print(f"{name:4} {n} requests; " + "; ".join(cols))
PY
}

for round in $(seq "$rounds"); do
    echo "round $round"
    measure lua lua5.4 "$root/testbed/lua/server.lua" PORT
    report lua "$dir/lua.json"
    measure c "$root/testbed/build/cost-classes" --port PORT --root "$root/testbed/content"
    report c "$dir/c.json"
done
