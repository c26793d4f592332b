//! Whether a phase's request count can be trusted: the server-side count follows socket reads
//! and writes, which is wrong for ciphertext without a plaintext hook and for multiplexed
//! protocols without a parser; the load generator's own count, when known, is a cross-check.
//! Every caveat names the count the per-request figures divide by, so that no wrong count is
//! ever silent (docs/tls.md).

use reqcost_record::{ExternalLoad, Phase, RequestStats, Unit, Workload};
use serde::{Deserialize, Serialize};

/// One reason not to trust a phase's request count.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CountCaveat {
    /// `tls-ciphertext`, `http2-unparsed` or `far-from-load`.
    pub id: String,
    /// One line for the reader, ending with the count the per-request figures use.
    pub text: String,
}

/// Server and load generator counts further apart than this share of the load generator's are
/// reported (warm-up stragglers and windows' scaling stay well within it).
const FAR_SHARE: f64 = 0.2;
/// ... and further apart than this many requests.
const FAR_MIN: u64 = 10;
/// Counts this many times apart either way are not a few requests missed but another unit:
/// the server's turns are not the client's requests.
const OTHER_UNIT: f64 = 2.0;

/// The caveats on `p`'s request count; `workload` is the run's, when the phase has a run, and
/// `tls_hooked` the TLS libraries whose plaintext its probes read.
pub fn count_caveats(
    p: &Phase,
    workload: Option<&Workload>,
    tls_hooked: &[&str],
) -> Vec<CountCaveat> {
    if workload.is_some_and(|w| w.url.starts_with("quic://")) {
        return vec![quic_caveat(p)];
    }
    let load = workload.and_then(|w| w.load.as_ref());
    let Some(served) = &p.requests else {
        return Vec::new();
    };
    let used = count_used(p);
    let mut caveats = Vec::new();
    if served.tls_ciphertext > 0 {
        caveats.push(CountCaveat {
            id: "tls-ciphertext".into(),
            text: format!(
                "{} of the {} requests counted on the server side are TLS connections whose \
                 plaintext reqcost could not read ({}): each counts as one request, whatever it \
                 carried, and what was asked cannot be read; {used}",
                served.tls_ciphertext,
                served.requests,
                why_ciphertext(tls_hooked)
            ),
        });
    }
    if let Some(text) = http2_unparsed(served) {
        caveats.push(CountCaveat {
            id: "http2-unparsed".into(),
            text: format!("{text}; {used}"),
        });
    }
    if let Some((sent, source)) = load_generator_count(p, load) {
        if far_apart(served.requests, sent) {
            caveats.push(CountCaveat {
                id: "far-from-load".into(),
                text: format!(
                    "the server side counted {} requests, {source} {sent}{}; {used}",
                    served.requests,
                    other_unit_hint(served.requests, sent)
                ),
            });
        }
    }
    caveats
}

/// Why TLS connections were counted on their ciphertext: with a library hooked, its hooks saw no
/// plaintext on them, which is not the same as no hook at all.
fn why_ciphertext(tls_hooked: &[&str]) -> String {
    if tls_hooked.is_empty() {
        return "no hook for the server's TLS library; the notes name the TLS libraries found, \
                and one linked in statically other than OpenSSL and Go's crypto/tls is not found \
                at all"
            .into();
    }
    format!(
        "the hooks on {} saw no plaintext on them: connections that ended before a request \
         (a handshake alone, a probe of the port), or TLS done by another library",
        tls_hooked.join(", ")
    )
}

/// Most classes a QUIC caveat names; the rest are counted.
const QUIC_CLASSES_NAMED: usize = 8;

/// Requests inside QUIC travel in encrypted datagrams the socket probes cannot read: counted by
/// the uprobe on the server's libnghttp3 when it answered any, else by reqcost's own QUIC client
/// when it drove the phase, else not at all.
fn quic_caveat(p: &Phase) -> CountCaveat {
    let answered = p.requests.as_ref().map_or(0, |r| r.http3_requests);
    let client = (p.client.requests > 0).then(|| {
        format!(
            "{} requests completed by reqcost's QUIC client ({})",
            p.client.ok,
            quic_classes(p)
        )
    });
    if answered > 0 {
        let cross_check = client.map(|c| format!(", {c}")).unwrap_or_default();
        return CountCaveat {
            id: "quic-http3-count".into(),
            text: format!(
                "counted on the server side by a uprobe on its libnghttp3 (one per HTTP/3 \
                 response), not on its sockets: {answered} HTTP/3 requests{cross_check}; no class \
                 has a CPU of its own; {}",
                count_used(p)
            ),
        };
    }
    match client {
        Some(client) => CountCaveat {
            id: "quic-client-count".into(),
            text: format!(
                "counted by reqcost's QUIC client: the server's side of QUIC is not visible (its \
                 requests travel inside encrypted UDP datagrams): {client}, and no class has a \
                 CPU of its own; {}",
                count_used(p)
            ),
        },
        None => CountCaveat {
            id: "quic-not-counted".into(),
            text: format!(
                "requests inside QUIC are not visible on the server's sockets and the --load \
                 command's own count is not read, so no request is counted: figures are per {} \
                 (--per MiB or --per datagram)",
                p.unit.label()
            ),
        },
    }
}

/// The classes reqcost's QUIC client completed, the largest first: `GET /a 2, GET /b 1`.
fn quic_classes(p: &Phase) -> String {
    let mut classes: Vec<(&String, &u64)> = p.client.quic_classes.iter().collect();
    classes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut named: Vec<String> = classes
        .iter()
        .take(QUIC_CLASSES_NAMED)
        .map(|(class, n)| format!("{class} {n}"))
        .collect();
    if classes.len() > QUIC_CLASSES_NAMED {
        named.push(format!(
            "{} more classes",
            classes.len() - QUIC_CLASSES_NAMED
        ));
    }
    named.join(", ")
}

/// What of the phase's HTTP/2 the probes could not parse, when anything: connections whose
/// streams were not counted from their frames, and requests not named by their path.
fn http2_unparsed(served: &RequestStats) -> Option<String> {
    let mut parts = Vec::new();
    if served.http2_connections > 0 {
        parts.push(format!(
            "{} connections spoke HTTP/2 whose frames were not parsed (h2c read with calls \
             whose buffer the probes do not copy): requests follow reads after writes, not streams",
            served.http2_connections
        ));
    }
    if served.http2_lost > 0 {
        parts.push(format!(
            "{} HTTP/2 connections' frames were lost (a frame header split between two reads): \
             streams they opened afterwards are not counted",
            served.http2_lost
        ));
    }
    if served.http2_unnamed > 0 {
        parts.push(format!(
            "{} HTTP/2 requests are counted but not named by their path (a piece of their \
             connection's header blocks was lost, so its HPACK table is not trusted): class (http2)",
            served.http2_unnamed
        ));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The count the phase's per-request figures divide by, and where it comes from.
fn count_used(p: &Phase) -> String {
    let n = p.units_of(Unit::Request).unwrap_or(0.0);
    let server_side = p.requests.as_ref().is_some_and(|r| {
        r.http3_requests > 0 || p.client.requests == 0 || p.other_traffic.is_some()
    });
    let source = if server_side {
        "counted on the server side"
    } else {
        "that reqcost's load generator completed"
    };
    format!("per-request figures divide by the {n:.0} requests {source}")
}

/// What the load generator says it completed: reqcost's own count, or the summary line of a
/// known `--load` command (h2load, wrk) in its output.
fn load_generator_count(p: &Phase, load: Option<&ExternalLoad>) -> Option<(u64, &'static str)> {
    if p.client.requests > 0 {
        return Some((p.client.ok, "reqcost's load generator completed"));
    }
    let load = load.filter(|_| p.name == "main")?;
    external_count(load)
        .map(|n| (n, "the --load command reports"))
        .or_else(|| redis_benchmark_commands(load).map(|n| (n, "the --load command asks for")))
}

fn far_apart(served: u64, sent: u64) -> bool {
    let diff = served.abs_diff(sent);
    diff > FAR_MIN && diff as f64 > sent as f64 * FAR_SHARE
}

/// What to do when the counts are more than OTHER_UNIT times apart: a protocol reqcost does not
/// parse is counted by turns (a read after a write), which a client pipelining or multiplexing
/// its requests, or a chatty set-up, puts far from what it sent.
fn other_unit_hint(served: u64, sent: u64) -> &'static str {
    let (low, high) = (served.min(sent) as f64, served.max(sent) as f64);
    if high > low * OTHER_UNIT {
        " (more than twice apart: the server's turns are not the client's requests; --per \
         connection divides by connections instead)"
    } else {
        ""
    }
}

/// The requests a `--load` command reports done: h2load's `requests: N total, N started, N
/// done, N succeeded, ...`, wrk's `N requests in 10.00s, ...`, pgbench's transactions of a
/// builtin script times its statements, sysbench's queries, mysqlslap's queries, memcslap's keys
/// set and got. A cross-check only: the count itself comes from the server side.
/// redis-benchmark's is read from its command line ([`redis_benchmark_commands`]).
pub fn external_count(load: &ExternalLoad) -> Option<u64> {
    let lines = &load.output_tail;
    pgbench_statements(lines)
        .or_else(|| sysbench_queries(lines))
        .or_else(|| mysqlslap_queries(lines, &load.command))
        .or_else(|| summary_count(lines))
        .or_else(|| memcslap_commands(lines))
}

/// The commands memcslap (libmemcached-tools) sent: one per key of its `Time to set N keys`
/// (its initial load, and the set test) and `Time to get N keys by T threads` lines. None for
/// its mget test, whose keys go several to a command.
fn memcslap_commands(lines: &[String]) -> Option<u64> {
    let mut total = None;
    for line in lines {
        let Some(rest) = line.strip_prefix("Time to ") else {
            continue;
        };
        let mut words = rest.split_whitespace();
        let (Some(op), Some(n), Some("keys" | "keys:")) =
            (words.next(), words.next(), words.next())
        else {
            continue;
        };
        match op {
            "set" | "get" => *total.get_or_insert(0) += n.parse::<u64>().ok()?,
            "mget" => return None,
            _ => {}
        }
    }
    total
}

/// h2load's or wrk's summary line.
fn summary_count(lines: &[String]) -> Option<u64> {
    lines.iter().find_map(|line| {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("requests: ") {
            return rest
                .split(", ")
                .find_map(|part| part.strip_suffix(" succeeded").and_then(|n| n.parse().ok()));
        }
        let (n, rest) = line.split_once(' ')?;
        rest.starts_with("requests in ")
            .then(|| n.parse().ok())
            .flatten()
    })
}

/// The statements pgbench sent: `number of transactions actually processed: N/M` times the
/// statements of its builtin script (`transaction type: <builtin: select only>`); None for a
/// script of its own (`-f`) or several, whose statements per transaction are not printed.
fn pgbench_statements(lines: &[String]) -> Option<u64> {
    let value = |key: &str| {
        lines
            .iter()
            .find_map(|line| line.trim().strip_prefix(key).map(str::trim))
    };
    let per_transaction = match value("transaction type:")? {
        "<builtin: TPC-B (sort of)>" => 7,
        "<builtin: simple update>" => 5,
        "<builtin: select only>" => 1,
        _ => return None,
    };
    let processed = value("number of transactions actually processed:")?;
    // `N/M` when run by count (-t), `N` alone when run for a time (-T).
    let done = processed.split_once('/').map_or(processed, |(n, _)| n);
    done.parse::<u64>().ok().map(|n| n * per_transaction)
}

/// sysbench's `queries:                             800    (22309.14 per sec.)`: the statements
/// its SQL tests sent (executes of their prepared statements, or queries), not counting the
/// prepares themselves.
fn sysbench_queries(lines: &[String]) -> Option<u64> {
    lines.iter().find_map(|line| {
        let rest = line.trim().strip_prefix("queries:")?;
        let (n, rate) = rest.trim().split_once(char::is_whitespace)?;
        rate.trim()
            .ends_with(" per sec.)")
            .then(|| n.parse().ok())
            .flatten()
    })
}

/// mysqlslap's queries: `Number of clients running queries: C` times `Average number of
/// queries per client: Q` (each client's share of --number-of-queries), for each concurrency
/// it ran, times the `--iterations` of its command (the report is one iteration's).
fn mysqlslap_queries(lines: &[String], command: &str) -> Option<u64> {
    let value = |line: &String, key: &str| {
        line.trim()
            .strip_prefix(key)
            .and_then(|n| n.trim().parse::<u64>().ok())
    };
    let mut clients = None;
    let mut queries = None;
    for line in lines {
        if let Some(c) = value(line, "Number of clients running queries:") {
            clients = Some(c);
        } else if let Some(q) = value(line, "Average number of queries per client:") {
            *queries.get_or_insert(0) += clients.take()? * q;
        }
    }
    let words: Vec<&str> = command.split_whitespace().collect();
    let iterations = words.iter().enumerate().find_map(|(i, w)| {
        let n = w
            .strip_prefix("--iterations=")
            .or_else(|| (*w == "-i" || *w == "--iterations").then(|| words.get(i + 1).copied())?);
        n.and_then(|n| n.parse::<u64>().ok())
    });
    queries.map(|q| q * iterations.unwrap_or(1))
}

/// redis-benchmark's tests that send one command per request.
const REDIS_BENCHMARK_TESTS: &[&str] = &[
    "ping_inline",
    "ping_mbulk",
    "set",
    "get",
    "incr",
    "lpush",
    "rpush",
    "lpop",
    "rpop",
    "sadd",
    "hset",
    "spop",
    "zadd",
    "zpopmin",
    "mset",
    "xadd",
];

/// The commands a `redis-benchmark -t TESTS -n N` command line sends: N (100 000 unless
/// given) per test, `ping` being two. Its output cannot say: `-q` and `--csv` print rates only,
/// and without them each test's `N requests completed` is followed by more lines of latencies
/// than the output tail keeps. None without `-t` (the default tests include LRANGE's, which
/// send more than one command per request) or with a test not of one command, and when the
/// command line holds more than redis-benchmark.
pub fn redis_benchmark_commands(load: &ExternalLoad) -> Option<u64> {
    let mut words = load.command.split_whitespace();
    words
        .by_ref()
        .find(|w| w.rsplit('/').next() == Some("redis-benchmark"))?;
    let (mut requests, mut tests) = (100_000u64, None);
    while let Some(word) = words.next() {
        match word {
            "-n" => requests = words.next()?.parse().ok()?,
            "-t" => tests = Some(words.next()?.to_ascii_lowercase()),
            _ if word.starts_with(['|', ';', '&', '>', '<']) => return None,
            _ => {}
        }
    }
    let mut count = 0;
    for test in tests?.split(',').filter(|t| !t.is_empty()) {
        count += match test {
            "ping" => 2,
            _ if REDIS_BENCHMARK_TESTS.contains(&test) => 1,
            _ => return None,
        };
    }
    (count > 0).then_some(count * requests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::{ClientStats, RequestStats, RunRecord, TLS_HOOKED_NOTE};

    fn load(lines: &[&str]) -> ExternalLoad {
        ExternalLoad {
            output_tail: lines.iter().map(|l| l.to_string()).collect(),
            ..ExternalLoad::default()
        }
    }

    #[test]
    fn load_generators_reports_are_read() {
        let h2load = load(&[
            "finished in 1.02s, 2941.18 req/s, 3.12MB/s",
            "requests: 3000 total, 3000 started, 3000 done, 2990 succeeded, 10 failed, 0 errored, 0 timeout",
        ]);
        assert_eq!(external_count(&h2load), Some(2990));
        let wrk = load(&["  12345 requests in 10.00s, 1.20MB read"]);
        assert_eq!(external_count(&wrk), Some(12345));
        assert_eq!(external_count(&load(&["done"])), None);
    }

    /// memcslap 1.1.4's report of `--test=get --concurrency=2 --execute-number=100`: its
    /// initial load's sets and its threads' gets.
    #[test]
    fn memcslap_reports_are_read_as_commands() {
        let report = |test: &str| {
            load(&[
                "Time to generate        100 test keys:                0.000 seconds.",
                "Time to set             100 keys:                     0.190 seconds.",
                "Time to start             2 threads:                  0.000 seconds.",
                "--------------------------------------------------------------------",
                &format!("Time to {test:<12}200 keys by    2 threads:     0.203 seconds."),
                "--------------------------------------------------------------------",
                "Time total:                                           0.393 seconds.",
            ])
        };
        assert_eq!(external_count(&report("get")), Some(300));
        assert_eq!(external_count(&report("mget")), None);
    }

    /// pgbench's report (15.x, `-n`): transactions of a builtin script times its statements;
    /// a script of its own gives no count.
    #[test]
    fn pgbench_reports_are_read_as_statements() {
        let report = |kind: &str| {
            load(&[
                "pgbench (15.14 (Debian 15.14-0+deb12u1))",
                &format!("transaction type: {kind}"),
                "scaling factor: 1",
                "query mode: simple",
                "number of clients: 2",
                "number of transactions per client: 150",
                "number of transactions actually processed: 300/300",
                "number of failed transactions: 0 (0.000%)",
                "tps = 812.3 (without initial connection time)",
            ])
        };
        assert_eq!(
            external_count(&report("<builtin: TPC-B (sort of)>")),
            Some(2100)
        );
        assert_eq!(
            external_count(&report("<builtin: simple update>")),
            Some(1500)
        );
        assert_eq!(external_count(&report("<builtin: select only>")), Some(300));
        assert_eq!(external_count(&report("/tmp/pipeline.sql")), None);
        let timed = load(&[
            "transaction type: <builtin: select only>",
            "number of transactions actually processed: 4321",
        ]);
        assert_eq!(external_count(&timed), Some(4321));
    }

    /// sysbench's report (1.0.20): its queries; mysqlslap's: clients times queries per client,
    /// times the iterations its command asked for.
    #[test]
    fn sysbench_and_mysqlslap_reports_are_read_as_queries() {
        let sysbench = load(&[
            "    transactions:                        50     (1394.32 per sec.)",
            "    queries:                             800    (22309.14 per sec.)",
            "    ignored errors:                      0      (0.00 per sec.)",
        ]);
        assert_eq!(external_count(&sysbench), Some(800));
        let slap = |command: &str| ExternalLoad {
            command: command.into(),
            ..load(&[
                "Benchmark",
                "\tAverage number of seconds to run all queries: 0.012 seconds",
                "\tNumber of clients running queries: 2",
                "\tAverage number of queries per client: 150",
                "",
            ])
        };
        let base = "mysqlslap -h 127.0.0.1 --concurrency=2 --number-of-queries=300";
        assert_eq!(external_count(&slap(base)), Some(300));
        assert_eq!(
            external_count(&slap(&format!("{base} --iterations=4"))),
            Some(1200)
        );
        assert_eq!(external_count(&slap(&format!("{base} -i 3"))), Some(900));
    }

    /// `http2-unparsed` fires for what the parser could not do, and only then: streams counted
    /// and named from their frames raise nothing.
    #[test]
    fn http2_unparsed_names_what_was_not_parsed() {
        let parsed = RequestStats {
            requests: 3000,
            ..RequestStats::default()
        };
        assert_eq!(http2_unparsed(&parsed), None);
        let unnamed = RequestStats {
            http2_unnamed: 12,
            ..parsed.clone()
        };
        assert!(http2_unparsed(&unnamed)
            .unwrap()
            .starts_with("12 HTTP/2 requests are counted but not named"));
        let lost = RequestStats {
            http2_lost: 1,
            http2_connections: 2,
            ..parsed
        };
        let text = http2_unparsed(&lost).unwrap();
        assert!(
            text.starts_with("2 connections spoke HTTP/2 whose frames were not parsed"),
            "{text}"
        );
        assert!(
            text.contains("; 1 HTTP/2 connections' frames were lost"),
            "{text}"
        );
    }

    #[test]
    fn ciphertext_counts_say_whether_a_tls_library_was_hooked() {
        let p = Phase {
            name: "main".into(),
            client_model: None,
            client: ClientStats::default(),
            server: Default::default(),
            per_request: Default::default(),
            requests: Some(RequestStats {
                requests: 100,
                tls_ciphertext: 2,
                ..RequestStats::default()
            }),
            other_traffic: None,
            cpu_windows: None,
            missing: Default::default(),
            unit: Unit::Request,
            hops: vec![],
        };
        let text = |hooked: &[&str]| count_caveats(&p, None, hooked).remove(0).text;
        let hooked = text(&["libssl.so.3 (/usr/lib/x86_64-linux-gnu/libssl.so.3)"]);
        assert!(
            hooked.starts_with(
                "2 of the 100 requests counted on the server side are TLS connections whose \
                 plaintext reqcost could not read (the hooks on libssl.so.3 \
                 (/usr/lib/x86_64-linux-gnu/libssl.so.3) saw no plaintext on them"
            ),
            "{hooked}"
        );
        assert!(!hooked.contains("no hook"), "{hooked}");
        assert!(text(&[]).contains("(no hook for the server's TLS library;"));
    }

    #[test]
    fn the_hooked_tls_libraries_are_read_from_the_notes() {
        let rec = RunRecord {
            notes: vec![
                "loopback".into(),
                format!("{TLS_HOOKED_NOTE}libssl.so.3 (/usr/lib/libssl.so.3): requests counted"),
                "TLS library not hooked: librustls.so: ...".into(),
            ],
            ..RunRecord::from_json(include_str!("../tests/fixtures/clean.json")).unwrap()
        };
        assert_eq!(rec.tls_hooked(), ["libssl.so.3 (/usr/lib/libssl.so.3)"]);
    }

    #[test]
    fn quic_counts_say_whose_they_are() {
        let quic = Workload {
            url: "quic://127.0.0.1:4433/".into(),
            ..Workload::default()
        };
        let mut p = Phase {
            name: "main".into(),
            client_model: None,
            client: ClientStats::default(),
            server: Default::default(),
            per_request: Default::default(),
            requests: None,
            other_traffic: None,
            cpu_windows: None,
            missing: Default::default(),
            unit: Unit::Request,
            hops: vec![],
        };
        p.client.requests = 12;
        p.client.ok = 12;
        for i in 0..10 {
            p.client.quic_classes.insert(format!("GET /{i}"), 1);
        }
        p.client.quic_classes.insert("GET /a".into(), 2);
        let caveats = count_caveats(&p, Some(&quic), &[]);
        assert_eq!(caveats.len(), 1);
        assert_eq!(caveats[0].id, "quic-client-count");
        assert!(
            caveats[0]
                .text
                .contains("12 requests completed by reqcost's QUIC client (GET /a 2, GET /0 1, GET /1 1, GET /2 1, GET /3 1, GET /4 1, GET /5 1, GET /6 1, 3 more classes)"),
            "{}",
            caveats[0].text
        );
        assert!(caveats[0]
            .text
            .ends_with("divide by the 12 requests that reqcost's load generator completed"));

        p.requests = Some(RequestStats {
            http3_requests: 11,
            ..RequestStats::default()
        });
        let caveats = count_caveats(&p, Some(&quic), &[]);
        assert_eq!(caveats[0].id, "quic-http3-count");
        assert!(caveats[0]
            .text
            .contains(": 11 HTTP/3 requests, 12 requests completed by"));
        assert!(caveats[0]
            .text
            .ends_with("divide by the 11 requests counted on the server side"));

        p.requests = None;
        p.client = Default::default();
        p.unit = Unit::MiB;
        let caveats = count_caveats(&p, Some(&quic), &[]);
        assert_eq!(caveats[0].id, "quic-not-counted");
        assert!(caveats[0]
            .text
            .ends_with("figures are per MiB (sent by the server) (--per MiB or --per datagram)"));
    }

    /// redis-benchmark 7.0.15's output as it printed it (-P 16 -n 1600), in each of its
    /// formats: no count in what the tail keeps, the count from the command line.
    #[test]
    fn redis_benchmark_counts_are_read_from_its_command_line() {
        let fixtures = [
            (
                "",
                include_str!("../tests/fixtures/redis-benchmark/full.txt"),
            ),
            (
                " -q",
                include_str!("../tests/fixtures/redis-benchmark/q.txt"),
            ),
            (
                " --csv",
                include_str!("../tests/fixtures/redis-benchmark/csv.txt"),
            ),
        ];
        for (flags, output) in fixtures {
            let lines: Vec<&str> = output.lines().collect();
            let tail = &lines[lines.len().saturating_sub(20)..];
            let bench = |command: &str| ExternalLoad {
                command: command.into(),
                ..load(tail)
            };
            let command = format!(
                "redis-benchmark -h 127.0.0.1 -p 6379 -t set,get,lpush -P 16 -n 1600 -c 10{flags}"
            );
            assert_eq!(external_count(&bench(&command)), None, "{flags}");
            assert_eq!(redis_benchmark_commands(&bench(&command)), Some(4800));
        }
        let bench = |command: &str| ExternalLoad {
            command: command.into(),
            ..ExternalLoad::default()
        };
        let ping = "/usr/bin/redis-benchmark -t PING,set -q";
        assert_eq!(redis_benchmark_commands(&bench(ping)), Some(300_000));
        for unknown in [
            "redis-benchmark -n 1600 -q",
            "redis-benchmark -t set,lrange -n 1600",
            "redis-benchmark -t set -n 1600 | tee out",
            "pgbench -t 100",
        ] {
            assert_eq!(redis_benchmark_commands(&bench(unknown)), None, "{unknown}");
        }
    }

    /// A count far from what redis-benchmark's command line asks for says so, naming that count.
    #[test]
    fn a_count_far_from_redis_benchmark_s_says_so() {
        let workload = Workload {
            url: "tcp://127.0.0.1:6379/".into(),
            load: Some(ExternalLoad {
                command: "redis-benchmark -p 6379 -t set,get,lpush -P 16 -n 1600 -q".into(),
                ..ExternalLoad::default()
            }),
            ..Workload::default()
        };
        let phase = |requests| Phase {
            name: "main".into(),
            client_model: None,
            client: ClientStats::default(),
            server: Default::default(),
            per_request: Default::default(),
            requests: Some(RequestStats {
                requests,
                ..RequestStats::default()
            }),
            other_traffic: None,
            cpu_windows: None,
            missing: Default::default(),
            unit: Unit::Request,
            hops: vec![],
        };
        let caveats = count_caveats(&phase(300), Some(&workload), &[]);
        assert_eq!(caveats.len(), 1);
        assert!(
            caveats[0].text.starts_with(
                "the server side counted 300 requests, the --load command asks for 4800"
            ),
            "{}",
            caveats[0].text
        );
        assert!(count_caveats(&phase(4802), Some(&workload), &[]).is_empty());
    }

    #[test]
    fn counts_are_far_apart_beyond_a_share_and_a_floor() {
        assert!(far_apart(401, 200));
        assert!(far_apart(784, 3000));
        assert!(!far_apart(3004, 3000));
        assert!(!far_apart(9, 1), "a few requests apart");
    }

    #[test]
    fn counts_more_than_twice_apart_suggest_counting_connections() {
        assert!(other_unit_hint(401, 200).contains("--per connection"));
        assert!(other_unit_hint(1000, 3001).contains("--per connection"));
        assert_eq!(other_unit_hint(400, 200), "");
        assert_eq!(other_unit_hint(2400, 3000), "");
    }
}
