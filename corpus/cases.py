"""The corpus: real servers in misconfigurations their users make, each beside its fixed twin.

Each case's `bad` and `twin` take the variant's Scratch and return (server argv, reqcost run
arguments). `expected` is the rule id of the catalog (docs/findings.md) that should rank FIRST on
the bad variant."""

import gzip
import os

from servers import (apache2, binary_file, caddy, gunicorn, h2o, haproxy, lighttpd, mariadb,
                     memcached, nginx, node_gzip, postgresql, redis, text_file)

MIB = 1024 * 1024

def url(s, path, scheme="http"):
    return f"{scheme}://127.0.0.1:{s.port}/{path}"


def http_load(s, path, n, *extra, scheme="http"):
    return ["--url", url(s, path, scheme), "-n", str(n), "--no-slow-phase"] + list(extra)


def files(s, **named):
    for name, data in named.items():
        s.write(name.replace("__", "/").replace("_dot_", "."), data)


def nginx_small(http_extra, n=2000, *load):
    def variant(s):
        files(s, www__1k_dot_txt=b"x" * 1024)
        return nginx(s, http_extra), http_load(s, "1k.txt", n, *load)
    return variant


def text_page(s, precompress):
    """www/234k.txt (and its .gz when `precompress`), and the load asking for it gzipped."""
    text = text_file(234 * 1024)
    s.write("www/234k.txt", text)
    if precompress:
        s.write("www/234k.txt.gz", gzip.compress(text, 9))
    return http_load(s, "234k.txt", 60, "--header", "Accept-Encoding: gzip")


def nginx_gzip(http_extra, precompress):
    def variant(s):
        load = text_page(s, precompress)
        return nginx(s, "access_log off; " + http_extra), load
    return variant


def nginx_log(access_log):
    def variant(s):
        files(s, www__1k_dot_txt=b"x" * 1024)
        s.write("logs/.keep", b"")
        os.chmod(s.join("logs"), 0o777)  # the worker (nobody) opens the per-host files
        return nginx(s, s.fill(access_log)), http_load(s, "1k.txt", 2000)
    return variant


def nginx_tls(server_extra):
    def variant(s):
        files(s, www__1k_dot_txt=b"x" * 1024)
        return (nginx(s, "access_log off;", server_extra, tls=True),
                http_load(s, "1k.txt", 300, "--no-keepalive", scheme="https"))
    return variant


def apache2_variant(extra, path="1k.txt", size=1024, n=1000, *load):
    def variant(s):
        s.write("htdocs/" + path, binary_file(size) if size >= MIB else b"x" * size)
        return apache2(s, s.fill(extra)), http_load(s, path, n, *load)
    return variant


def lighttpd_big(extra):
    def variant(s):
        files(s, www__1m_dot_bin=binary_file(MIB))
        return lighttpd(s, extra), http_load(s, "1m.bin", 300)
    return variant


def redis_variant(*args):
    def variant(s):
        load = (f"redis-benchmark -h 127.0.0.1 -p {s.port} -t set -n 20000 -c 10 -d 64 -q")
        return redis(s, *args), ["--load", load, "--port", str(s.port)]
    return variant


def postgres_variant(pgbench_flags, *settings):
    def variant(s):
        load = (f"pgbench -h 127.0.0.1 -p {s.port} -U postgres -n {pgbench_flags} postgres")
        return postgresql(s, *settings), ["--load", load, "--port", str(s.port)]
    return variant


def gunicorn_variant(*args):
    def variant(s):
        # Sync workers close each connection whatever the client asks.
        return gunicorn(s, *args), http_load(s, "", 300, "--no-keepalive")
    return variant


PHP_CGI = "/usr/bin/php-cgi"


def php_lighttpd(extra):
    def variant(s):
        files(s, www__hello_dot_php=b'<?php echo str_repeat("x", 1024);\n')
        return lighttpd(s, s.fill(extra)), http_load(s, "hello.php", 300)
    return variant


def haproxy_variant(defaults):
    def variant(s):
        return haproxy(s, defaults), http_load(s, "", 2000)
    return variant


def h2o_gzip(path, precompress):
    def variant(s):
        load = text_page(s, precompress)
        return h2o(s, path), load
    return variant


def caddy_gzip(site, precompress):
    def variant(s):
        load = text_page(s, precompress)
        return caddy(s, site), load
    return variant


def lighttpd_small(extra):
    def variant(s):
        files(s, www__1k_dot_txt=b"x" * 1024)
        return lighttpd(s, extra), http_load(s, "1k.txt", 2000)
    return variant


DEEP = "a/b/c/d/e/f/1k.txt"

CASES = [
    dict(name="apache2-no-sendfile-no-mmap", server="apache2 2.4 prefork (Debian)",
         misconfig="`EnableSendfile Off` + `EnableMMAP Off` serving 1 MiB",
         fix="`EnableSendfile On`", expected="copy-through-user",
         why="Apache's default is EnableSendfile Off; EnableMMAP Off is the NFS/shared-folder advice",
         bad=apache2_variant("EnableSendfile Off\nEnableMMAP Off", "1m.bin", MIB, 300),
         twin=apache2_variant("EnableSendfile On", "1m.bin", MIB, 300)),
    dict(name="lighttpd-writev", server="lighttpd 1.4.69 (Debian)",
         misconfig='`server.network-backend = "writev"` serving 1 MiB',
         fix="the default backend (linux-sendfile)", expected="copy-through-user",
         why="copied from old tuning guides and from configs for filesystems without sendfile",
         bad=lighttpd_big('server.network-backend = "writev"'),
         twin=lighttpd_big('server.network-backend = "linux-sendfile"')),
    dict(name="nginx-gzip-level-9", server="nginx 1.22 (Debian)",
         misconfig="`gzip on; gzip_comp_level 9` on a 234 KB text file, every request",
         fix="`gzip_static on` with a precompressed .gz", expected="compress-per-request",
         why="level 9 is the 'best compression' setting tuning posts recommend",
         bad=nginx_gzip("gzip on; gzip_comp_level 9; gzip_types text/plain;", False),
         twin=nginx_gzip("gzip_static on;", True)),
    dict(name="nginx-log-path-variables", server="nginx 1.22 (Debian)",
         misconfig="`access_log logs/$host.log` (a variable in the path, no open_log_file_cache)",
         fix="a fixed path (or `open_log_file_cache`)", expected="log-per-request",
         why="per-virtual-host logs by variable; nginx then opens and closes the file per write",
         bad=nginx_log("access_log {dir}/logs/$host.log;"),
         twin=nginx_log("access_log {dir}/logs/access.log;")),
    dict(name="nginx-keepalive-timeout-0", server="nginx 1.22 (Debian)",
         misconfig="`keepalive_timeout 0` under keep-alive clients",
         fix="the default `keepalive_timeout 75s`", expected="conn-per-request",
         why="set to 0 to 'free workers' or to work around a load balancer's idle timeout",
         bad=nginx_small("access_log off; keepalive_timeout 0;"),
         twin=nginx_small("access_log off;")),
    dict(name="nginx-tls-no-resumption", server="nginx 1.22 (Debian), OpenSSL 3",
         misconfig="`ssl_session_tickets off` and no `ssl_session_cache`: a full handshake per "
                   "connection", fix="`ssl_session_cache shared:SSL:10m`",
         expected="tls-handshake",
         why="hardening guides turn tickets off; users copy that line without the cache line",
         bad=nginx_tls("ssl_session_tickets off; ssl_session_cache off;"),
         twin=nginx_tls("ssl_session_tickets off; ssl_session_cache shared:SSL:1m;")),
    dict(name="apache2-keepalive-off", server="apache2 2.4 prefork (Debian)",
         misconfig="`KeepAlive Off` under keep-alive clients", fix="`KeepAlive On`",
         expected="conn-per-request",
         why="turned off to spare prefork children, as old tuning guides advise",
         bad=apache2_variant("KeepAlive Off"), twin=apache2_variant("KeepAlive On")),
    dict(name="apache2-child-per-connection", server="apache2 2.4 prefork (Debian)",
         misconfig="`MaxConnectionsPerChild 1` (a new child per connection)",
         fix="`MaxConnectionsPerChild 0`", expected="process-per-request",
         why="set low to contain a leaking module (mod_php), down to 1",
         bad=apache2_variant("MaxConnectionsPerChild 1", "1k.txt", 1024, 300, "--no-keepalive"),
         twin=apache2_variant("MaxConnectionsPerChild 0", "1k.txt", 1024, 300, "--no-keepalive")),
    dict(name="apache2-allowoverride-all", server="apache2 2.4 prefork (Debian)",
         misconfig="`AllowOverride All` from / on a deep document path (.htaccess looked for in "
                   "every directory)", fix="`AllowOverride None`", expected="fs-storm",
         why="the common advice to make .htaccess (WordPress permalinks) work",
         bad=apache2_variant("<Directory />\n    AllowOverride All\n</Directory>", DEEP),
         twin=apache2_variant("<Directory />\n    AllowOverride None\n</Directory>", DEEP)),
    dict(name="redis-appendfsync-always", server="redis 7.0 (Debian)",
         misconfig="`appendonly yes` + `appendfsync always` under 10 clients",
         fix="`appendfsync everysec`", expected="durable-syncs",
         why="chosen for 'no data loss' without measuring it",
         bad=redis_variant("--appendonly", "yes", "--appendfsync", "always"),
         twin=redis_variant("--appendonly", "yes", "--appendfsync", "everysec")),
    dict(name="postgresql-sync-commit", server="PostgreSQL 15 (Debian), pgbench TPC-B",
         misconfig="`synchronous_commit on`: a WAL flush per transaction for data that can lose "
                   "its last second", fix="`synchronous_commit off` (or commit_delay)",
         expected="durable-syncs",
         why="the default, kept for session stores and queues that do not need it",
         bad=postgres_variant("-c 4 -t 250", "synchronous_commit=on"),
         twin=postgres_variant("-c 4 -t 250", "synchronous_commit=off")),
    dict(name="postgresql-connection-per-transaction", server="PostgreSQL 15 (Debian), pgbench -S",
         misconfig="a new connection per transaction (a backend forked for each)",
         fix="persistent connections or a pooler (pgbouncer)", expected="process-per-request",
         why="PHP/CGI applications and scripts connecting per request without a pool",
         bad=postgres_variant("-S -C -c 2 -t 500"), twin=postgres_variant("-S -c 2 -t 500")),
    dict(name="gunicorn-max-requests-1", server="gunicorn 20.1 (Debian), sync workers",
         misconfig="`--max-requests 1` (a worker recycled after every request)",
         fix="`--max-requests 0` (or thousands, with jitter)", expected="process-per-request",
         why="set very low to contain a memory leak",
         bad=gunicorn_variant("--max-requests", "1"), twin=gunicorn_variant("--max-requests", "0")),
    dict(name="php-cgi-per-request", server="PHP 8.2 php-cgi behind lighttpd 1.4.69 (Debian)",
         misconfig='PHP run as CGI: `cgi.assign = (".php" => "/usr/bin/php-cgi")`, an interpreter '
                   "started for every request",
         fix="the same php-cgi as FastCGI (`fastcgi.server`, `bin-path`): long-lived PHP "
             "processes", expected="process-per-request",
         why="the shortest way to get PHP running in lighttpd, in many old how-tos",
         bad=php_lighttpd('server.modules += ("mod_cgi")\n'
                          f'cgi.assign = (".php" => "{PHP_CGI}")'),
         twin=php_lighttpd('server.modules += ("mod_fastcgi")\n'
                           f'fastcgi.server = (".php" => (("bin-path" => "{PHP_CGI}", '
                           '"socket" => "{dir}/php.sock", "max-procs" => 1)))')),
    dict(name="haproxy-httpclose", server="HAProxy 2.6 (Debian)",
         misconfig="`option httpclose` under keep-alive clients",
         fix="the default keep-alive (no `option httpclose`)", expected="conn-per-request",
         why="copied from HAProxy 1.4-era configs, where it was the way to see every request",
         bad=haproxy_variant("option httpclose"), twin=haproxy_variant("")),
    dict(name="h2o-compress-per-request", server="H2O 2.2.5 (Debian)",
         misconfig="`compress: ON` on a 234 KB text file, compressed again for every request",
         fix="`file.send-compressed: ON` with a precompressed .gz", expected="compress-per-request",
         why="`compress: ON` is the one line H2O's docs show for gzip; static files need the other",
         bad=h2o_gzip("        compress: ON", False),
         twin=h2o_gzip("        file.send-compressed: ON", True)),
    dict(name="caddy-encode-per-request", server="Caddy 2.6 (Debian)",
         misconfig="`encode gzip` on a 234 KB text file, compressed again for every request",
         fix="`file_server { precompressed gzip }` with a precompressed .gz",
         expected="compress-per-request",
         why="`encode zstd gzip` is in most Caddyfiles; precompressed needs the .gz files made",
         bad=caddy_gzip("encode gzip\n    file_server", False),
         twin=caddy_gzip("file_server {\n        precompressed gzip\n    }", True)),
    dict(name="lighttpd-keepalive-off", server="lighttpd 1.4.69 (Debian)",
         misconfig="`server.max-keep-alive-requests = 0` under keep-alive clients",
         fix="the default (1000 requests per connection)", expected="conn-per-request",
         why="keep-alive turned off against idle connections (slowloris advice)",
         bad=lighttpd_small("server.max-keep-alive-requests = 0"),
         twin=lighttpd_small("")),
]


def mariadb_inserts(*settings):
    def variant(s):
        table = "CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB;"
        load = (f"mysqlslap --no-defaults -h 127.0.0.1 -P {s.port} -u bench "
                "--create-schema=bench --no-drop --concurrency=4 --number-of-queries=4000 "
                "--iterations=1 --query=\"INSERT INTO t (v) VALUES ('reqcost corpus row')\"")
        return mariadb(s, table, *settings), ["--load", load, "--port", str(s.port)]
    return variant


CASES += [
    dict(name="mariadb-flush-log-at-commit", server="MariaDB 10.11 (Debian), mysqlslap inserts",
         misconfig="`innodb_flush_log_at_trx_commit=1` under autocommit single-row inserts (a "
                   "redo log flush per statement)",
         fix="`innodb_flush_log_at_trx_commit=2` (written per commit, flushed once a second)",
         expected="durable-syncs",
         why="the default, kept for logging and metrics tables that can lose their last second",
         bad=mariadb_inserts("--innodb-flush-log-at-trx-commit=1"),
         twin=mariadb_inserts("--innodb-flush-log-at-trx-commit=2")),
]


def memcached_variant(*args):
    def variant(s):
        load = (f"memcslap --servers=127.0.0.1:{s.port} --concurrency=4 --execute-number=5000 "
                "--test=get")
        return memcached(s, *args, log="memcached.log"), ["--load", load, "--port", str(s.port)]
    return variant


CASES += [
    dict(name="memcached-vv-logfile", server="memcached 1.6 (Debian), memcslap",
         misconfig="`-vv` with a `logfile` (every command and answer written to the log)",
         fix="no `-v` (errors only)", expected="log-per-request",
         why="-vv turned on in memcached.conf to debug a client and left there",
         bad=memcached_variant("-vv"), twin=memcached_variant()),
]


def node_gzip_variant(when):
    def variant(s):
        page = s.write("234k.txt", text_file(234 * 1024))
        return (node_gzip(s, page, when),
                http_load(s, "234k.txt", 200, "--header", "Accept-Encoding: gzip"))
    return variant


CASES += [
    dict(name="node-gzip-per-request", server="Node.js 20 (the nodejs package here), http + zlib",
         misconfig="`zlib.gzipSync` of the same 234 KiB page for every response",
         fix="the page compressed once and the gzipped buffer served",
         expected="compress-per-request",
         why="compression done in the handler (or by middleware) for content that never changes",
         bad=node_gzip_variant("per-request"), twin=node_gzip_variant("at-start-up")),
]
