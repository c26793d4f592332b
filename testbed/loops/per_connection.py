#!/usr/bin/python3
"""A gopher server run once per connection, inetd style: the connection is its stdin and stdout
(socat TCP-LISTEN:PORT,fork EXEC:'per_connection.py',nofork; without nofork, socat relays
through a socketpair). /dear/* runs pbkdf2 (20 000 iterations), anything else answers a short
string.
"""
import hashlib
import os

request = b""
while not request.endswith(b"\n"):
    chunk = os.read(0, 1024)
    if not chunk:
        break
    request += chunk
selector = request.strip()
if selector.startswith(b"/dear/"):
    body = hashlib.pbkdf2_hmac("sha256", selector, b"salt", 20000).hex().encode() + b"\n"
else:
    body = b"cheap\n"
os.write(1, body)
