#!/usr/bin/env bash
# What a syscall counted past its request's 16 slots costs the probes (issue 40): a request's
# first 16 distinct syscalls are counted in slots of its own, any further one in the `spilled`
# hash map (crates/probes/src/bpf/attribution.bpf.h).
#
# One Python server (pinned to CPU 1, the probes attached through
# crates/probes/examples/watch.rs) serves two selectors that make the same calls in two
# orders: `slot` makes N ioctl(TIOCOUTQ) first (in a slot), then 20 other distinct syscalls;
# `spill` makes the 20 first, so that its N ioctl are counted in the map. The client (CPU 0)
# sends them in interleaved pairs (slot/spill, spill/slot, ...) and reads the server's CPU
# (schedstat) around each request. The result: the paired spill/slot ratio of CPU per request
# with a 95 % interval, and what one spilled call adds, in ns.
#
# Usage: bench/top-syscalls-spill.sh [-n IOCTLS_PER_REQUEST] [-r PAIRS]
set -euo pipefail

# shellcheck source-path=SCRIPTDIR source=lib.sh
. "$(dirname "$0")/lib.sh"
calls=20000 pairs=20
parse_options "[-n IOCTLS_PER_REQUEST] [-r PAIRS]" n=calls r=pairs -- "$@"
need_tools taskset python3
need_root "the probes need root (or CAP_BPF+CAP_PERFMON)"
need_two_cpus
watch=$(build_example reqcost-probes watch)

make_workdir
port=$(free_port)
cat > "$dir/server.py" <<'PY'
import fcntl, os, resource, socket, sys, termios
calls = int(sys.argv[2])
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen(8)

def others():
    os.getuid(); os.getgid(); os.geteuid(); os.getegid(); os.getppid(); os.getpgrp()
    os.getsid(0); os.times(); os.uname(); os.getcwd(); os.umask(0o22); os.sched_yield()
    os.getpriority(os.PRIO_PROCESS, 0); os.access("/", os.R_OK); os.stat("/")
    os.sched_getaffinity(0); os.getgroups(); os.getresuid(); os.getresgid()
    resource.getrlimit(resource.RLIMIT_NOFILE)

def ioctls(fd):
    for _ in range(calls):
        fcntl.ioctl(fd, termios.TIOCOUTQ, bytes(4))

while True:
    conn, _ = listener.accept()
    selector = conn.recv(64)
    if selector == b"spill\n":
        others(); ioctls(conn.fileno())
    else:
        ioctls(conn.fileno()); others()
    conn.sendall(b"ok\n")
    conn.close()
PY
taskset -c 1 /usr/bin/python3 "$dir/server.py" "$port" "$calls" &
server_pid=$!
wait_port "$port"
"$watch" "$server_pid" 100000 > /dev/null 2> "$dir/watch.err" &
w=$!
wait_attached "$w" "$dir/watch.err"

echo "# $(date -u +%FT%TZ) load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs"
echo "# $calls ioctl per request, $pairs pairs, probes attached (watch.rs)"
taskset -c 0 python3 - "$port" "$server_pid" "$pairs" "$calls" "$root/bench" <<'PY'
import socket, statistics, sys
sys.path.insert(0, sys.argv[5])
from ratio import mean_ci
port, pid, pairs, calls = (int(a) for a in sys.argv[1:5])

def cpu():
    return int(open(f"/proc/{pid}/schedstat").read().split()[0])

def request(selector):
    before = cpu()
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.sendall(selector + b"\n")
        assert s.recv(8) == b"ok\n"
        s.recv(8)
    return cpu() - before

request(b"slot"), request(b"spill")
rows = []
for i in range(pairs):
    order = [b"slot", b"spill"] if i % 2 == 0 else [b"spill", b"slot"]
    got = {sel: request(sel) for sel in order}
    rows.append((got[b"slot"], got[b"spill"]))
mean, low, high = mean_ci([spill / slot for slot, spill in rows])
slot = statistics.median(r[0] for r in rows)
spill = statistics.median(r[1] for r in rows)
print(f"slot  median {slot / 1e6:.2f} ms CPU/request ({slot / calls:.0f} ns per ioctl, all in)")
print(f"spill median {spill / 1e6:.2f} ms CPU/request ({spill / calls:.0f} ns per ioctl, all in)")
print(f"spill/slot {mean:.3f} (95% CI {low:.3f} .. {high:.3f}), "
      f"{statistics.median(b - a for a, b in rows) / calls:+.0f} ns per spilled call (median of pairs)")
PY
kill "$w" 2>/dev/null || true
wait "$w" 2>/dev/null || true
