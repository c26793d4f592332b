#!/usr/bin/env python3
"""A memcached text-protocol client with fixed keys and counts, for reqcost's --load.

Each connection stores its keys with `set` and then reads them back with `get`, PIPELINE
commands per write. With --noreply the sets ask for no answer, so they stream on without the
server ever answering between them. Every value holds `get x` and a CRLF, which a reader that
took the data block for commands would count. Prints what it sent and checks every answer.
"""

import argparse
import socket
import sys
import threading

VALUE = b"get x\r\nxxxxxxxxxxxxxxxxxxxxxxxxx"


def read_until(sock, buf, marker, count):
    """Reads until `marker` has arrived `count` times past `buf`; the bytes after the last."""
    while buf.count(marker) < count:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("server closed the connection")
        buf += chunk
    parts = buf.split(marker)
    return marker.join(parts[count:])


def connection(args, index, errors):
    try:
        sock = socket.create_connection(("127.0.0.1", args.port))
        keys = [b"key:%d:%d" % (index, i) for i in range(args.keys)]
        noreply = b" noreply" if args.noreply else b""
        buf = b""
        for start in range(0, len(keys), args.pipeline):
            batch = keys[start : start + args.pipeline]
            sock.sendall(
                b"".join(
                    b"set %s 0 0 %d%s\r\n%s\r\n" % (k, len(VALUE), noreply, VALUE) for k in batch
                )
            )
            if not args.noreply:
                buf = read_until(sock, buf, b"STORED\r\n", len(batch))
        for start in range(0, len(keys), args.pipeline):
            batch = keys[start : start + args.pipeline]
            sock.sendall(b"".join(b"get %s\r\n" % k for k in batch))
            buf = read_until(sock, buf, b"END\r\n", len(batch))
        sock.close()
    except Exception as e:  # reported once the other connections end
        errors.append(f"connection {index}: {e}")


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--connections", type=int, default=2)
    p.add_argument("--keys", type=int, default=100, help="keys per connection")
    p.add_argument("--pipeline", type=int, default=1, help="commands per write")
    p.add_argument("--noreply", action="store_true", help="sets ask for no answer")
    args = p.parse_args()
    errors = []
    threads = [
        threading.Thread(target=connection, args=(args, i, errors))
        for i in range(args.connections)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        sys.exit("memcache_load: " + "; ".join(errors))
    n = args.connections * args.keys
    print(f"memcache_load: {n} set, {n} get commands sent")


if __name__ == "__main__":
    main()
