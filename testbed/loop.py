#!/usr/bin/python3
"""Bounded request loop against a testbed server on 127.0.0.1, for checking syscall signatures
(run the server under `strace -f -c`) and responses. Not a load generator: sequential per
connection, optional concurrency by threads, optional slow reading (small SO_RCVBUF, paced reads).

  loop.py --port 7070 --count 200 --path /1k.txt               # gopher, one connection each
  loop.py --port 7071 --http --count 200 --path /1k.txt         # HTTP keep-alive, one connection
  loop.py --port 7071 --http --close --count 200 --path /1k.txt # HTTP, new connection each
  loop.py --port 7070 --count 20 --path /200k.bin --rcvbuf 4096 --read 1024 --pace 0.001
  loop.py --port 7071 --http --count 2000 --path /1k.txt --idle 500  # 500 idle keep-alive peers

Prints one line: requests, connections, bytes received, errors. Exit 1 if any request failed or a
response size differs from --expect.
"""
import argparse
import socket
import sys
import threading
import time


def recv_all(s, args):
    chunks = []
    while True:
        b = s.recv(args.read)
        if not b:
            return b"".join(chunks)
        chunks.append(b)
        if args.pace:
            time.sleep(args.pace)


def connect(args):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if args.rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.rcvbuf)
    s.connect(("127.0.0.1", args.port))
    return s


def http_response(s, buf, args):
    """Reads one HTTP response from s (buf holds bytes already read); returns (body, rest, closing)."""
    while b"\r\n\r\n" not in buf:
        b = s.recv(args.read)
        if not b:
            raise ConnectionError("connection closed before the response header")
        buf += b
    head, rest = buf.split(b"\r\n\r\n", 1)
    length = None
    closing = False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v)
        elif k.strip().lower() == b"connection" and v.strip().lower() == b"close":
            closing = True
    if length is None:
        raise ConnectionError("response without Content-Length")
    while len(rest) < length:
        b = s.recv(args.read)
        if not b:
            raise ConnectionError("connection closed inside the body")
        rest += b
        if args.pace:
            time.sleep(args.pace)
    return rest[:length], rest[length:], closing


def worker(args, n, totals, lock):
    reqs = conns = nbytes = errors = 0
    s = None
    buf = b""
    for _ in range(n):
        try:
            if args.http:
                if s is None:
                    s = connect(args)
                    conns += 1
                    buf = b""
                hdr = b"Connection: close\r\n" if args.close else b""
                s.sendall(b"GET " + args.path.encode() + b" HTTP/1.1\r\nHost: localhost\r\n" + hdr + b"\r\n")
                body, buf, closing = http_response(s, buf, args)
                if args.close or closing:
                    s.close()
                    s = None
            else:
                s = connect(args)
                conns += 1
                s.sendall(args.path.encode() + b"\r\n")
                body = recv_all(s, args)
                s.close()
                s = None
            reqs += 1
            nbytes += len(body)
            if args.expect is not None and len(body) != args.expect:
                errors += 1
        except OSError:
            errors += 1
            if s is not None:
                s.close()
                s = None
    if s is not None:
        s.close()
    with lock:
        totals[0] += reqs
        totals[1] += conns
        totals[2] += nbytes
        totals[3] += errors


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--path", default="/", help="gopher selector or HTTP path (default /)")
    p.add_argument("--count", type=int, default=100, help="requests in all (bounded, <= 1000000)")
    p.add_argument("--concurrency", type=int, default=1)
    p.add_argument("--http", action="store_true", help="HTTP/1.1 keep-alive instead of gopher")
    p.add_argument("--close", action="store_true", help="HTTP: send Connection: close, reconnect each request")
    p.add_argument("--rcvbuf", type=int, default=0, help="client SO_RCVBUF bytes (slow client)")
    p.add_argument("--read", type=int, default=65536, help="bytes per recv")
    p.add_argument("--pace", type=float, default=0.0, help="seconds to sleep after each recv")
    p.add_argument("--expect", type=int, help="expected body bytes per response")
    p.add_argument("--idle", type=int, default=0, help="extra connections held open, silent, during the run")
    args = p.parse_args()
    if not 0 < args.count <= 1000000 or not 0 < args.concurrency <= 1024:
        sys.exit("loop.py: --count must be 1..1000000 and --concurrency 1..1024")
    if not 0 <= args.idle <= 4096:
        sys.exit("loop.py: --idle must be 0..4096")
    idle = [connect(args) for _ in range(args.idle)]
    totals = [0, 0, 0, 0]
    lock = threading.Lock()
    per = [args.count // args.concurrency + (i < args.count % args.concurrency) for i in range(args.concurrency)]
    threads = [threading.Thread(target=worker, args=(args, n, totals, lock)) for n in per if n]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in idle:
        s.close()
    print(f"requests={totals[0]} connections={totals[1]} bytes={totals[2]} errors={totals[3]}")
    sys.exit(1 if totals[3] else 0)


if __name__ == "__main__":
    main()
