"""How each real server of the corpus is set up in a scratch directory: files to serve, config,
a self-signed certificate, a database with pgbench's tables. Each function returns the argv that
runs the server in the foreground, for `reqcost run -- ARGV`."""

import os
import subprocess

POSTGRESQL_BIN = "/usr/lib/postgresql/15/bin"


class Scratch:
    """A case variant's own directory (readable by the users servers drop to) and free port."""

    def __init__(self, path, port):
        self.path = path
        self.port = port
        os.makedirs(path, exist_ok=True)
        os.chmod(path, 0o755)

    def join(self, *parts):
        return os.path.join(self.path, *parts)

    def write(self, name, data):
        path = self.join(name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    def fill(self, text):
        return text.replace("{dir}", self.path).replace("{port}", str(self.port))


def binary_file(size):
    """`size` bytes that no layer compresses away, the same every run."""
    block = bytes((i * 131 + 7) % 251 for i in range(4096))
    return (block * (size // len(block) + 1))[:size]


def text_file(size):
    """Words from a fixed-seed generator: text that compresses as a web page does (about 3:1)."""
    words = ("the quick brown fox jumps over lazy dog server request cost kernel socket buffer "
             "compress level").split()
    state, out, length = 0x2545F4914F6CDD1D, [], 0
    mask = (1 << 64) - 1
    while length < size:
        for i in range(12):
            state ^= (state << 13) & mask
            state ^= state >> 7
            state ^= (state << 17) & mask
            word = words[state % 16] + ("\n" if i == 11 else " ")
            out.append(word)
            length += len(word)
    return "".join(out)[:size].encode()


def self_signed(s):
    cert, key = s.join("cert.pem"), s.join("key.pem")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out",
         cert, "-days", "2", "-subj", "/CN=127.0.0.1"],
        check=True, capture_output=True)
    return cert, key


NGINX_CONF = """worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/error.log;
events { worker_connections 1024; }
http {
    include /etc/nginx/mime.types;
    %(http)s
    client_body_temp_path {dir}/tmp;
    proxy_temp_path {dir}/tmp;
    fastcgi_temp_path {dir}/tmp;
    uwsgi_temp_path {dir}/tmp;
    scgi_temp_path {dir}/tmp;
    server { listen %(listen)s; root {dir}/www; %(server)s }
}
"""


def nginx(s, http="access_log off;", server="", tls=False):
    """Debian's nginx, one worker, serving `www/`."""
    listen = "127.0.0.1:{port}"
    if tls:
        cert, key = self_signed(s)
        listen += " ssl"
        server = f"ssl_certificate {cert}; ssl_certificate_key {key}; {server}"
    conf = s.write("nginx.conf", s.fill(NGINX_CONF % {"http": http, "server": server,
                                                       "listen": listen}))
    return ["nginx", "-e", "stderr", "-p", s.path, "-c", conf]


APACHE2_CONF = """ServerRoot "{dir}"
DefaultRuntimeDir "{dir}"
PidFile "{dir}/apache2.pid"
Listen 127.0.0.1:{port}
ServerName 127.0.0.1
User www-data
Group www-data
LoadModule mpm_prefork_module /usr/lib/apache2/modules/mod_mpm_prefork.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
LoadModule mime_module /usr/lib/apache2/modules/mod_mime.so
TypesConfig /etc/mime.types
ErrorLog "{dir}/error.log"
LogFormat "%h %l %u %t \\"%r\\" %>s %O" common
CustomLog "{dir}/access.log" common
DocumentRoot "{dir}/htdocs"
<Directory />
    AllowOverride None
    Require all denied
</Directory>
<Directory "{dir}/htdocs">
    Require all granted
</Directory>
StartServers 2
MinSpareServers 1
MaxSpareServers 4
"""


def apache2(s, extra):
    """Debian's apache2 with the prefork MPM serving `htdocs/`, `extra` directives last. `/` as
    Debian's apache2.conf has it: without `AllowOverride None` there, this build looks for
    .htaccess in every directory of the path."""
    conf = s.write("httpd.conf", s.fill(APACHE2_CONF + extra + "\n"))
    return ["apache2", "-f", conf, "-DFOREGROUND"]


def lighttpd(s, extra):
    conf = s.write("lighttpd.conf", s.fill(
        'server.document-root = "{dir}/www"\nserver.bind = "127.0.0.1"\n'
        'server.port = {port}\nserver.errorlog = "{dir}/error.log"\n' + extra + "\n"))
    return ["lighttpd", "-D", "-f", conf]


def redis(s, *args):
    return ["redis-server", "--port", str(s.port), "--bind", "127.0.0.1", "--dir", s.path,
            "--save", ""] + list(args)


def postgresql(s, *settings):
    """PostgreSQL 15 with pgbench's tables (scale 1) made by a server of its own, stopped before
    this returns; `settings` are `-c NAME=VALUE` pairs for the measured server."""
    data, sockets = s.join("data"), s.join("sockets")
    for d in (data, sockets):
        os.makedirs(d, exist_ok=True)
        subprocess.run(["chown", "postgres:postgres", d], check=True)

    def as_postgres(*argv):
        subprocess.run(["runuser", "-u", "postgres", "--"] + list(argv), check=True,
                       capture_output=True, cwd=s.path)

    as_postgres(f"{POSTGRESQL_BIN}/initdb", "-A", "trust", "-D", data)
    options = f"-p {s.port} -k {sockets} -c listen_addresses=127.0.0.1"
    pg_ctl = [f"{POSTGRESQL_BIN}/pg_ctl", "-w", "-D", data]
    as_postgres(*pg_ctl, "-o", options, "-l", os.path.join(sockets, "init.log"), "start")
    try:
        subprocess.run(["pgbench", "-h", "127.0.0.1", "-p", str(s.port), "-U", "postgres", "-i",
                        "-s", "1", "-q", "postgres"], check=True, capture_output=True)
    finally:
        as_postgres(*pg_ctl, "-m", "fast", "stop")
    argv = ["runuser", "-u", "postgres", "--", f"{POSTGRESQL_BIN}/postgres", "-D", data, "-p",
            str(s.port), "-k", sockets, "-c", "listen_addresses=127.0.0.1"]
    for setting in settings:
        argv += ["-c", setting]
    return argv


WSGI_APP = '''def app(environ, start_response):
    body = b"x" * 1024
    start_response("200 OK", [("Content-Type", "text/plain"),
                              ("Content-Length", str(len(body)))])
    return [body]
'''


def gunicorn(s, *args):
    """Debian's gunicorn (sync workers) serving a 1 KiB WSGI answer."""
    s.write("app/hello.py", WSGI_APP)
    return ["gunicorn", "--chdir", s.join("app"), "-b", f"127.0.0.1:{s.port}", "-w", "2",
            "--error-logfile", s.join("error.log")] + list(args) + ["hello:app"]


def mariadb(s, sql, *settings):
    """Debian's MariaDB 10.11 with a `bench` database made by `sql` on a server of its own,
    stopped before this returns; a passwordless 'bench'@'127.0.0.1' over TCP. `settings` are
    `--name=value` options of the measured server."""
    data, run = s.join("data"), s.join("run")
    for d in (data, run):
        os.makedirs(d, exist_ok=True)
        subprocess.run(["chown", "mysql:mysql", d], check=True)
    subprocess.run(["mariadb-install-db", "--no-defaults", "--user=mysql", "--skip-test-db",
                    "--auth-root-authentication-method=normal", f"--datadir={data}"],
                   check=True, capture_output=True, cwd=s.path)
    socket_path = os.path.join(run, "mariadb.sock")
    argv = ["mariadbd", "--no-defaults", f"--datadir={data}", f"--port={s.port}",
            "--bind-address=127.0.0.1", f"--socket={socket_path}",
            f"--pid-file={run}/mariadb.pid", "--user=mysql", "--skip-name-resolve"]
    root = ["--no-defaults", "-uroot", f"--socket={socket_path}"]
    with open(s.join("init.log"), "wb") as log:
        init = subprocess.Popen(argv + ["--skip-networking"], stdout=log, stderr=log)
    try:
        subprocess.run(["mariadb-admin"] + root + ["--wait=60", "--connect-timeout=2", "ping"],
                       check=True, capture_output=True)
        subprocess.run(["mariadb"] + root + ["-e",
                        "CREATE DATABASE bench; CREATE USER 'bench'@'127.0.0.1'; "
                        "GRANT ALL ON bench.* TO 'bench'@'127.0.0.1'; USE bench; " + sql],
                       check=True, capture_output=True)
        # Waits for the server to have stopped, so that its data is whole.
        subprocess.run(["mariadb-admin"] + root + ["shutdown"], check=True, capture_output=True)
    finally:
        if init.poll() is None:
            init.terminate()  # mariadbd shuts down cleanly on SIGTERM too
        init.wait()
    return argv + list(settings)


def memcached(s, *args, log=None):
    """Debian's memcached 1.6, TCP on loopback, one worker thread; with `log`, its stderr
    appended to that file as Debian's init script does with memcached.conf's `logfile`."""
    argv = ["memcached", "-p", str(s.port), "-l", "127.0.0.1", "-U", "0", "-u", "nobody",
            "-t", "1"] + list(args)
    if log is None:
        return argv
    return ["sh", "-c", 'exec "$@" 2>>' + s.join(log), "memcached"] + argv


NODE_GZIP_APP = """const fs = require("fs"), http = require("http"), zlib = require("zlib");
const [port, file, when] = process.argv.slice(2);
const body = fs.readFileSync(file);
const cached = zlib.gzipSync(body);
http.createServer((req, res) => {
    const gzipped = when === "per-request" ? zlib.gzipSync(body) : cached;
    res.writeHead(200, {"Content-Type": "text/plain", "Content-Encoding": "gzip",
                        "Content-Length": gzipped.length});
    res.end(gzipped);
}).listen(Number(port), "127.0.0.1");
"""


def node_gzip(s, file, when):
    """Node.js's `http` server (the `nodejs` package) answering with `file` gzipped, `when`
    "per-request" or "at-start-up" (the same bytes, compressed once)."""
    app = s.write("gzip.js", NODE_GZIP_APP)
    return ["node", app, str(s.port), file, when]


H2O_CONF = """listen:
  host: 127.0.0.1
  port: {port}
num-threads: 1
error-log: {dir}/error.log
hosts:
  "127.0.0.1:{port}":
    paths:
      /:
        file.dir: {dir}/www
%(path)s
"""


def h2o(s, path):
    """Debian's H2O, one thread, serving `www/` with `path`'s directives (YAML, 8 spaces in)."""
    conf = s.write("h2o.conf", s.fill(H2O_CONF % {"path": path}))
    return ["h2o", "-c", conf]


HAPROXY_CONF = """global
    maxconn 256
defaults
    mode http
    timeout client 30s
    timeout connect 5s
    timeout server 30s
    %(defaults)s
frontend web
    bind 127.0.0.1:{port}%(bind)s
    http-request return status 200 content-type text/plain string "%(body)s"
"""


def haproxy(s, defaults="", bind=""):
    """Debian's HAProxy answering every request itself (`http-request return`, 1 KiB): no
    backend, so the only process measured is HAProxy's."""
    conf = s.write("haproxy.cfg", s.fill(HAPROXY_CONF % {"defaults": defaults, "bind": bind,
                                                           "body": "x" * 1024}))
    return ["haproxy", "-db", "-f", conf]


CADDYFILE = """{
    admin off
    auto_https off
}
http://127.0.0.1:{port} {
    root * {dir}/www
    %(site)s
}
"""


def caddy(s, site):
    """Debian's Caddy serving `www/`; its data and config directories in the scratch."""
    conf = s.write("Caddyfile", s.fill(CADDYFILE % {"site": site}))
    return ["env", f"XDG_DATA_HOME={s.join('data')}", f"XDG_CONFIG_HOME={s.join('config')}",
            "caddy", "run", "--adapter", "caddyfile", "--config", conf]
