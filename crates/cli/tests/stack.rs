//! A stack of local servers (issue 43, docs/stack.md): Debian's nginx in front of a WSGI
//! application under gunicorn that asks Redis or PostgreSQL three times per request, over
//! loopback TCP and over Unix sockets. reqcost measures nginx and follows its requests into the
//! application and the database: each hop's requests are counted in its own tally and linked
//! to the front request they worked for, and nginx's calls to the application are none of its
//! requests.

use std::io::{BufReader, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;

use reqcost_analysis::invariants::{CPU_TOLERANCE_NS, CPU_TOLERANCE_SHARE};
use reqcost_record::{GroupCost, HopCost, Phase, RunRecord, SampleTag, IN_FLIGHT};
use reqcost_testkit::config::{self, NginxConf};
use reqcost_testkit::{binary, command, free_port, testbed, Server, TempDir};

use crate::attach::{attach_live, end_window, Attached};
use crate::util::*;

/// Front requests per run, sent over one kept-alive connection.
const REQUESTS: u64 = 200;
/// Redis commands the application makes per request (testbed/stack/redis_app.py).
const QUERIES: u64 = 3;
/// Warm-up requests: enough for reqcost to find and follow both upstreams (it looks every
/// 10 ms) before main, so that main counts every hop's requests from its first.
const WARMUP: &str = "1000";

enum Transport {
    Tcp,
    Unix,
}

/// The application and Redis running, and nginx's command line in front of them.
struct Stack {
    scratch: TempDir,
    port: u16,
    nginx: Vec<String>,
    /// How nginx reaches the application and the application Redis, as `Hop::via` says it.
    app_via: String,
    database_via: String,
    /// The database's command name, as `Hop::comm` says it.
    database_comm: &'static str,
    // Killed when the test ends, however it ends: gunicorn's worker with its master (first,
    // as fields drop in order), which a kill of the master alone would leave running.
    _app_group: Group,
    _upstreams: [Server; 2],
    // Removed once the database has stopped: PostgreSQL's cluster.
    _database_dir: Option<TempDir>,
}

/// A process group, killed when dropped.
struct Group(i32);

impl Drop for Group {
    fn drop(&mut self) {
        // SAFETY: kill(2) on a process group this test started.
        unsafe { libc::kill(-self.0, libc::SIGKILL) };
    }
}

/// How nginx reaches the application: a connection per request, or kept-alive connections
/// (nginx's upstream keepalive, gunicorn's threaded worker keeping them) that stand between
/// requests, as a production stack runs before anyone attaches.
enum Calls {
    PerRequest,
    Kept,
}

/// The database behind the application, and how the application holds its connections.
enum Database {
    /// testbed/stack/redis_app.py: one kept connection per worker.
    Redis,
    /// testbed/stack/pg_app.py: a pool per worker, or (`pooled: false`) a new connection per
    /// request, for which PostgreSQL forks a backend.
    Postgres { pooled: bool },
}

/// The database running: the server, its cluster's directory if it has one, the application's
/// environment to reach it, its `via`, its command name and the application's WSGI module.
struct Running {
    server: Server,
    dir: Option<TempDir>,
    env: Vec<(&'static str, String)>,
    via: String,
    comm: &'static str,
    app: &'static str,
}

fn stack(tag: &str, transport: Transport, calls: Calls) -> Stack {
    stack_on(tag, transport, calls, Database::Redis, &[])
}

/// [`stack`] on `database`, with the application's environment `env` besides where the
/// database is.
fn stack_on(
    tag: &str,
    transport: Transport,
    calls: Calls,
    database: Database,
    env: &[(&str, &str)],
) -> Stack {
    let (scratch, port) = scratch_and_port(tag);
    let db = match database {
        Database::Redis => redis(tag, &transport),
        Database::Postgres { pooled } => postgres(tag, &transport, pooled),
    };
    let app_dir = TempDir::new(&format!("{tag}-app"));
    let mut gunicorn = std::process::Command::new(binary("gunicorn"));
    gunicorn.args(["--workers", "1"]);
    match calls {
        Calls::PerRequest => gunicorn.args(["--worker-class", "sync"]),
        Calls::Kept => gunicorn.args(["--threads", "2", "--keep-alive", "300"]),
    };
    gunicorn
        .arg("--chdir")
        .arg(testbed().join("stack"))
        .envs(db.env.iter().map(|(k, v)| (k, v)))
        .envs(env.iter().copied())
        .process_group(0);
    let (app, upstream, app_via) = match transport {
        Transport::Tcp => {
            let app_port = free_port();
            let bind = format!("127.0.0.1:{app_port}");
            gunicorn.args(["--bind", &bind, db.app]);
            (
                Server::start(gunicorn, app_port, app_dir),
                bind.clone(),
                format!("tcp {bind}"),
            )
        }
        Transport::Unix => {
            let sock = app_dir.join("app.sock");
            gunicorn
                .arg("--bind")
                .arg(format!("unix:{}", sock.display()))
                .arg(db.app);
            (
                Server::start_unix(gunicorn, &sock, app_dir),
                format!("unix:{}", sock.display()),
                format!("unix {}", sock.display()),
            )
        }
    };
    let (http, server) = match calls {
        Calls::PerRequest => (
            "access_log off;".to_string(),
            format!(
                "location / {{ proxy_pass http://{upstream}; }} \
                 location /static {{ return 200 \"static\\n\"; }}"
            ),
        ),
        Calls::Kept => (
            format!("access_log off; upstream app {{ server {upstream}; keepalive 2; }}"),
            "location / { proxy_pass http://app; proxy_http_version 1.1; \
             proxy_set_header Connection \"\"; }"
                .to_string(),
        ),
    };
    let nginx = config::nginx(
        scratch.path(),
        port,
        &NginxConf {
            http: &http,
            server: &server,
            ..NginxConf::default()
        },
    );
    Stack {
        scratch,
        port,
        nginx,
        app_via,
        database_via: db.via,
        database_comm: db.comm,
        _app_group: Group(app.pid() as i32),
        _upstreams: [db.server, app],
        _database_dir: db.dir,
    }
}

/// Redis without persistence on a loopback port or a Unix socket.
fn redis(tag: &str, transport: &Transport) -> Running {
    let dir = TempDir::new(&format!("{tag}-redis"));
    let mut cmd = std::process::Command::new(binary("redis-server"));
    cmd.args(["--save", "", "--appendonly", "no"]);
    let (server, at, via) = match transport {
        Transport::Tcp => {
            let port = free_port();
            cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()]);
            let at = format!("127.0.0.1:{port}");
            (
                Server::start(cmd, port, dir),
                at.clone(),
                format!("tcp {at}"),
            )
        }
        Transport::Unix => {
            let sock: PathBuf = dir.join("redis.sock");
            cmd.args(["--port", "0", "--unixsocket"]).arg(&sock);
            let at = sock.display().to_string();
            (
                Server::start_unix(cmd, &sock, dir),
                at.clone(),
                format!("unix {at}"),
            )
        }
    };
    Running {
        server,
        dir: None,
        env: vec![("REDIS", at)],
        via,
        comm: "redis-server",
        app: "redis_app:app",
    }
}

/// A fresh PostgreSQL cluster on a loopback port and a Unix socket, the application told to
/// use one or the other (libpq takes a directory for its host as the socket's).
fn postgres(tag: &str, transport: &Transport, pooled: bool) -> Running {
    let (dir, port) = scratch_and_port(&format!("{tag}-pg"));
    let argv = postgresql(&dir, port);
    let server = postgresql_server(&dir, &argv, port, TempDir::new(&format!("{tag}-pg-run")));
    let (host, via) = match transport {
        Transport::Tcp => ("127.0.0.1".to_string(), format!("tcp 127.0.0.1:{port}")),
        Transport::Unix => {
            let sockets = dir.join("sockets").display().to_string();
            let via = format!("unix {sockets}/.s.PGSQL.{port}");
            (sockets, via)
        }
    };
    Running {
        server,
        dir: Some(dir),
        env: vec![
            ("PGHOST", host),
            ("PGPORT", port.to_string()),
            ("PG_POOL", if pooled { "1" } else { "0" }.to_string()),
        ],
        via,
        comm: "postgres",
        app: "pg_app:app",
    }
}

/// `reqcost run` against the stack's nginx, probes on the whole time (every request counted),
/// with `extra` arguments.
fn run(stack: &Stack, extra: &[&str]) -> RunRecord {
    run_with(stack, "1", extra)
}

/// [`run`] with `clients` connections at once.
fn run_with(stack: &Stack, clients: &str, extra: &[&str]) -> RunRecord {
    run_as(stack, clients, &[&["--probes-full-time"], extra].concat())
}

/// `reqcost run` against the stack's nginx with `clients` connections, no call-chain
/// sampling, probed as its defaults and `extra` arguments say.
fn run_as(stack: &Stack, clients: &str, extra: &[&str]) -> RunRecord {
    let url = format!("http://127.0.0.1:{}/", stack.port);
    let n = REQUESTS.to_string();
    let mut args = vec![
        "--url",
        &url,
        "-n",
        &n,
        "-c",
        clients,
        "--warmup",
        WARMUP,
        "--no-slow-phase",
        "--no-sample",
    ];
    args.extend_from_slice(extra);
    let (out, record) = run_saved(&stack.scratch, &args, &stack.nginx);
    assert!(out.status.success(), "{}", stderr(&out));
    record.expect("a record")
}

/// The phase a `run` measures, or the window an `attach` watches.
fn measured(record: &RunRecord) -> &Phase {
    record
        .phases
        .iter()
        .find(|p| p.name == "main" || p.name == "live")
        .unwrap()
}

/// nginx's requests are the client's (the last in flight when the window ended before nginx
/// read the client's close): its calls to the application, on connections it opened, are none
/// of them.
fn front_counts_the_clients_requests(main: &Phase) {
    let front = main.requests.as_ref().expect("per-request figures");
    assert_eq!(
        front.requests + front.in_flight,
        REQUESTS,
        "nginx's requests"
    );
    assert!(
        front.connections <= 1,
        "the client's one connection, no call's"
    );
    assert_eq!(front.no_request, 0);
}

/// The record's hops: the application behind nginx, the database behind it.
fn app_then_database(stack: &Stack, record: &RunRecord) {
    let hops: Vec<(u8, &str, &str, u8)> = record
        .hops
        .iter()
        .map(|h| (h.hop, h.comm.as_str(), h.via.as_str(), h.caller))
        .collect();
    assert_eq!(
        hops,
        [
            (1, "gunicorn", stack.app_via.as_str(), 0),
            (2, stack.database_comm, stack.database_via.as_str(), 1),
        ]
    );
}

/// Both upstreams followed as hops 1 and 2, each request of theirs linked to a front
/// request: one application request and three Redis commands per front request.
fn every_hop_is_linked(stack: &Stack, record: &RunRecord) {
    app_then_database(stack, record);
    let main = measured(record);
    front_counts_the_clients_requests(main);
    for (hop, per_front) in [(1, 1), (2, QUERIES)] {
        let phase = main
            .hops
            .iter()
            .find(|h| h.hop == hop)
            .expect("the hop's figures");
        let requests = phase.requests.as_ref().expect("the hop's requests");
        // A request on a kept connection ends at the next one's read: the last is in flight.
        let seen = requests.requests + requests.in_flight;
        assert_eq!(seen, REQUESTS * per_front, "hop {hop}'s requests");
        let links = requests.front_links.as_ref().expect("the hop's links");
        assert_eq!(
            links.linked_requests, seen,
            "hop {hop}'s requests linked to the front's"
        );
        assert!(phase.cpu.is_some(), "hop {hop}'s CPU");
    }
    // The probes' runs on the hops' events are theirs, not the front's: each application
    // request and each Redis command reads and writes at least once, an entry and an exit run
    // for each call.
    let cost = main.server.probe_cost.as_ref().expect("the probes' cost");
    let least = 2 * 2 * REQUESTS * (1 + QUERIES);
    assert!(
        cost.upstream_runs >= least && cost.upstream_ns > 0,
        "{cost:?}"
    );
}

#[test]
fn nginx_gunicorn_redis_over_tcp_are_linked_hop_by_hop() {
    let _shared = machine_shared();
    let stack = stack("stack-tcp", Transport::Tcp, Calls::PerRequest);
    let record = run(&stack, &[]);
    assert_eq!(measured(&record).client.requests, REQUESTS);
    every_hop_is_linked(&stack, &record);
}

/// A default run (no `--probes-full-time`): its 200 requests are too few for unprobed windows,
/// so they are sent again with the probes detached, and every tree's CPU comes from that pass:
/// nginx's, the application's and Redis's. The front's parts at each hop stay the hop's linked
/// CPU (the record's invariants, which `run_saved` checks: before, the front's parts took the
/// front's factor and broke `hop-links`).
#[test]
fn a_default_run_takes_every_trees_cpu_from_its_unprobed_pass() {
    let _shared = machine_shared();
    let stack = stack("stack-pass", Transport::Tcp, Calls::PerRequest);
    let record = run_as(&stack, "1", &[]);
    every_hop_is_linked(&stack, &record);
    let main = measured(&record);
    let method = main.cpu_windows.as_ref().map(|w| w.method);
    assert_eq!(method, Some(reqcost_record::CpuMethod::UnprobedPass));
    for hop in &main.hops {
        let source = &hop.cpu.as_ref().expect("the hop's CPU").source;
        assert!(
            source.contains("from an unprobed pass"),
            "hop {}: {source}",
            hop.hop
        );
    }
}

#[test]
fn nginx_gunicorn_redis_over_unix_sockets_are_linked_hop_by_hop() {
    let _shared = machine_shared();
    let stack = stack("stack-unix", Transport::Unix, Calls::PerRequest);
    let record = run(&stack, &[]);
    assert_eq!(measured(&record).client.requests, REQUESTS);
    every_hop_is_linked(&stack, &record);
}

/// Two clients at once: nginx's one worker handles one client's upstream answer right after
/// the other's request, with no wait between, and each upstream exchange still goes to the
/// front request it was made for. Charged to whichever request the thread served last, about
/// 2 % of front requests held two application requests and six Redis commands, others none;
/// the costliest across the stack are exactly those.
#[test]
fn two_clients_each_front_request_has_its_own_upstream_requests() {
    let _shared = machine_shared();
    let stack = stack("stack-two", Transport::Tcp, Calls::PerRequest);
    let record = run_with(&stack, "2", &[]);
    let front = measured(&record)
        .requests
        .as_ref()
        .expect("per-request figures");
    assert_eq!(
        front.requests + front.in_flight,
        REQUESTS,
        "nginx's requests"
    );
    assert!(
        !front.stack_costliest.is_empty(),
        "the costliest across the stack"
    );
    for costly in &front.stack_costliest {
        let per_hop: Vec<(u8, u64)> = costly.hops.iter().map(|h| (h.hop, h.requests)).collect();
        assert_eq!(per_hop, [(1, 1), (2, QUERIES)], "request {}", costly.id);
    }
}

/// Three front classes, each dearest in another hop: nginx answers `/static` itself (no
/// upstream request: nothing of it is the application's), `/orders` costs the application
/// most with its three Redis commands, `/slow` a Lua loop Redis runs for milliseconds (EVAL).
#[test]
fn each_front_class_is_dearest_in_its_own_hop() {
    let _shared = machine_shared();
    let stack = stack("stack-classes", Transport::Tcp, Calls::PerRequest);
    let list = stack.scratch.join("requests.txt");
    std::fs::write(&list, "/orders\n/slow\n/static\n".repeat(67)).unwrap();
    let record = run(&stack, &["--requests", list.to_str().unwrap()]);
    let front = measured(&record)
        .requests
        .as_ref()
        .expect("per-request figures");
    let class = |name: &str| {
        front
            .by_class
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("class {name} in {:?}", front.by_class))
    };
    let hop = |c: &reqcost_record::GroupCost, hop: u8| {
        c.by_hop
            .iter()
            .find(|h| h.hop == hop)
            .cloned()
            .unwrap_or_default()
    };
    let stat = class("GET /static");
    assert!(stat.requests > 0);
    assert!(stat.by_hop.iter().all(|h| h.requests == 0), "{stat:?}");
    let orders = class("GET /orders");
    assert_eq!(
        hop(orders, 1).requests,
        orders.requests,
        "one application request each"
    );
    assert_eq!(
        hop(orders, 2).requests,
        QUERIES * orders.requests,
        "three Redis GETs each"
    );
    assert!(
        hop(orders, 1).cpu_ns > hop(orders, 2).cpu_ns.max(orders.cpu_ns),
        "{orders:?}"
    );
    let slow = class("GET /slow");
    let database = hop(slow, 2);
    assert_eq!(database.requests, slow.requests, "one EVAL each");
    assert_eq!(database.classes[0].name, "EVAL", "{database:?}");
    assert!(
        database.cpu_ns > hop(slow, 1).cpu_ns.max(slow.cpu_ns),
        "{slow:?}"
    );
}

/// The must-show "a front class whose cost is in the database is named with the database's own
/// call chains and statement class": sampled, each hop's samples are its own, tagged with the
/// front class they served; `/slow`'s dearest hop, Redis, shows the code it ran for it (its
/// EVAL), and `/static`, which nginx answers alone, has no upstream sample.
#[test]
fn a_class_dearest_in_the_database_is_named_with_its_own_chains() {
    let _shared = machine_shared();
    let stack = stack("stack-chains", Transport::Tcp, Calls::PerRequest);
    let list = stack.scratch.join("requests.txt");
    std::fs::write(&list, "/orders\n/slow\n/static\n".repeat(67)).unwrap();
    let url = format!("http://127.0.0.1:{}/", stack.port);
    let n = REQUESTS.to_string();
    let args = [
        "--url",
        &url,
        "-n",
        &n,
        "--warmup",
        WARMUP,
        "--no-slow-phase",
        "--probes-full-time",
        "--requests",
        list.to_str().unwrap(),
    ];
    let (out, record) = run_saved(&stack.scratch, &args, &stack.nginx);
    assert!(out.status.success(), "{}", stderr(&out));
    let record = record.expect("a record");
    let profile = record.profile.as_ref().expect("a profile");
    let tag = |s: &reqcost_record::Stack| s.tag.map(|t| &profile.tags[t as usize]);
    // The front's samples are nginx's only; the hops' are apart, each tagged with its hop.
    assert!(profile
        .stacks
        .iter()
        .all(|s| s.thread == "nginx" && tag(s).is_none_or(|t| t.hop == 0)));
    assert!(profile.hop_stacks.iter().all(|s| s.thread != "nginx"));
    // Samples of hop `hop` for front class `class`, of phase `phase` or of every phase.
    let in_hop = |hop: u8, class: &str, phase: Option<&str>| -> u64 {
        profile
            .hop_stacks
            .iter()
            .filter(|s| {
                tag(s).is_some_and(|t| {
                    t.hop == hop && t.class == class && phase.is_none_or(|p| t.phase == p)
                })
            })
            .map(|s| s.count)
            .sum()
    };
    assert_eq!(
        in_hop(1, "GET /static", None) + in_hop(2, "GET /static", None),
        0
    );
    let doc = reqcost_analysis::document::Analysis::of(&record);
    let main = doc.phases.iter().find(|p| p.name == "main").unwrap();
    let classes = &main.stack.as_ref().expect("a stack block").classes;
    let class = |name: &str| classes.iter().find(|c| c.class == name).unwrap();
    let slow = class("GET /slow");
    assert_eq!(slow.dearest_hop, 2, "{slow:#?}");
    let database = slow.parts.iter().find(|p| p.hop == 2).unwrap();
    assert_eq!(
        (database.name.as_str(), database.classes[0].name.as_str()),
        ("redis-server", "EVAL")
    );
    let code = slow
        .dearest_code
        .as_ref()
        .expect("Redis's code for GET /slow");
    assert_eq!(code.samples, in_hop(2, "GET /slow", Some("main")));
    // Debian's redis-server is stripped: its Lua VM shows as functions of the binary named by
    // their .eh_frame start, under the Lua API it exports (lua_pcall), which EVAL calls.
    let redis = &code.by_self[0];
    assert!(!redis.kernel, "{code:#?}");
    let lua = |f: &str| f.starts_with("lua_");
    assert!(
        lua(&redis.function)
            || redis.callers.iter().any(|c| lua(c))
            || code.by_total.iter().any(|f| lua(&f.function)),
        "{code:#?}"
    );
    assert_eq!(class("GET /static").dearest_code, None);
    // An upstream request that ended keeps its own id only when it is among its hop's
    // costliest, each shown with the front class it served.
    let stack = main.stack.as_ref().unwrap();
    let costliest: Vec<&str> = record
        .phases
        .iter()
        .flat_map(|p| &p.hops)
        .filter_map(|h| h.requests.as_ref())
        .flat_map(|r| r.costliest.iter().map(|c| c.id.as_str()))
        .collect();
    let ended = |t: &&SampleTag| t.hop > 0 && !t.request.is_empty() && t.class != IN_FLIGHT;
    for t in profile.tags.iter().filter(ended) {
        assert!(costliest.contains(&t.request.as_str()), "{t:?}");
    }
    for c in &stack.code {
        let front = match (c.hop, c.class.as_str()) {
            (1, class) => class,
            (2, "EVAL") => "GET /slow",
            (2, "GET") => "GET /orders",
            _ => panic!("{c:?}"),
        };
        assert_eq!(c.front_class, front, "{c:?}");
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let head = "        redis-server's code for it (self %, callers nearest first)";
    let at = text.find(head).unwrap_or_else(|| panic!("{text}"));
    assert!(
        text[..at].lines().last().unwrap().contains("GET /slow"),
        "{text}"
    );
}

/// A supervisor that holds the listening socket its child logs to (as init holds journald's
/// stream socket under socket activation) is no upstream of the child: following it would
/// follow the child's own tree, and with init the whole machine.
const SUPERVISED: &str = r#"
import http.server, os, socket, sys
path, port = sys.argv[1], int(sys.argv[2])
listener = socket.socket(socket.AF_UNIX)
listener.bind(path)
listener.listen(8)
if os.fork() == 0:
    listener.close()
    log = socket.socket(socket.AF_UNIX)
    log.connect(path)
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        def do_GET(self):
            log.sendall(b"GET\n")
            self.send_response(200)
            self.send_header("Content-Length", "3")
            self.end_headers()
            self.wfile.write(b"ok\n")
        def log_message(self, *args):
            pass
    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
else:
    conn, _ = listener.accept()
    while conn.recv(4096):
        pass
"#;

#[test]
fn attach_never_follows_a_tree_that_holds_the_target() {
    let _shared = machine_shared();
    let dir = TempDir::new("stack-supervised");
    let script = dir.join("supervised.py");
    std::fs::write(&script, SUPERVISED).unwrap();
    let sock = dir.join("log.sock");
    let port = free_port();
    let mut cmd = std::process::Command::new(reqcost_testkit::PYTHON);
    cmd.arg(&script)
        .arg(&sock)
        .arg(port.to_string())
        .process_group(0);
    let supervisor = Server::start(cmd, port, TempDir::new("stack-supervised-run"));
    let _group = Group(supervisor.pid() as i32);
    let mut attached = attach_live(&supervisor, &[]);
    get_over_one_connection(port, 20);
    assert!(end_window(&mut attached.child).success(), "reqcost attach");
    let record = load_record(&attached.record).unwrap();
    assert_eq!(
        record.hops,
        [],
        "no hop: the listener's holder is the target's parent"
    );
    let front = measured(&record)
        .requests
        .as_ref()
        .expect("per-request figures");
    assert_eq!(
        front.requests + front.in_flight,
        20,
        "the child's requests stay the front's"
    );
}

/// `attach` to a stack already running, its calls on connections that stand between requests:
/// both upstreams are followed from those connections when the window opens, before the
/// first request it sees.
#[test]
fn attach_follows_a_running_stack_from_its_standing_connections() {
    let _shared = machine_shared();
    for transport in [Transport::Tcp, Transport::Unix] {
        let stack = stack("stack-attach", transport, Calls::Kept);
        let (_nginx, _nginx_group, mut attached) = attached_after_kept_calls(&stack);
        get_over_one_connection(stack.port, REQUESTS);
        assert!(end_window(&mut attached.child).success(), "reqcost attach");
        every_hop_is_linked(&stack, &load_record(&attached.record).unwrap());
    }
}

/// An `attach` window that goes on idle after the traffic: Redis's main thread runs its timer
/// (serverCron) between waits with no socket call, CPU held for a next request that does not
/// come in the window (docs/stack.md, "An idle event loop's timers at a window's end"). It is
/// the window's CPU for none of its requests: before the window counted it, Redis's hop broke
/// `cpu-total` by it (13 ms of 90 ms with 5 s of idle tail).
#[test]
fn attach_counts_what_an_idle_upstream_holds_at_the_windows_end() {
    let _shared = machine_shared();
    let stack = stack("stack-idle", Transport::Tcp, Calls::Kept);
    let (_nginx, _nginx_group, mut attached) = attached_after_kept_calls(&stack);
    get_over_one_connection(stack.port, REQUESTS);
    std::thread::sleep(std::time::Duration::from_secs(5));
    assert!(end_window(&mut attached.child).success(), "reqcost attach");
    // Loading checks `cpu-total` on each hop.
    every_hop_is_linked(&stack, &load_record(&attached.record).unwrap());
}

/// The stack's nginx started, its calls to the application and the application's to the
/// database made and kept, then `reqcost attach` live on it: nginx, its process group (killed
/// before the master, as locals drop last first: its worker with it), and the attach. The
/// group must outlive nginx's server handle, so the caller binds them in this order.
fn attached_after_kept_calls(stack: &Stack) -> (Server, Group, Attached) {
    let mut cmd = command(&stack.nginx);
    cmd.process_group(0);
    let nginx = Server::start(cmd, stack.port, TempDir::new("stack-attach-nginx"));
    let group = Group(nginx.pid() as i32);
    get_over_one_connection(stack.port, 3);
    let attached = attach_live(&nginx, &[]);
    (nginx, group, attached)
}

/// `n` GETs of / on one kept-alive connection to 127.0.0.1:`port`, each answered in full.
fn get_over_one_connection(port: u16, n: u64) {
    let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    for _ in 0..n {
        writer
            .write_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        assert_eq!(read_http_response(&mut reader).1, b"ok\n");
    }
}

#[test]
fn upstream_calls_are_not_requests_without_following() {
    let _shared = machine_shared();
    let stack = stack("stack-alone", Transport::Tcp, Calls::PerRequest);
    let record = run(&stack, &["--no-follow-upstreams"]);
    assert!(record.hops.is_empty(), "{:?}", record.hops);
    let main = measured(&record);
    assert!(main.hops.is_empty());
    assert_eq!(main.client.requests, REQUESTS);
    front_counts_the_clients_requests(main);
    let cost = main.server.probe_cost.as_ref().expect("the probes' cost");
    assert_eq!((cost.upstream_runs, cost.upstream_ns), (0, 0), "{cost:?}");
}

/// A database grown slower behind an unchanged proxy and application (Redis's Lua loop in
/// `/slow` ten times longer) fails `check` in the database's own row (docs/ci.md, "Upstream
/// hops"): before hops were judged, the gate passed it, nginx's and gunicorn's figures unmoved.
#[test]
fn check_fails_a_slower_database_in_its_own_row() {
    let _shared = machine_shared();
    let saved = TempDir::new("stack-check");
    let record = |tag: &str, loops: &str| {
        let stack = stack_on(
            tag,
            Transport::Tcp,
            Calls::PerRequest,
            Database::Redis,
            &[("SLOW_LOOPS", loops)],
        );
        let list = stack.scratch.join("requests.txt");
        std::fs::write(&list, "/slow\n").unwrap();
        let path = saved.join(&format!("{tag}.json"));
        run(&stack, &["--requests", list.to_str().unwrap()])
            .save(&path)
            .unwrap();
        path.display().to_string()
    };
    let baseline = record("stack-check-base", "30000");
    let slower = record("stack-check-slow", "300000");

    let out = reqcost(&["check", "--json", &slower, "--baseline", &baseline]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let judged: serde_json::Value = serde_json::from_slice(&out.stdout).expect("check --json");
    let items = judged["phases"][0]["items"].as_array().expect("items");
    let redis = items
        .iter()
        .find(|i| i["hop"] == 2)
        .unwrap_or_else(|| panic!("no row for hop 2: {judged}"));
    assert_eq!(
        redis["metric"], "redis-server (hop 2) CPU per request (µs)",
        "{judged}"
    );
    assert_eq!(redis["pass"], false, "{judged}");
    assert!(
        items.iter().any(|i| i["hop"] == 1),
        "gunicorn judged too: {judged}"
    );
}

/// The statement classes of the three queries of testbed/stack/pg_app.py's `/orders`.
const ORDERS_STATEMENTS: [&str; 3] = ["SELECT pg_class", "SELECT pg_namespace", "SELECT pg_type"];

/// Front requests of a PostgreSQL stack: three classes in turn, each dearest in another hop.
const CLASSES: &str = "/orders\n/slow\n/static\n";

/// The front class `name` of `front`.
fn front_class<'a>(front: &'a reqcost_record::RequestStats, name: &str) -> &'a GroupCost {
    front
        .by_class
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("class {name} in {:?}", front.by_class))
}

/// What class `c`'s requests cost hop `hop`, nothing when they cost it nothing.
fn at_hop(c: &GroupCost, hop: u8) -> HopCost {
    c.by_hop
        .iter()
        .find(|h| h.hop == hop)
        .cloned()
        .unwrap_or_default()
}

/// The three trees' CPU, as procfs read it, against what the record puts in each tree's
/// place: the front classes' CPU across the stack, and each tree's CPU for no front class
/// (the front's set-up and unattributed, each hop's own, unlinked and unattributed). Within
/// the tolerance the record's invariants give each tree's attributed + unattributed.
fn stack_cpu_adds_up(main: &Phase) {
    let front = main.requests.as_ref().expect("per-request figures");
    let classes: u64 = front.by_class.iter().map(|c| c.cpu_ns).sum();
    let across: u64 = front.by_class.iter().map(|c| c.stack_cpu_ns).sum();
    let mut read = main.server.cpu.as_ref().expect("nginx's CPU").total_ns;
    let mut allowed = CPU_TOLERANCE_NS.max((read as f64 * CPU_TOLERANCE_SHARE) as u64)
        + front.cpu_reading_skew_ns;
    // What was held before the phase is in the classes' CPU too, not in the trees'.
    read += front.held_before_cpu_ns;
    let mut for_none = front.attributed_cpu_ns - classes + front.unattributed_cpu_ns;
    for h in &main.hops {
        let r = h.requests.as_ref().expect("the hop's requests");
        let links = r.front_links.as_ref().expect("the hop's links");
        let total = h.cpu.as_ref().expect("the hop's CPU").total_ns;
        read += total + r.held_before_cpu_ns;
        allowed += CPU_TOLERANCE_NS.max((total as f64 * CPU_TOLERANCE_SHARE) as u64)
            + r.cpu_reading_skew_ns;
        for_none += r.attributed_cpu_ns - links.linked_cpu_ns + r.unattributed_cpu_ns;
    }
    let accounted = across + for_none;
    assert!(
        accounted.abs_diff(read) <= allowed,
        "the front classes across the stack {across} ns + for no front class {for_none} ns = \
         {accounted} ns, the three trees' CPU and what they held before the phase {read} ns \
         ({allowed} ns allowed)"
    );
}

/// nginx → gunicorn → PostgreSQL over `transport`, the application's connections pooled or
/// not, measured under `/orders`, `/slow` and `/static` in turn: the record, and the
/// requests of each front class.
fn postgres_stack(tag: &str, transport: Transport, pooled: bool) -> (Stack, RunRecord) {
    let stack = stack_on(
        tag,
        transport,
        Calls::PerRequest,
        Database::Postgres { pooled },
        &[],
    );
    let list = stack.scratch.join("requests.txt");
    std::fs::write(&list, CLASSES.repeat(67)).unwrap();
    let record = run(&stack, &["--requests", list.to_str().unwrap()]);
    (stack, record)
}

/// Each PostgreSQL query an application request made is a request of the postgres hop,
/// classed by its statement and linked to the front request: three per `/orders`
/// (`SELECT pg_class`, `pg_namespace`, `pg_type`), one costly aggregate per `/slow`, dearest
/// in the database; none for `/static`, which nginx answers; the three trees' CPU adds up.
fn postgres_hops_hold_each_query(stack: &Stack, record: &RunRecord) {
    app_then_database(stack, record);
    let main = measured(record);
    assert_eq!(main.client.requests, REQUESTS);
    front_counts_the_clients_requests(main);
    let front = main.requests.as_ref().expect("per-request figures");
    let (orders, slow) = (
        front_class(front, "GET /orders"),
        front_class(front, "GET /slow"),
    );
    assert!(front_class(front, "GET /static")
        .by_hop
        .iter()
        .all(|h| h.requests == 0));
    let database = at_hop(orders, 2);
    assert_eq!(at_hop(orders, 1).requests, orders.requests);
    assert_eq!(database.requests, QUERIES * orders.requests, "{database:?}");
    // Each statement's own row, but for those past the costliest shown (`(other)`) and a
    // backend's start-up when the application connects per request (no request).
    let statements: Vec<(&str, u64)> = database
        .classes
        .iter()
        .filter(|c| c.requests > 0 && c.name != "(other)")
        .map(|c| (c.name.as_str(), c.requests))
        .collect();
    assert!(!statements.is_empty(), "{database:?}");
    for (name, requests) in statements {
        assert!(
            ORDERS_STATEMENTS.contains(&name) && requests == orders.requests,
            "{database:?}"
        );
    }
    let classed: u64 = database.classes.iter().map(|c| c.requests).sum();
    assert_eq!(classed, database.requests);
    let aggregate = at_hop(slow, 2);
    assert_eq!(aggregate.requests, slow.requests, "one query each");
    assert_eq!(aggregate.classes[0].name, "SELECT generate_series");
    assert!(
        aggregate.cpu_ns > at_hop(slow, 1).cpu_ns.max(slow.cpu_ns),
        "{slow:?}"
    );
    for (hop, expected) in [
        (1, orders.requests + slow.requests),
        (2, QUERIES * orders.requests + slow.requests),
    ] {
        let r = main.hops.iter().find(|h| h.hop == hop).unwrap();
        let r = r.requests.as_ref().expect("the hop's requests");
        let seen = r.requests + r.in_flight;
        assert_eq!(seen, expected, "hop {hop}'s requests");
        let links = r.front_links.as_ref().expect("the hop's links");
        assert_eq!(links.linked_requests, seen, "hop {hop}'s requests linked");
    }
    let database = main.hops.iter().find(|h| h.hop == 2).unwrap();
    let mut own: Vec<&str> = database
        .requests
        .as_ref()
        .unwrap()
        .by_class
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    own.sort();
    let mut expected = ORDERS_STATEMENTS.to_vec();
    expected.push("SELECT generate_series");
    expected.sort();
    assert_eq!(own, expected, "the database's own classes");
    stack_cpu_adds_up(main);
}

#[test]
fn nginx_gunicorn_postgres_over_tcp_hold_each_query_in_the_database_hop() {
    let _shared = machine_shared();
    let (stack, record) = postgres_stack("stack-pg-tcp", Transport::Tcp, true);
    postgres_hops_hold_each_query(&stack, &record);
}

#[test]
fn nginx_gunicorn_postgres_over_unix_sockets_hold_each_query_in_the_database_hop() {
    let _shared = machine_shared();
    let (stack, record) = postgres_stack("stack-pg-unix", Transport::Unix, true);
    postgres_hops_hold_each_query(&stack, &record);
}

/// An application that opens a connection per request: PostgreSQL forks a backend for each,
/// and each backend joins the postgres hop (its parent is followed), so every query is still
/// counted and linked; the hop saw a connection per application request.
#[test]
fn postgres_backends_forked_per_connection_join_the_hop() {
    let _shared = machine_shared();
    let (stack, record) = postgres_stack("stack-pg-fork", Transport::Tcp, false);
    postgres_hops_hold_each_query(&stack, &record);
    let main = measured(&record);
    let front = main.requests.as_ref().unwrap();
    let upstream: u64 = ["GET /orders", "GET /slow"]
        .iter()
        .map(|c| front_class(front, c).requests)
        .sum();
    let database = main.hops.iter().find(|h| h.hop == 2).unwrap();
    let database = database.requests.as_ref().unwrap();
    assert_eq!(database.connections, upstream, "a backend per request");
}

/// The findings `reqcost report --json` gives the record of `stack`'s last run, by the tree
/// they are carried by.
fn findings_by_tree(stack: &Stack) -> Vec<(String, String)> {
    report_json(&stack.scratch.join("run.json"))
        .findings
        .into_iter()
        .map(|f| (f.server, f.id))
        .collect()
}

/// An application that opens a PostgreSQL connection per request (no pool) makes PostgreSQL
/// fork a backend for each: the finding is carried by the postgres hop, from that hop's own
/// process counts, and by no other tree; with the pooled application it is not there. The
/// database's slow query is not read as slow clients.
#[test]
fn a_backend_per_request_is_found_on_the_postgres_hop_not_with_a_pool() {
    let _shared = machine_shared();
    let per_request = (
        "postgres (hop 2)".to_string(),
        "process-per-request".to_string(),
    );
    let (stack, record) = postgres_stack("stack-pg-nopool", Transport::Tcp, false);
    let database = measured(&record).hops.iter().find(|h| h.hop == 2).unwrap();
    let tree = &database
        .kernel
        .as_ref()
        .expect("the hop's kernel figures")
        .tree;
    let connections = database.requests.as_ref().unwrap().connections;
    assert!(
        tree.processes_forked >= connections && tree.processes_exited >= connections - 1,
        "a backend per connection: {tree:?}, {connections} connections"
    );
    let findings = findings_by_tree(&stack);
    assert!(findings.contains(&per_request), "{findings:?}");
    assert!(
        findings
            .iter()
            .all(|(tree, id)| id != "process-per-request" || *tree == per_request.0),
        "{findings:?}"
    );
    let (pooled, _) = postgres_stack("stack-pg-pool", Transport::Tcp, true);
    let pooled = findings_by_tree(&pooled);
    assert!(!pooled.contains(&per_request), "{pooled:?}");
    // A 10 ms query answering 70 bytes is no slow client of the database: judged on the
    // hop's request speeds, client-sensitive read 97 % of its CPU.
    for (tree, id) in findings.iter().chain(&pooled) {
        assert!(
            !(id == "client-sensitive" && tree.ends_with("(hop 2)")),
            "{findings:?} {pooled:?}"
        );
    }
}

/// `--follow redis-server` alone, Redis behind the application: only the followed trees'
/// connections lead to upstreams, so nothing reaches Redis, and the record says so, naming what
/// to add, instead of a stack with no hop and no word.
#[test]
fn a_named_tree_behind_one_not_followed_is_noted_as_unreached() {
    let _shared = machine_shared();
    let stack = stack("stack-named", Transport::Tcp, Calls::PerRequest);
    let record = run(&stack, &["--follow", "redis-server"]);
    assert!(record.hops.is_empty(), "{:?}", record.hops);
    assert!(
        record.notes.iter().any(
            |n| n.starts_with("--follow redis-server: no tree of that name or pid was reached")
        ),
        "{:?}",
        record.notes
    );
    let both = run(&stack, &["--follow", "gunicorn,redis-server"]);
    let hops: Vec<&str> = both.hops.iter().map(|h| h.comm.as_str()).collect();
    assert_eq!(hops, ["gunicorn", "redis-server"]);
    assert!(!both.notes.iter().any(|n| n.starts_with("--follow")));
}
