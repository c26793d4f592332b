//! A stack's request events for the analysis' and the reports' tests (docs/stack.md): nginx in
//! front (hop 0) of an application server (hop 1) that queries PostgreSQL (hop 2), each
//! upstream reached over one pooled connection that serves every front request in turn, the
//! events in the order they end: some upstream requests before the front request they served,
//! most after it.
//!
//! Two front classes: `GET /orders`, whose cost is in the application and the database (90 µs
//! in nginx, 1 400 µs in the application, 3 queries of 410 µs in all: 1.9 ms a request), and
//! `GET /export`, whose cost is in the proxy (2 000 µs in nginx, 150 µs in the application, one
//! query of 20 µs). Besides: each upstream's own work (the application's health check from
//! another client, the database's keep-alive query), a query linked to a front request the
//! phase never saw, and the turns on the connections nginx and the application opened to call
//! their upstreams.

use reqcost_record::{
    ClientStats, CpuTimes, Frame, Hop, HopPhase, Machine, Outcome, PerRequest, Phase, Pinning,
    Profile, RequestEvent, RequestRef, RequestStats, RunRecord, SampleTag, ServerTotals, Stack,
    Target, TargetMode, Workload,
};

use crate::request_event;

pub const FRONT_PID: u32 = 100;
pub const APP_PID: u32 = 200;
pub const DB_PID: u32 = 300;

/// `GET /orders` requests, and `GET /export` ones.
pub const ORDERS: u64 = 4;
pub const EXPORTS: u64 = 2;
/// Per request of each class, in µs: nginx, the application, and the database's queries.
pub const ORDERS_US: (u64, u64, [u64; 3]) = (90, 1_400, [200, 110, 100]);
pub const EXPORT_US: (u64, u64, u64) = (2_000, 150, 20);
/// The upstreams' own work, the unlinked query and the calls' turns, in µs.
pub const APP_OWN_US: u64 = 30;
pub const DB_OWN_US: u64 = 50;
pub const DB_UNLINKED_US: u64 = 25;
pub const FRONT_CALL_US: u64 = 5;
pub const APP_CALL_US: u64 = 3;
/// Each tree's CPU that no request holds, in µs.
pub const UNATTRIBUTED_US: [u64; 3] = [100, 67, 45];

/// A PostgreSQL simple-protocol Query message.
pub fn pg_query(sql: &str) -> Vec<u8> {
    let body = [sql.as_bytes(), b"\0"].concat();
    let len = (body.len() + 4) as u32;
    [&[b'Q'][..], &len.to_be_bytes(), &body].concat()
}

fn front(conn_id: u64, seq: u32, path: &str, client: &str, cpu_us: u64) -> RequestEvent {
    RequestEvent {
        pid: FRONT_PID,
        conn_id,
        seq,
        local_port: 8080,
        cpu_ns: cpu_us * 1000,
        syscalls: 4,
        top_syscalls: vec![("writev".into(), 2), ("recvfrom".into(), 2)],
        bytes_out: 2_000,
        closed: false,
        ..request_event(&format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n"), client)
    }
}

/// An upstream hop's request on its pooled connection, caused by `front` (None: its own work).
fn upstream(
    hop: u8,
    seq: u32,
    head: &[u8],
    cpu_us: u64,
    front: Option<RequestRef>,
) -> RequestEvent {
    let pid = [FRONT_PID, APP_PID, DB_PID][usize::from(hop)];
    RequestEvent {
        pid,
        conn_id: 1,
        seq,
        local_port: [8080, 8000, 5432][usize::from(hop)],
        cpu_ns: cpu_us * 1000,
        syscalls: 4,
        top_syscalls: vec![("sendto".into(), 2), ("recvfrom".into(), 2)],
        bytes_in: head.len() as u64,
        head: head.to_vec(),
        closed: false,
        hop,
        caused_by: front,
        ..request_event("", "127.0.0.1")
    }
}

/// A turn on a connection `hop` opened to call the next hop: no request.
fn call(hop: u8, seq: u32, cpu_us: u64) -> RequestEvent {
    RequestEvent {
        pid: [FRONT_PID, APP_PID][usize::from(hop)],
        conn_id: 90,
        upstream_call: true,
        ..upstream(hop, seq, b"HTTP/1.1 200 OK\r\n", cpu_us, None)
    }
}

/// The phase's events in the order they end.
pub fn events() -> Vec<RequestEvent> {
    let (mut app_seq, mut db_seq) = (0, 0);
    let mut app = |front: RequestRef, path: &str, cpu_us: u64| {
        app_seq += 1;
        let head = format!("GET {path} HTTP/1.0\r\n\r\n");
        upstream(1, app_seq, head.as_bytes(), cpu_us, Some(front))
    };
    let mut db = |front: Option<RequestRef>, sql: &str, cpu_us: u64| {
        db_seq += 1;
        upstream(2, db_seq, &pg_query(sql), cpu_us, front)
    };
    let mut out = Vec::new();
    // Each client's keep-alive connection carries two requests of one class.
    for (i, (conn_id, client)) in [(1, "10.0.0.1"), (2, "10.0.0.2"), (3, "10.0.0.3")]
        .into_iter()
        .enumerate()
    {
        for seq in 0..2 {
            let export = conn_id == 2;
            let path = if export { "/export" } else { "/orders" };
            let us = if export { EXPORT_US.0 } else { ORDERS_US.0 };
            let f = front(conn_id, seq, path, client, us);
            let r = f.reference();
            let mut upstreams = if export {
                vec![
                    app(r, path, EXPORT_US.1),
                    db(Some(r), "SELECT * FROM products", EXPORT_US.2),
                ]
            } else {
                let [a, b, c] = ORDERS_US.2;
                vec![
                    db(Some(r), "SELECT * FROM orders", a),
                    db(Some(r), "SELECT * FROM items", b),
                    db(Some(r), "UPDATE stock SET n = n - 1", c),
                    app(r, path, ORDERS_US.1),
                ]
            };
            // Upstream requests end before their front request, after it, or on both sides.
            let before = match (i + seq as usize) % 3 {
                0 => upstreams.len(),
                1 => 0,
                _ => 2,
            };
            let after = upstreams.split_off(before);
            out.extend(upstreams);
            out.push(f);
            out.extend(after);
        }
    }
    out.push(app_own());
    out.push(db(None, "SELECT 1", DB_OWN_US));
    let gone = RequestRef {
        pid: FRONT_PID,
        conn_id: 99,
        seq: 0,
    };
    out.push(db(Some(gone), "SELECT * FROM orders", DB_UNLINKED_US));
    out.push(call(0, 0, FRONT_CALL_US));
    out.push(call(1, 0, APP_CALL_US));
    out
}

/// The application's health check, from a client of its own.
fn app_own() -> RequestEvent {
    RequestEvent {
        conn_id: 2,
        peer: "127.0.0.9:41000".parse().expect("address"),
        ..upstream(1, 0, b"GET /health HTTP/1.0\r\n\r\n", APP_OWN_US, None)
    }
}

/// Each hop's attributed CPU, in ns: its requests', upstream calls included.
pub fn attributed_ns() -> [u64; 3] {
    let (o, e) = (ORDERS, EXPORTS);
    let front = o * ORDERS_US.0 + e * EXPORT_US.0 + FRONT_CALL_US;
    let app = o * ORDERS_US.1 + e * EXPORT_US.1 + APP_OWN_US + APP_CALL_US;
    let db = o * ORDERS_US.2.iter().sum::<u64>() + e * EXPORT_US.2 + DB_OWN_US + DB_UNLINKED_US;
    [front * 1000, app * 1000, db * 1000]
}

/// The hops of the record: the application behind nginx, the database behind it.
pub fn hops() -> Vec<Hop> {
    vec![
        Hop {
            hop: 1,
            pid: APP_PID,
            comm: "gunicorn".into(),
            via: "tcp 127.0.0.1:8000".into(),
            caller: 0,
        },
        Hop {
            hop: 2,
            pid: DB_PID,
            comm: "postgres".into(),
            via: "unix /tmp/pg/.s.PGSQL.5432".into(),
            caller: 1,
        },
    ]
}

/// A tree's CPU of `total_ns`.
pub fn cpu(total_ns: u64) -> CpuTimes {
    CpuTimes {
        total_ns,
        user_ns: total_ns / 2,
        system_ns: total_ns - total_ns / 2,
        source: "fixture".into(),
        split: Default::default(),
    }
}

/// A record of one phase, `main`, of nginx's requests `front` and the hops' `hops`, each
/// tree's CPU its attributed + unattributed.
pub fn record(front: RequestStats, mut hop_phases: Vec<HopPhase>) -> RunRecord {
    for h in &mut hop_phases {
        let r = h.requests.as_ref().expect("the hop's requests");
        h.cpu = Some(cpu(r.attributed_cpu_ns + r.unattributed_cpu_ns));
    }
    let server = ServerTotals {
        cpu: Some(cpu(front.attributed_cpu_ns + front.unattributed_cpu_ns)),
        ..ServerTotals::default()
    };
    let requests = ORDERS + EXPORTS;
    RunRecord {
        format: reqcost_record::FORMAT.into(),
        version: 1,
        id: "stack".into(),
        reqcost_version: "0".into(),
        started_unix_s: 0.0,
        target: Target {
            mode: TargetMode::Attach,
            command: None,
            pid: FRONT_PID,
            comm: "nginx".into(),
            exit: None,
        },
        workload: Workload::default(),
        machine: Machine::default(),
        pinning: Pinning::default(),
        phases: vec![Phase {
            name: "main".into(),
            client_model: None,
            client: ClientStats {
                requests,
                ok: requests,
                ..ClientStats::default()
            },
            per_request: PerRequest::from_totals(&server, requests as f64),
            server,
            requests: Some(front),
            other_traffic: None,
            cpu_windows: None,
            missing: Default::default(),
            unit: Default::default(),
            hops: hop_phases,
        }],
        profile: None,
        outcome: Outcome::Completed,
        notes: Vec::new(),
        hops: hops(),
    }
}

/// A profile whose samples name upstream request `id` (the database's: `ExecSeqScan` under
/// `exec_simple_query`, 9 samples), the application's work for front class `GET /orders`
/// (`render_orders`, 4 samples) and the front's own (`ngx_http_proxy_handler`, 3 samples), as
/// the measurement tags them (docs/profile.md, docs/stack.md): an upstream's samples carry the
/// front request's class and their hop, apart from the front's.
pub fn profile(id: &str) -> Profile {
    let frame = |function: &str, module: &str| Frame {
        function: function.into(),
        module: module.into(),
        kernel: false,
        inlined: false,
        resolved: true,
    };
    let stack = |frames: Vec<u32>, thread: &str, count, tag| Stack {
        frames,
        thread: thread.into(),
        count,
        tag: Some(tag),
    };
    Profile {
        event: "cpu-clock".into(),
        freq_hz: 1000,
        period_ns: 1_000_000,
        samples: 3,
        frames: vec![
            frame("ExecSeqScan", "postgres"),
            frame("exec_simple_query", "postgres"),
            frame("PostgresMain", "postgres"),
            frame("ngx_http_proxy_handler", "nginx"),
            frame("ngx_worker_process_cycle", "nginx"),
            frame("render_orders", "python3"),
            frame("handle_request", "python3"),
        ],
        stacks: vec![stack(vec![3, 4], "nginx", 3, 1)],
        hop_stacks: vec![
            stack(vec![0, 1, 2], "postgres", 9, 0),
            stack(vec![5, 6], "gunicorn", 4, 2),
        ],
        tags: vec![
            SampleTag {
                class: "GET /orders".into(),
                phase: "main".into(),
                request: id.into(),
                hop: 2,
                ..SampleTag::default()
            },
            SampleTag {
                class: "GET /orders".into(),
                phase: "main".into(),
                ..SampleTag::default()
            },
            SampleTag {
                class: "GET /orders".into(),
                phase: "main".into(),
                hop: 1,
                ..SampleTag::default()
            },
        ],
        ..Profile::default()
    }
}
