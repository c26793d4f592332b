"""A WSGI app that asks Redis three times per request (/slow: one EVAL that costs Redis
milliseconds), over one kept connection per worker."""
import os
import socket

REDIS = os.environ.get("REDIS", "127.0.0.1:6379")
_conn = None


def _redis():
    global _conn
    if _conn is None:
        if REDIS.startswith("/"):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(REDIS)
        else:
            host, port = REDIS.rsplit(":", 1)
            s = socket.create_connection((host, int(port)))
        _conn = s.makefile("rwb")
    return _conn


def _command(*words):
    c = _redis()
    c.write(b"*%d\r\n" % len(words))
    for w in words:
        c.write(b"$%d\r\n%s\r\n" % (len(w), w))
    c.flush()
    line = c.readline()
    if line.startswith(b"$") and line[1:2] != b"-":
        c.read(int(line[1:]) + 2)
    return line


# A query that costs the database milliseconds: a Lua loop Redis runs inside EVAL, of
# SLOW_LOOPS turns (a slower database for tests that compare two).
SLOW = b"local n = 0 for i = 1, %d do n = n + i end return n" % int(
    os.environ.get("SLOW_LOOPS", "300000")
)


def app(environ, start_response):
    if environ.get("PATH_INFO") == "/slow":
        _command(b"EVAL", SLOW, b"0")
    else:
        for key in (b"a", b"b", b"c"):
            _command(b"GET", key)
    body = b"ok\n"
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]
