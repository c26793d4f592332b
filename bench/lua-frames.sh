#!/usr/bin/env bash
# What Lua frames cost (docs/interpreters.md): testbed/lua/server.lua run by Debian's lua5.4
# under `reqcost run --probe-stats --freq 997` (the kernel's BPF run-time statistics on), and
# the testbed's C server `clean` the same way as the baseline without Lua. From each record's
# main phase: the runs and ns per run of `tag_sample` (the sampling program, which walks the
# Lua stack on a Lua server and only tests a flag elsewhere) and of the Lua uprobes' programs
# (`lua_resume_enter` on coroutine resumes, `lua_run_enter` on lua_pcallk/lua_callk), per
# request; the walk's cost is tag_sample's ns per run on the Lua server less on the C server.
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
reqcost=$(build_reqcost)
make -s -C "$root/testbed"
make_workdir
printf 'wrap\nlinks\n' > "$dir/lua.txt"

# measure NAME SERVER...: one reqcost run, its record in $dir/NAME.json.
measure() {
    local name=$1 port
    shift
    port=$(free_port)
    "$reqcost" run --no-slow-phase --probe-stats --freq 997 --url "gopher://127.0.0.1:$port/" \
        --requests "$dir/lua.txt" -n "$requests" -c 2 -o "$dir/$name.json" -- "${@//PORT/$port}" \
        > /dev/null 2> "$dir/$name.err" || { cat "$dir/$name.err" >&2; exit 1; }
}

report() {
    python3 - "$1" "$2" <<'PY'
import json, sys
name, path = sys.argv[1], sys.argv[2]
rec = json.load(open(path))
main = next(p for p in rec["phases"] if p["name"] == "main")
n = main["requests"]["requests"]
progs = {p["name"]: p for p in (main.get("probe_cost") or {}).get("programs", [])}
cols = []
for prog in ["tag_sample", "lua_resume_enter", "lua_run_enter"]:
    p = progs.get(prog, {"runs": 0, "run_ns": 0})
    per_run = p["run_ns"] / p["runs"] if p["runs"] else 0
    cols.append(f"{prog} {p['runs'] / n:.2f} runs/req {per_run:.0f} ns/run")
print(f"{name:6} {n} requests; " + "; ".join(cols))
PY
}

for round in $(seq "$rounds"); do
    echo "round $round"
    measure lua lua5.4 "$root/testbed/lua/server.lua" PORT
    report lua "$dir/lua.json"
    measure c "$root/testbed/build/clean" --port PORT --root "$root/testbed/content"
    report c "$dir/c.json"
done
