//! Per-request attribution against servers whose requests have a known cost: the testbed's
//! cost-classes server (event loop and thread per connection), strace as the ground truth of the
//! calls and bytes of each request, and Debian's nginx for keep-alive boundaries. Needs root,
//! like the probes.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use reqcost_probes::{Probes, RequestCounters};
use reqcost_record::RequestEvent;
use reqcost_server::{free_loopback_port, LaunchSpec, Server};

/// Held by the tests of this file one at a time: on two cores, a strace or a second server
/// running beside a CPU measurement would make its figures those of a contended machine.
fn alone() -> MutexGuard<'static, ()> {
    static ALONE: Mutex<()> = Mutex::new(());
    ALONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn testbed_binary(name: &str) -> PathBuf {
    reqcost_testkit::testbed().join("build").join(name)
}

/// A scratch directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let port = free_loopback_port().unwrap();
        let p =
            std::env::temp_dir().join(format!("reqcost-req-{tag}-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A server launched in its own cpuacct cgroup, accepting on `addr`, with the probes attached.
struct Subject {
    server: Server,
    addr: SocketAddr,
    probes: Probes,
    _dir: Scratch,
}

impl Subject {
    fn launch(tag: &str, command: Vec<String>, port: u16, dir: Scratch) -> Subject {
        let spec = LaunchSpec {
            command,
            cpus: None,
            log_path: dir.0.join("server.log"),
            cgroup_name: format!("reqcost-test-{tag}-{}-{port}", std::process::id()),
        };
        let mut server = Server::launch(&spec).unwrap_or_else(|e| panic!("{e}"));
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        server
            .wait_until_accepting(addr, Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{e}"));
        let probes = Probes::attach(server.pid()).unwrap_or_else(|e| panic!("{e}"));
        Subject {
            server,
            addr,
            probes,
            _dir: dir,
        }
    }

    fn cost_classes(flags: &[&str]) -> Subject {
        let port = free_loopback_port().unwrap();
        let dir = Scratch::new("cost");
        let mut command = vec![testbed_binary("cost-classes").display().to_string()];
        command.extend(flags.iter().map(|f| f.to_string()));
        command.extend([
            "--port".into(),
            port.to_string(),
            "--root".into(),
            dir.0.display().to_string(),
        ]);
        let subject = Subject::launch("cost", command, port, dir);
        subject.prime(|addr| gopher(addr, "burn/0").0);
        subject
    }

    /// Makes one request and waits for its event, dropping it and anything before it: the
    /// readiness check's connection may or may not have been seen, depending on when the
    /// probes attached.
    fn prime(&self, request: impl FnOnce(SocketAddr) -> SocketAddr) {
        let client = request(self.addr);
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut seen = false;
        while !seen {
            assert!(
                Instant::now() < deadline,
                "no event for the settling request"
            );
            self.probes
                .drain_requests(&mut |e| seen |= e.peer == client)
                .unwrap_or_else(|e| panic!("{e}"));
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The requests finished so far, waiting up to 10 s for `n` of them (a request's event is
    /// emitted when the server's close returns, which can come after the client saw EOF).
    fn wait_events(&self, n: usize) -> Vec<RequestEvent> {
        let mut events = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            self.probes
                .drain_requests(&mut |e| events.push(e))
                .unwrap_or_else(|e| panic!("{e}"));
            if events.len() >= n || Instant::now() > deadline {
                return events;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The probes' counters and the cgroup's CPU of the tree, read together once the server is
    /// idle: a thread on a CPU at the reading would be in the cgroup's figure up to its last
    /// tick and in the probes' up to its last event.
    fn cpu(&self) -> (RequestCounters, u64) {
        let pid = self.server.pid();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !idle(pid) {
            assert!(Instant::now() < deadline, "server {pid} never went idle");
            std::thread::sleep(Duration::from_millis(10));
        }
        let cgroup = self.server.snapshot().cpu.expect("the tree's cgroup CPU");
        (self.probes.request_counters(), cgroup.total_ns)
    }
}

impl Drop for Subject {
    fn drop(&mut self) {
        self.server.stop(Duration::from_secs(2));
    }
}

/// Process `pid` is down to its main thread (the threads of `--threads` have exited), and that
/// thread sleeps.
fn idle(pid: u32) -> bool {
    let tasks: Vec<_> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .collect();
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat
        .rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next());
    tasks.len() == 1 && state == Some('S')
}

/// One close-delimited request: returns the client's local address and the response.
fn gopher(addr: SocketAddr, selector: &str) -> (SocketAddr, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(format!("{selector}\r\n").as_bytes()).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    (s.local_addr().unwrap(), out)
}

/// `per_class` requests of each burn class, interleaved so that any drift of the machine
/// weighs on every class alike; returns the client addresses per class.
fn burn_requests(
    addr: SocketAddr,
    classes: &[u64],
    per_class: usize,
) -> BTreeMap<u64, Vec<SocketAddr>> {
    let mut clients: BTreeMap<u64, Vec<SocketAddr>> = BTreeMap::new();
    for _ in 0..per_class {
        for &us in classes {
            let (client, out) = gopher(addr, &format!("burn/{us}"));
            assert_eq!(out, format!("burned {us} us\r\n").as_bytes());
            clients.entry(us).or_default().push(client);
        }
    }
    clients
}

/// The burn class of a request from its first bytes (`burn/N\r\n`).
fn class_of(e: &RequestEvent) -> u64 {
    let head = std::str::from_utf8(&e.head).expect("a text selector");
    head.strip_prefix("burn/")
        .and_then(|r| r.strip_suffix("\r\n"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("unexpected head {head:?}"))
}

fn by_class(events: &[RequestEvent]) -> BTreeMap<u64, Vec<&RequestEvent>> {
    let mut classes: BTreeMap<u64, Vec<&RequestEvent>> = BTreeMap::new();
    for e in events {
        classes.entry(class_of(e)).or_default().push(e);
    }
    classes
}

fn mean_cpu_us(events: &[&RequestEvent]) -> f64 {
    events.iter().map(|e| e.cpu_ns as f64).sum::<f64>() / events.len() as f64 / 1000.0
}

/// The known costs, checked the way the tests of the issue ask: every class's count, identity
/// and bytes exactly; its CPU within 10 % of the known burn; the sum against the cgroup's.
fn attributes_known_costs(flags: &[&str]) {
    // Not shorter than 1 ms: a longer request costs the same syscalls, but its response more
    // often has to wake a client that went to sleep meanwhile (a few µs that a 5 % bound on
    // 200 µs cannot absorb on a busy machine).
    const CLASSES: [u64; 3] = [0, 1000, 2000];
    const PER_CLASS: usize = 200;
    let _alone = alone();
    let subject = Subject::cost_classes(flags);
    let before = subject.cpu();
    let clients = burn_requests(subject.addr, &CLASSES, PER_CLASS);
    let events = subject.wait_events(CLASSES.len() * PER_CLASS);
    let after = subject.cpu();
    assert_eq!(
        subject.wait_events(0),
        [],
        "one event per request, not one more"
    );

    assert_eq!(events.len(), CLASSES.len() * PER_CLASS);
    let classes = by_class(&events);
    for (us, list) in &classes {
        let peers: BTreeSet<SocketAddr> = list.iter().map(|e| e.peer).collect();
        let sent: BTreeSet<SocketAddr> = clients[us].iter().copied().collect();
        assert_eq!(
            peers, sent,
            "burn/{us}: the peers are the clients that asked"
        );
        let response = format!("burned {us} us\r\n").len() as u64;
        let conns: BTreeSet<u64> = list.iter().map(|e| e.conn_id).collect();
        assert_eq!(conns.len(), PER_CLASS, "one connection per request");
        for e in list {
            assert_eq!(e.pid, subject.server.pid());
            assert_eq!(e.local_port, subject.addr.port());
            assert_eq!((e.seq, e.closed), (0, true));
            assert_eq!(e.bytes_in, e.head.len() as u64);
            assert_eq!(e.bytes_out, response);
            assert!(e.first_in_ns > 0 && e.last_out_ns >= e.first_in_ns, "{e:?}");
            let calls: BTreeMap<&str, u32> = e
                .top_syscalls
                .iter()
                .map(|(n, c)| (n.as_ref(), *c))
                .collect();
            assert_eq!(calls.values().sum::<u32>(), e.syscalls, "{e:?}");
            assert_eq!(
                (calls["read"], calls["write"], calls["close"]),
                (1, 1, 1),
                "{e:?}"
            );
            assert!(calls["clock_gettime"] >= 2, "{e:?}");
            // A new thread's first malloc maps its arena: memory calls may join a request.
            let served = ["read", "write", "close", "clock_gettime", "epoll_ctl"];
            let memory = ["mmap", "munmap", "mprotect", "madvise", "brk"];
            assert!(
                calls
                    .keys()
                    .all(|n| served.contains(n) || memory.contains(n)),
                "{e:?}"
            );
        }
    }

    // Each burn/N request runs the burn/0 request's work plus a spin of at least N µs of
    // thread CPU (it overshoots by one clock read, well under 1 µs): the difference of the
    // means is the burn. Single requests are not bounded: on a VM, steal time is subtracted
    // as the run queue accounts it, which may lag into the neighbouring request. The means
    // agree within 1-2 % on a quiet machine; with a benchmark saturating both CPUs beside the
    // test, 1050 µs was seen for burn/1000. A burn charged to another request or lost moves
    // a mean by a whole burn, far beyond the bound.
    const BURN_BOUND: f64 = 0.10;
    let base = mean_cpu_us(&classes[&0]);
    for us in [1000, 2000] {
        let mean = mean_cpu_us(&classes[&us]);
        let burn = mean - base;
        eprintln!("burn/{us}: {mean:.1} µs per request, {base:.1} µs without the burn");
        assert!(
            (burn - us as f64).abs() <= BURN_BOUND * us as f64,
            "burn/{us}: {burn:.1} µs attributed for the burn"
        );
    }

    let counted = after.0.since(&before.0);
    let cgroup = after.1 - before.1;
    eprintln!(
        "attributed {} µs + unattributed {} µs vs cgroup {} µs",
        counted.attributed_ns / 1000,
        counted.unattributed_ns / 1000,
        cgroup / 1000
    );
    // Two clocks for the same time, the probes' runs from switch to switch and the
    // scheduler's accounting, disagree more the busier the machine: 1.2 %, either way, with the
    // load average at 16 on 2 CPUs. The bound is for time lost or counted twice wholesale (a
    // thread's runs, the unattributed 7 % of --threads), which no load makes up.
    let gap = counted.total_ns().abs_diff(cgroup) as f64 / cgroup as f64;
    assert!(
        gap <= 0.05,
        "probes {} ns vs cgroup {cgroup} ns",
        counted.total_ns()
    );
    let attributed: u64 = events.iter().map(|e| e.cpu_ns).sum();
    assert_eq!(attributed, counted.attributed_ns);
    assert_eq!(
        (counted.events, counted.dropped, counted.conn_overflow),
        (600, 0, 0)
    );
}

#[test]
fn event_loop_requests_cost_what_they_burn() {
    attributes_known_costs(&[]);
}

#[test]
fn thread_per_connection_requests_cost_what_they_burn() {
    attributes_known_costs(&["--threads"]);
}

/// What strace saw of one class: calls by name and socket bytes, summed over its requests.
#[derive(Debug, Default, PartialEq, Eq)]
struct ClassCalls {
    requests: u64,
    calls: BTreeMap<String, u64>,
    bytes_in: u64,
    bytes_out: u64,
}

/// One line of `strace -yy`: name, the TCP connection of the fd it works on (its first argument,
/// or epoll_ctl's third; `peer->local` for a connected socket, None for a listener or any other
/// fd), return value, first string.
struct Call<'a> {
    name: &'a str,
    conn: Option<&'a str>,
    ret: i64,
    text: Option<&'a str>,
}

fn parse_call(line: &str) -> Option<Call<'_>> {
    let open = line.find('(')?;
    let name = &line[..open];
    let args = &line[open + 1..];
    let fd_arg = if name == "epoll_ctl" {
        args.splitn(3, ", ").nth(2).unwrap_or("")
    } else {
        args
    };
    let conn = fd_arg
        .strip_prefix(|c: char| c.is_ascii_digit())
        .map(|a| a.trim_start_matches(|c: char| c.is_ascii_digit()))
        .and_then(|a| a.strip_prefix("<TCP:["))
        .and_then(|a| a.split_once("]>"))
        .map(|(c, _)| c)
        .filter(|c| c.contains("->"));
    // strace pads short calls' results (`munmap(0x7f…, 67108864)        = 0`) and prints
    // addresses in hex (`mmap(...) = 0x7f…`): both once went uncounted, and a thread's malloc
    // arena (mmap, munmap) read as the probes over-counting.
    let value = line
        .rmatch_indices(')')
        .find_map(|(at, _)| line[at + 1..].trim_start().strip_prefix("= "))?
        .split(' ')
        .next()?;
    let ret = match value.strip_prefix("0x") {
        Some(hex) => i64::from_str_radix(hex, 16).ok()?,
        None => value.parse().ok()?,
    };
    let text = args
        .split_once(", \"")
        .and_then(|(_, t)| t.split_once('"'))
        .map(|(t, _)| t);
    Some(Call {
        name,
        conn,
        ret,
        text,
    })
}

/// Reads the per-thread traces of `strace -ff` and charges every call to the connection of the
/// thread's latest call on a connected TCP socket, until a readiness wait or that socket's
/// close: the rule the probes implement, applied to the calls strace saw.
fn strace_classes(prefix: &Path) -> BTreeMap<u64, ClassCalls> {
    let dir = prefix.parent().unwrap();
    let stem = prefix.file_name().unwrap().to_str().unwrap();
    let mut per_conn: BTreeMap<String, (Option<u64>, ClassCalls)> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        if !entry
            .file_name()
            .to_str()
            .unwrap()
            .starts_with(&format!("{stem}."))
        {
            continue;
        }
        let mut serving: Option<String> = None;
        for line in BufReader::new(std::fs::File::open(entry.path()).unwrap()).lines() {
            let line = line.unwrap();
            let Some(call) = parse_call(&line) else {
                continue;
            };
            if let Some(conn) = call.conn {
                serving = Some(conn.to_string());
            } else if call.name.starts_with("epoll_wait") || call.name.contains("poll") {
                serving = None;
            }
            let Some(conn) = &serving else {
                continue;
            };
            let (class, calls) = per_conn.entry(conn.clone()).or_default();
            *calls.calls.entry(call.name.to_string()).or_default() += 1;
            if call.conn.is_some() && call.ret > 0 {
                match call.name {
                    "read" => {
                        calls.bytes_in += call.ret as u64;
                        let selector = call.text.and_then(|t| t.strip_prefix("burn/"));
                        *class = selector.and_then(|s| s.strip_suffix("\\r\\n")?.parse().ok());
                    }
                    "write" => calls.bytes_out += call.ret as u64,
                    _ => {}
                }
            }
            if call.name == "close" && call.conn.is_some() {
                serving = None;
            }
        }
    }
    let mut classes: BTreeMap<u64, ClassCalls> = BTreeMap::new();
    for (class, calls) in per_conn.into_values() {
        let total = classes
            .entry(class.expect("every connection read a selector"))
            .or_default();
        total.requests += 1;
        total.bytes_in += calls.bytes_in;
        total.bytes_out += calls.bytes_out;
        for (name, n) in calls.calls {
            *total.calls.entry(name).or_default() += n;
        }
    }
    classes
}

fn event_classes(events: &[RequestEvent]) -> BTreeMap<u64, ClassCalls> {
    let mut classes: BTreeMap<u64, ClassCalls> = BTreeMap::new();
    for e in events {
        let total = classes.entry(class_of(e)).or_default();
        total.requests += 1;
        total.bytes_in += e.bytes_in;
        total.bytes_out += e.bytes_out;
        for (name, n) in &e.top_syscalls {
            *total.calls.entry(name.to_string()).or_default() += u64::from(*n);
        }
    }
    classes
}

/// strace attached to every thread of `pid` (and following new ones), writing `prefix.TID`.
struct Strace(std::process::Child);

impl Strace {
    fn attach(pid: u32, prefix: &Path) -> Strace {
        let child = Command::new("strace")
            .args(["-f", "-ff", "-yy", "-qq", "-e", "signal=none", "-o"])
            .arg(prefix)
            .args(["-p", &pid.to_string()])
            .stderr(Stdio::null())
            .spawn()
            .expect("strace runs");
        let deadline = Instant::now() + Duration::from_secs(10);
        while !traced(pid) {
            assert!(Instant::now() < deadline, "strace did not attach to {pid}");
            std::thread::sleep(Duration::from_millis(10));
        }
        Strace(child)
    }

    /// Detaches (SIGINT) and waits until the traces are written.
    fn finish(mut self) {
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.0.id() as libc::pid_t, libc::SIGINT) };
        self.0.wait().unwrap();
    }
}

/// Every thread of `pid` has a tracer.
fn traced(pid: u32) -> bool {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return false;
    };
    tasks.flatten().all(|t| {
        std::fs::read_to_string(t.path().join("status"))
            .unwrap_or_default()
            .lines()
            .any(|l| l.starts_with("TracerPid:") && l.split_whitespace().nth(1) != Some("0"))
    })
}

fn counts_what_strace_sees(flags: &[&str]) {
    const CLASSES: [u64; 2] = [0, 200];
    const PER_CLASS: usize = 30;
    let _alone = alone();
    let subject = Subject::cost_classes(flags);
    let trace_dir = Scratch::new("strace");
    let prefix = trace_dir.0.join("trace");
    let strace = Strace::attach(subject.server.pid(), &prefix);
    burn_requests(subject.addr, &CLASSES, PER_CLASS);
    let events = subject.wait_events(CLASSES.len() * PER_CLASS);
    // The probes see a call's return before strace is told of it: wait for its last lines.
    let deadline = Instant::now() + Duration::from_secs(10);
    let closes = |c: &BTreeMap<u64, ClassCalls>| -> u64 {
        c.values()
            .map(|k| k.calls.get("close").copied().unwrap_or(0))
            .sum()
    };
    while closes(&strace_classes(&prefix)) < events.len() as u64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    strace.finish();

    assert_eq!(events.len(), CLASSES.len() * PER_CLASS);
    let seen = strace_classes(&prefix);
    let counted = event_classes(&events);
    assert_eq!(counted, seen, "probes (left) vs strace (right)");
    for class in counted.values() {
        assert_eq!(class.requests, PER_CLASS as u64);
    }
}

#[test]
fn event_loop_calls_and_bytes_per_request_match_strace() {
    counts_what_strace_sees(&[]);
}

#[test]
fn thread_per_connection_calls_and_bytes_per_request_match_strace() {
    counts_what_strace_sees(&["--threads"]);
}

/// Debian's nginx, one process, serving `www/1k.txt` (1024 bytes).
fn nginx() -> Subject {
    let port = free_loopback_port().unwrap();
    let dir = Scratch::new("nginx");
    let d = dir.0.display();
    std::fs::create_dir_all(dir.0.join("www")).unwrap();
    std::fs::create_dir_all(dir.0.join("tmp")).unwrap();
    std::fs::write(dir.0.join("www/1k.txt"), [b'x'; 1024]).unwrap();
    let conf = format!(
        "worker_processes 1;\ndaemon off;\nmaster_process off;\npid {d}/nginx.pid;\n\
         error_log {d}/error.log;\nevents {{ worker_connections 1024; }}\n\
         http {{\n access_log {d}/access.log;\n client_body_temp_path {d}/tmp;\n\
          proxy_temp_path {d}/tmp; fastcgi_temp_path {d}/tmp; uwsgi_temp_path {d}/tmp;\n\
          scgi_temp_path {d}/tmp;\n sendfile on; keepalive_requests 100000;\n\
          server {{ listen 127.0.0.1:{port}; root {d}/www; }}\n}}\n"
    );
    let conf_path = dir.0.join("nginx.conf");
    std::fs::write(&conf_path, conf).unwrap();
    let command = vec![
        "/usr/sbin/nginx".to_string(),
        "-p".into(),
        d.to_string(),
        "-c".into(),
        conf_path.display().to_string(),
    ];
    Subject::launch("nginx", command, port, dir)
}

/// Sends `n` GETs one after the other on one connection, reading each response whole.
fn keep_alive_requests(addr: SocketAddr, n: usize) -> SocketAddr {
    let s = TcpStream::connect(addr).unwrap();
    get_1k(&s, n);
    s.local_addr().unwrap()
}

/// Sends `n` GETs one after the other on `s`, reading each response whole.
fn get_1k(s: &TcpStream, n: usize) {
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut writer = s;
    for _ in 0..n {
        writer
            .write_all(b"GET /1k.txt HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .unwrap();
        let mut length = None;
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" {
                break;
            }
            if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse::<usize>().ok();
            }
        }
        let mut body = vec![0; length.expect("a Content-Length")];
        reader.read_exact(&mut body).unwrap();
        assert_eq!(body, [b'x'; 1024]);
    }
}

/// A kept-alive connection's last request has not ended (no next request, no close): it is
/// read from the connection table in flight, with its bytes and head, and with the counters
/// read beside it the CPU adds up: what was attributed is in the ended requests or in it.
#[test]
fn an_open_request_is_read_in_flight_and_the_cpu_adds_up() {
    let _alone = alone();
    let subject = nginx();
    subject.prime(|addr| keep_alive_requests(addr, 1));
    let before = subject.probes.request_counters();
    let conn = TcpStream::connect(subject.addr).unwrap();
    get_1k(&conn, 3);
    let ended = subject.wait_events(2);
    subject.cpu();
    let (open, after, _) = subject.probes.open_requests();

    assert_eq!(ended.len(), 2, "{ended:?}");
    let [request] = &open[..] else {
        panic!("one request open: {open:?}")
    };
    assert!(request.in_flight && !request.closed, "{request:?}");
    assert_eq!(request.peer, conn.local_addr().unwrap());
    assert_eq!((request.conn_id, request.seq), (ended[1].conn_id, 2));
    assert!(request.head.starts_with(b"GET /1k.txt HTTP/1.1\r\n"));
    assert_eq!(request.bytes_in, 41);
    assert_eq!(request.bytes_out, ended[1].bytes_out);
    let counted: u64 = ended.iter().map(|e| e.cpu_ns).sum::<u64>() + request.cpu_ns;
    assert_eq!(after.since(&before).attributed_ns, counted);
}

/// This process's BPF links: the probes' attached programs, the uprobes included.
fn bpf_links() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|e| {
            std::fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == "anon_inode:bpf_link")
        })
        .count()
}

/// nginx serving plain HTTP maps libssl, whose uprobes the probes attach, but never calls it: a
/// pause detaches the seven programs on the syscalls, switches, wakeups and faults, not those
/// uprobes (closing one waits 0.1 s for the kernel, and the churn costs the server), and once
/// resumed every request is counted again. libssl is told as hooked and never called, not as
/// a library whose plaintext was read.
#[test]
fn a_pause_keeps_the_tls_uprobes_nothing_called() {
    let _alone = alone();
    let subject = nginx();
    subject.prime(|addr| keep_alive_requests(addr, 1));
    let tls = subject.probes.tls();
    assert!(tls.hooked.is_empty(), "{tls:?}");
    assert!(
        tls.uncalled.iter().any(|l| l.contains("libssl")),
        "libssl hooked, never called: {tls:?}"
    );
    let attached = bpf_links();
    subject.probes.pause();
    let paused = bpf_links();
    subject.probes.resume().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(attached - paused, 7);
    assert_eq!(bpf_links(), attached);
    keep_alive_requests(subject.addr, 3);
    let events = subject.wait_events(3);
    assert_eq!(events.len(), 3, "{events:?}");
}

#[test]
fn keep_alive_requests_to_nginx_are_counted_one_by_one() {
    const CONNECTIONS: usize = 4;
    const PER_CONNECTION: usize = 25;
    let _alone = alone();
    let subject = nginx();
    subject.prime(|addr| keep_alive_requests(addr, 1));
    let clients: BTreeSet<SocketAddr> = (0..CONNECTIONS)
        .map(|_| keep_alive_requests(subject.addr, PER_CONNECTION))
        .collect();
    let events = subject.wait_events(CONNECTIONS * PER_CONNECTION);
    // Nothing more comes: one event per request, not one more.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(subject.wait_events(0), []);

    assert_eq!(events.len(), CONNECTIONS * PER_CONNECTION);
    let mut per_conn: BTreeMap<u64, Vec<&RequestEvent>> = BTreeMap::new();
    for e in &events {
        assert!(e.head.starts_with(b"GET /1k.txt HTTP/1.1\r\n"), "{e:?}");
        assert_eq!(e.bytes_in, 41);
        assert!(
            e.bytes_out > 1024 && e.cpu_ns > 0 && e.syscalls > 0,
            "{e:?}"
        );
        per_conn.entry(e.conn_id).or_default().push(e);
    }
    assert_eq!(per_conn.len(), CONNECTIONS);
    let peers: BTreeSet<SocketAddr> = events.iter().map(|e| e.peer).collect();
    assert_eq!(peers, clients);
    for list in per_conn.values() {
        let seqs: Vec<u32> = list.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, (0..PER_CONNECTION as u32).collect::<Vec<_>>());
        let closed: Vec<bool> = list.iter().map(|e| e.closed).collect();
        assert_eq!(closed.iter().filter(|c| **c).count(), 1);
        assert!(
            closed[PER_CONNECTION - 1],
            "the last request ends with the close"
        );
    }
}

/// A Python server mapping libssl and libgnutls (loaded through ctypes) that calls libssl on
/// each request (an `SSL_write_ex` on a memory-BIO session, no TLS on the wire) and never
/// libgnutls: a pause detaches the seven hot programs and libssl's five uprobe-multi links
/// (four entries, one return), not libgnutls's, which nothing called; resumed, every link is
/// back. The notes' split follows the same counts: libssl read, libgnutls never called.
#[test]
fn a_pause_detaches_only_the_tls_library_called() {
    let _alone = alone();
    let port = free_loopback_port().unwrap();
    let dir = Scratch::new("two-tls-libraries");
    let script = format!(
        "import ctypes, socketserver, ssl\n\
         ctypes.CDLL('libgnutls.so.30')\n\
         ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)\n\
         class H(socketserver.StreamRequestHandler):\n\
         \x20   def handle(self):\n\
         \x20       self.rfile.readline()\n\
         \x20       session = ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname='x')\n\
         \x20       try:\n\
         \x20           session.write(b'x')\n\
         \x20       except ssl.SSLError:\n\
         \x20           pass\n\
         \x20       self.wfile.write(b'ok\\r\\n')\n\
         socketserver.TCPServer.allow_reuse_address = True\n\
         socketserver.TCPServer(('127.0.0.1', {port}), H).serve_forever()\n"
    );
    let path = dir.0.join("server.py");
    std::fs::write(&path, script).unwrap();
    let command = vec!["python3".to_string(), path.display().to_string()];
    let subject = Subject::launch("two-tls-libraries", command, port, dir);
    subject.prime(|addr| gopher(addr, "first").0);
    let tls = subject.probes.tls();
    assert!(
        tls.hooked.iter().any(|l| l.contains("libssl")),
        "libssl called: {tls:?}"
    );
    assert!(
        tls.uncalled.iter().any(|l| l.contains("libgnutls")),
        "libgnutls never called: {tls:?}"
    );
    let attached = bpf_links();
    subject.probes.pause();
    let paused = bpf_links();
    subject.probes.resume().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(attached - paused, 7 + 5);
    assert_eq!(bpf_links(), attached);
    subject.prime(|addr| gopher(addr, "again").0);
}

/// A Python server whose request makes 20 other syscalls before polling its socket's send
/// queue 300 times (ioctl TIOCOUTQ, seeds/002's call), answers, and keeps the connection until
/// the client closes it.
const SET_UP_THEN_IOCTL: &str = r#"
import fcntl, os, resource, socket, sys, termios
listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen(8)
while True:
    conn, _ = listener.accept()
    if not conn.recv(64):
        conn.close()
        continue
    os.getuid(); os.getgid(); os.geteuid(); os.getegid(); os.getppid(); os.getpgrp()
    os.getsid(0); os.times(); os.uname(); os.getcwd(); os.umask(0o22); os.sched_yield()
    os.getpriority(os.PRIO_PROCESS, 0); os.access("/", os.R_OK); os.stat("/")
    os.sched_getaffinity(0); os.getgroups(); os.getresuid(); os.getresgid()
    resource.getrlimit(resource.RLIMIT_NOFILE)
    for _ in range(300):
        fcntl.ioctl(conn.fileno(), termios.TIOCOUTQ, bytes(4))
    conn.sendall(b"ok\r\n")
    conn.recv(64)
    conn.close()
"#;

/// The top syscalls are the request's most made whatever it made first: the 300 ioctl made
/// after 20 other syscalls (more than the request's slots) lead its list with their exact
/// count, in flight (ranked by the loader) and at its close (ranked in the kernel), and what
/// was left out is bounded below the listed.
#[test]
fn syscalls_made_after_the_slots_are_full_are_ranked_exactly() {
    let _alone = alone();
    let port = free_loopback_port().unwrap();
    let dir = Scratch::new("spill");
    let script = dir.0.join("server.py");
    std::fs::write(&script, SET_UP_THEN_IOCTL).unwrap();
    let command = vec![
        reqcost_testkit::PYTHON.to_string(),
        script.display().to_string(),
        port.to_string(),
    ];
    let subject = Subject::launch("spill", command, port, dir);
    subject.prime(|addr| {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(b"prime\r\n").unwrap();
        s.read_exact(&mut [0; 4]).unwrap();
        s.local_addr().unwrap()
    });
    let mut conn = TcpStream::connect(subject.addr).unwrap();
    conn.write_all(b"ioctl\r\n").unwrap();
    let mut answer = [0; 4];
    conn.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"ok\r\n");
    subject.cpu();
    let (open, _, _) = subject.probes.open_requests();
    let client = conn.local_addr().unwrap();
    let in_flight = open
        .iter()
        .find(|e| e.peer == client)
        .unwrap_or_else(|| panic!("the request in flight: {open:?}"));
    drop(conn);
    let ended = subject.wait_events(1);
    let [closed] = &ended[..] else {
        panic!("one request ended: {ended:?}")
    };
    for e in [in_flight, closed] {
        assert_eq!(e.top_syscalls.len(), 16, "{e:?}");
        assert_eq!(e.top_syscalls[0], ("ioctl".into(), 300), "{e:?}");
        let listed: u32 = e.top_syscalls.iter().map(|(_, n)| n).sum();
        assert!(e.syscalls > listed, "more syscalls than slots: {e:?}");
        let least = e.top_syscalls.last().unwrap().1;
        let unlisted = e
            .unlisted_max
            .expect("the probes bound what they leave out");
        assert!(
            unlisted <= least && unlisted <= e.syscalls - listed,
            "{e:?}"
        );
    }
}
