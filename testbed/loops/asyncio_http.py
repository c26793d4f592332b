#!/usr/bin/python3
"""HTTP/1.1 keep-alive server on asyncio streams, as a new user would write one: /dear/* runs
pbkdf2 (20 000 iterations), anything else answers a short string after --cheap-iterations of
pbkdf2 (default 0). asyncio reads a request in
one loop turn and runs the handler in the next, after another readiness wait.

  asyncio_http.py --port 8080
"""
import argparse
import asyncio
import hashlib


async def serve(reader, writer, cheap_iterations):
    while True:
        line = await reader.readline()
        if not line:
            break
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        path = line.split(b" ")[1] if line.count(b" ") >= 2 else b"/"
        if path.startswith(b"/dear/"):
            body = hashlib.pbkdf2_hmac("sha256", path, b"salt", 20000).hex().encode()
        elif cheap_iterations:
            body = hashlib.pbkdf2_hmac("sha256", path, b"salt", cheap_iterations).hex().encode()
        else:
            body = b"cheap\n"
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        await writer.drain()
    writer.close()


async def main(port, cheap_iterations):
    async def handle(reader, writer):
        await serve(reader, writer, cheap_iterations)

    server = await asyncio.start_server(handle, "127.0.0.1", port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--cheap-iterations", type=int, default=0)
    args = p.parse_args()
    asyncio.run(main(args.port, args.cheap_iterations))
