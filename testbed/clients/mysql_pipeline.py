"""A MySQL client that pipelines: over one connection (user `bench`, no password, database
`bench`) it sends ROUNDS writes of DEPTH `DO 1` queries each, every write whole before it reads
the DEPTH answers (OK packets), then COM_QUIT. libmariadb's clients send one command per turn;
this one makes the server read several commands at once. Prints "queries=N" on success.

usage: mysql_pipeline.py PORT ROUNDS DEPTH
"""

import socket
import struct
import sys

CLIENT_LONG_PASSWORD = 0x1
CLIENT_CONNECT_WITH_DB = 0x8
CLIENT_PROTOCOL_41 = 0x200
CLIENT_SECURE_CONNECTION = 0x8000
CLIENT_PLUGIN_AUTH = 0x80000


def packet(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


def read_packet(conn):
    header = read_exactly(conn, 4)
    length = int.from_bytes(header[:3], "little")
    return read_exactly(conn, length)


def read_exactly(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            sys.exit("connection closed")
        data += chunk
    return data


def expect_ok(conn, what):
    reply = read_packet(conn)
    if reply[:1] != b"\x00":
        sys.exit(f"{what}: {reply!r}")


def main():
    port, rounds, depth = (int(a) for a in sys.argv[1:4])
    conn = socket.create_connection(("127.0.0.1", port))
    read_packet(conn)  # the greeting
    caps = (
        CLIENT_LONG_PASSWORD
        | CLIENT_CONNECT_WITH_DB
        | CLIENT_PROTOCOL_41
        | CLIENT_SECURE_CONNECTION
        | CLIENT_PLUGIN_AUTH
    )
    login = struct.pack("<IIB", caps, 1 << 24, 45) + bytes(23)
    login += b"bench\0" + b"\0" + b"bench\0" + b"mysql_native_password\0"
    conn.sendall(packet(1, login))
    expect_ok(conn, "login")
    query = packet(0, b"\x03DO 1")
    for _ in range(rounds):
        conn.sendall(query * depth)
        for _ in range(depth):
            expect_ok(conn, "DO 1")
    conn.sendall(packet(0, b"\x01"))
    conn.close()
    print(f"queries={rounds * depth}")


main()
