"""A WSGI app on PostgreSQL through psycopg2, as users run it: each worker keeps a pool of
connections (PG_POOL=0: a new connection per request, closed after it, so that PostgreSQL
forks a backend per request). /orders asks three queries, /slow one aggregate that costs the
database milliseconds. Autocommit, so that psycopg2 sends no BEGIN: one statement a query."""
import os

import psycopg2
import psycopg2.pool

# A libpq host: a directory holds the Unix socket, anything else is a TCP host.
DSN = dict(
    host=os.environ.get("PGHOST", "127.0.0.1"),
    port=int(os.environ.get("PGPORT", "5432")),
    user="postgres",
    dbname="postgres",
)
POOLED = os.environ.get("PG_POOL", "1") != "0"
_pool = None

ORDERS = (
    "SELECT relname FROM pg_class WHERE oid = 1259",
    "SELECT nspname FROM pg_namespace WHERE oid = 11",
    "SELECT typname FROM pg_type WHERE oid = 23",
)
SLOW = "SELECT sum(g) FROM generate_series(1, 100000) AS g"


def _connect():
    conn = psycopg2.connect(**DSN)
    conn.autocommit = True
    return conn


def _query(statements):
    global _pool
    if not POOLED:
        conn = _connect()
    else:
        if _pool is None:
            _pool = psycopg2.pool.ThreadedConnectionPool(1, 4, **DSN)
        conn = _pool.getconn()
        conn.autocommit = True
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
                cur.fetchall()
    finally:
        if POOLED:
            _pool.putconn(conn)
        else:
            conn.close()


def app(environ, start_response):
    _query([SLOW] if environ.get("PATH_INFO") == "/slow" else ORDERS)
    body = b"ok\n"
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]
