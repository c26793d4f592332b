#!/usr/bin/python3
"""Server CPU per request for each testbed pathology and its twin, measured the same way,
interleaved (A B A B ...). CPU is the server's on-CPU time from /proc/PID/schedstat (scheduler ns
accounting). Figures are for bench/RESULTS.md and the README, not for tests: they are noisy.

  measure.py [--reps 3] [--port 29300] [PAIR ...]     (pairs: see PAIRS below; default all)
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# name: (pathology server, twin, loop.py arguments)
PAIRS = {
    "small-writes": ("small-writes", "clean", ["--path", "/", "--count", "2000"]),
    "busy-wait-fast": ("busy-wait", "clean", ["--path", "/200k.bin", "--count", "300"]),
    "busy-wait-slow": ("busy-wait", "clean",
                       ["--path", "/200k.bin", "--count", "20", "--rcvbuf", "4096", "--read", "1024", "--pace", "0.001"]),
    "poll-scaling-0": ("poll-scaling", "keepalive", ["--http", "--path", "/1k.txt", "--count", "3000"]),
    "poll-scaling-1000": ("poll-scaling", "keepalive",
                          ["--http", "--path", "/1k.txt", "--count", "3000", "--idle", "1000"]),
    "fs-storm": ("fs-storm", "clean", ["--path", "/a/b/c/1k.txt", "--count", "2000"]),
    "log-per-request": ("log-per-request", "log-kept-open", ["--path", "/1k.txt", "--count", "500"]),
    "copy-heavy": ("copy-heavy", "clean", ["--path", "/200k.bin", "--count", "500"]),
    "nagle": ("nagle", "keepalive", ["--http", "--path", "/1k.txt", "--count", "50"]),
    "conn-per-request": ("conn-per-request", "keepalive", ["--http", "--path", "/1k.txt", "--count", "2000"]),
    "alloc-churn": ("alloc-churn", "alloc-reuse", ["--path", "/1k.txt", "--count", "2000"]),
}


def cpu_ns(pid):
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


def run_once(server, port, loop_args):
    err_path = f"/tmp/testbed-measure-{server}.err"
    with open(err_path, "w") as err:
        p = subprocess.Popen([os.path.join(HERE, "build", server), "--port", str(port),
                              "--root", os.path.join(HERE, "content"), "--log", f"/tmp/testbed-measure-{server}.log"],
                             stdout=subprocess.DEVNULL, stderr=err)
    try:
        for _ in range(100):
            with open(err_path) as f:
                if "listening" in f.read():
                    break
            if p.poll() is not None:
                sys.exit(f"measure.py: {server} exited at start; see {err_path}")
            time.sleep(0.02)
        count = int(loop_args[loop_args.index("--count") + 1])
        before = cpu_ns(p.pid)
        t0 = time.monotonic()
        subprocess.run([sys.executable, os.path.join(HERE, "loop.py"), "--port", str(port)] + loop_args,
                       check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        after = cpu_ns(p.pid)
        return (after - before) / count / 1000.0, wall / count * 1e6
    finally:
        p.terminate()
        p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--port", type=int, default=29300)
    ap.add_argument("pairs", nargs="*")
    args = ap.parse_args()
    names = args.pairs or list(PAIRS)
    for n in names:
        if n not in PAIRS:
            sys.exit(f"measure.py: unknown pair '{n}'; choose from {', '.join(PAIRS)}")
    print(f"{'pair':20} {'server':16} {'cpu us/req':>10} {'twin':14} {'cpu us/req':>10} {'ratio':>6}  wall us/req (server, twin)")
    for n in names:
        bad, twin, loop_args = PAIRS[n]
        a, b, wa, wb = [], [], [], []
        for _ in range(args.reps):
            c, w = run_once(bad, args.port, loop_args)
            a.append(c)
            wa.append(w)
            c, w = run_once(twin, args.port, loop_args)
            b.append(c)
            wb.append(w)
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"{n:20} {bad:16} {ma:10.1f} {twin:14} {mb:10.1f} {ma / mb:6.2f}  "
              f"({statistics.median(wa):.0f}, {statistics.median(wb):.0f})", flush=True)


if __name__ == "__main__":
    main()
