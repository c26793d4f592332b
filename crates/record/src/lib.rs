//! The run record: everything one measurement produced, as versioned JSON.
//!
//! Collection writes a record; `report`, `compare` and `check` read records alone, so a run taken
//! on one machine can be analysed on another. The format is documented in `docs/record.md`; bump
//! [`FORMAT_VERSION`] on any change that an older reader would misread.
//!
//! A figure that could not be collected is `None` and has an entry in its phase's `missing` map
//! saying why: absent with a reason, never zero.

mod kernel;
mod profile;
mod requests;
mod windows;

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

pub use kernel::*;
pub use profile::*;
pub use requests::*;
pub use windows::*;

/// Identifies the file format, so that other JSON is rejected with a clear message.
pub const FORMAT: &str = "reqcost-run";
/// Version of the record layout this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub format: String,
    pub version: u32,
    /// Unique run id, also the default file name under `reqcost-runs/`.
    pub id: String,
    pub reqcost_version: String,
    /// Start of the measurement, seconds since the Unix epoch.
    pub started_unix_s: f64,
    pub target: Target,
    pub workload: Workload,
    pub machine: Machine,
    pub pinning: Pinning,
    /// Measured phases in the order they ran. The first phase named `main` carries the headline
    /// figures; others (slow clients, per-class replays) sit beside it.
    pub phases: Vec<Phase>,
    /// Sampled call chains over all measured phases, when sampling ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// Why the run ended early or failed, if it did. A record with an outcome other than
    /// `completed` is partial: it holds whatever was measured before the failure.
    pub outcome: Outcome,
    /// Caveats the reader must know to interpret the figures (loopback, pinning off, ...).
    #[serde(default)]
    pub notes: Vec<String>,
    /// The local servers the target's requests were followed to, hop 1 onwards (the target
    /// is hop 0): a proxy's application server, its database (docs/stack.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<Hop>,
}

/// A local server the front server's requests were followed to: the process tree at the
/// other end of connections a hop in front opened (loopback TCP or a Unix socket).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Hop {
    /// 1.. in the order found; the target is hop 0 and has no entry.
    pub hop: u8,
    /// Root pid of its process tree, and the root's name (comm).
    pub pid: u32,
    pub comm: String,
    /// Where the hop in front reached it: `tcp 127.0.0.1:5432`, `unix /tmp/app.sock`.
    pub via: String,
    /// The hop whose calls it answers (0: the target).
    pub caller: u8,
}

/// One upstream hop's figures in a phase, measured as the target's are: its tree's CPU, and
/// its requests by its own classes (a database's statements), each linked request counted
/// also in the front class it served.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct HopPhase {
    pub hop: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuTimes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestStats>,
    /// What the probes count of the hop's tree for its findings: its syscalls (no errnos), its
    /// processes and threads, its user page faults; the rest of [`KernelStats`] is the
    /// target's only and left empty here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelStats>,
}

/// How a note of [`RunRecord::notes`] that names a TLS library whose plaintext the probes read
/// begins; the library follows, then `:`.
pub const TLS_HOOKED_NOTE: &str = "TLS plaintext read with uprobes on ";

impl RunRecord {
    /// The TLS libraries whose plaintext the probes read, as the notes name them.
    pub fn tls_hooked(&self) -> Vec<&str> {
        self.notes
            .iter()
            .filter_map(|n| n.strip_prefix(TLS_HOOKED_NOTE)?.split(':').next())
            .collect()
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Target {
    /// `launch`: reqcost started the command; `attach`: it measured an already running process.
    pub mode: TargetMode,
    /// The server command line, when launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Root pid of the measured process tree.
    pub pid: u32,
    /// Name of the root process (comm).
    pub comm: String,
    /// How the server ended, when reqcost launched and stopped it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum TargetMode {
    Launch,
    Attach,
}

/// The workload protocol of an attach run: the server's own clients, reqcost sent nothing.
pub const LIVE_PROTOCOL: &str = "live";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Workload {
    /// The URL driven; `live:PORT` (or `live:pid PID`) when attached to live traffic.
    pub url: String,
    /// Protocol driven: gopher, gemini, http, https, tcp; [`LIVE_PROTOCOL`] when attached.
    pub protocol: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests_file: Option<String>,
    /// Connections kept busy at once (closed loop).
    pub concurrency: u32,
    /// Requests asked for, when bounded by count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Length asked for, when bounded by time; when attached, the window's actual length.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Open-loop rate in requests per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_s: Option<f64>,
    /// Requests sent before measuring, excluded from every figure.
    #[serde(default)]
    pub warmup_requests: u64,
    /// Other workload settings as given on the command line (client speed, limits, classes).
    #[serde(default)]
    pub options: BTreeMap<String, String>,
    /// The client program that drove the server (`--load`), when reqcost sent nothing itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<ExternalLoad>,
    /// What the access log replayed said of its requests (those `--sample` kept), for
    /// comparing the replay with production.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LoggedTraffic>,
}

/// An access log's figures over the requests a run replays from it; each absent when the log
/// does not have it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct LoggedTraffic {
    pub requests: u64,
    /// Status code → requests, as [`ClientStats::statuses`].
    #[serde(default)]
    pub statuses: BTreeMap<String, u64>,
    /// Mean bytes the server logged as sent per request.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_mean: Option<f64>,
    /// Mean time the server logged per request, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_time_mean_s: Option<f64>,
    /// From the first logged time to the last, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span_s: Option<f64>,
    /// `--class` name → mean logged time of its requests, in seconds.
    #[serde(default)]
    pub class_request_time_mean_s: BTreeMap<String, f64>,
}

/// The protocol of a run driven by an external client program: reqcost does not know what it
/// speaks, so units of work are counted on the server side.
pub const EXTERNAL_PROTOCOL: &str = "external";

/// An external client program (`--load CMD`) and how it ended.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ExternalLoad {
    /// The command as run through `sh -c` (`{c}` replaced by the concurrency).
    pub command: String,
    /// How it ended (`exit status 0`, `killed by signal 15`), when it ran to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    /// Whether it exited with status 0.
    #[serde(default)]
    pub success: bool,
    /// The last lines it wrote to stdout and stderr.
    #[serde(default)]
    pub output_tail: Vec<String>,
    /// CPU of the command's whole process tree over its life (its own cgroup, exited processes
    /// included): the client's cost beside the server's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuTimes>,
    /// The command's tree's calls by syscall name over its life (eBPF, from its first exec);
    /// absent without the probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub syscalls: Option<BTreeMap<String, u64>>,
    /// The command's tree's samples from the sampler's system-wide events, kernel frames only
    /// (no user stacks): where its system time went. Absent with --no-sample.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Machine {
    pub hostname: String,
    pub kernel: String,
    pub arch: String,
    pub cpus: u32,
    pub cpu_model: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Pinning {
    pub enabled: bool,
    /// CPUs the server tree was allowed to run on.
    #[serde(default)]
    pub server_cpus: Vec<u32>,
    /// CPUs the load generator ran on.
    #[serde(default)]
    pub client_cpus: Vec<u32>,
    /// Why pinning is off or partial, when it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Outcome {
    Completed,
    /// The server exited or was killed while the workload ran.
    ServerDied {
        detail: String,
    },
    /// The user interrupted the run.
    Interrupted,
    /// The workload could not continue (e.g. every connection refused).
    Failed {
        detail: String,
    },
}

/// One stretch of load with its client-side and server-side figures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Phase {
    /// `main`, `slow-clients`, `class:NAME`, ...
    pub name: String,
    /// Client speed model of this phase, e.g. `unlimited` or `64KiB/s per connection`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_model: Option<String>,
    pub client: ClientStats,
    pub server: ServerTotals,
    /// Server figures divided by the phase's requests ([`Phase::units`]).
    pub per_request: PerRequest,
    /// The phase's requests as the server served them (per-request accounting), when the
    /// probes ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<RequestStats>,
    /// Present when reqcost loaded a server it did not launch (`run --pid`): the requests the
    /// server's other clients made in the phase. The per-request figures then divide by every
    /// request the server served, reqcost's and theirs ([`Phase::units`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_traffic: Option<OtherTraffic>,
    /// How the CPU figures were obtained when the probes ran (docs/record.md, "How CPU was
    /// measured"): which windows had them, and what came out of each kind; absent without
    /// probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_windows: Option<CpuWindows>,
    /// Field name (as in this phase) → why it could not be collected.
    #[serde(default)]
    pub missing: BTreeMap<String, String>,
    /// What `per_request` and every per-unit figure divide by: `request` as collected; a
    /// report may show the phase per connection, MiB or datagram instead ([`Phase::in_units`]).
    #[serde(default, skip_serializing_if = "Unit::is_request")]
    pub unit: Unit,
    /// The upstream hops' own figures ([`RunRecord::hops`]); the target's are `server` and
    /// `requests`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<HopPhase>,
}

/// A unit of work that per-unit figures divide by.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub enum Unit {
    /// Requests the load generator completed, or the server served (per-request accounting).
    #[default]
    #[serde(rename = "request")]
    Request,
    /// Connections the server closed (per-request accounting), else accepted (eBPF), else
    /// those the load generator opened.
    #[serde(rename = "connection")]
    Connection,
    /// MiB the server sent on its sockets, TCP and UDP (eBPF), else what the load generator
    /// received, else what the tree's TCP sockets had acknowledged (sock_diag, probes off).
    MiB,
    /// UDP datagrams the server sent and received (eBPF).
    #[serde(rename = "datagram")]
    Datagram,
}

impl Unit {
    pub const ALL: [Unit; 4] = [Unit::Request, Unit::Connection, Unit::MiB, Unit::Datagram];

    /// `request`, `connection`, `MiB`, `datagram`: as `--per` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Unit::Request => "request",
            Unit::Connection => "connection",
            Unit::MiB => "MiB",
            Unit::Datagram => "datagram",
        }
    }

    /// The name and what is counted, as figures are labelled: `MiB (sent by the server)`.
    pub fn label(self) -> &'static str {
        match self {
            Unit::Request => "request",
            Unit::Connection => "connection",
            Unit::MiB => "MiB (sent by the server)",
            Unit::Datagram => "datagram (UDP, sent or received by the server)",
        }
    }

    /// `requests`, `connections`, `MiB`, `datagrams`: as counts are said (`over 5 MiB`).
    pub fn plural(self) -> &'static str {
        match self {
            Unit::Request => "requests",
            Unit::Connection => "connections",
            Unit::MiB => "MiB",
            Unit::Datagram => "datagrams",
        }
    }

    /// `req/s`, `connections/s`, `MiB/s`, `datagrams/s`: as rates are said.
    pub fn rate(self) -> &'static str {
        match self {
            Unit::Request => "req/s",
            Unit::Connection => "connections/s",
            Unit::MiB => "MiB/s",
            Unit::Datagram => "datagrams/s",
        }
    }

    /// A unit by name, in any case.
    pub fn parse(s: &str) -> Option<Unit> {
        Unit::ALL
            .into_iter()
            .find(|u| u.name().eq_ignore_ascii_case(s))
    }

    pub fn is_request(&self) -> bool {
        *self == Unit::Request
    }
}

/// What a running server served to others than reqcost in a phase reqcost loaded: the server
/// side's counts beyond the load generator's (zero when it had no other client).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct OtherTraffic {
    /// Requests served (`requests.requests`) beyond the load generator's successful ones.
    pub requests: u64,
    /// Socket bytes the server read and wrote beyond what the load generator sent and
    /// received; absent without the probes' byte counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_in: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_out: Option<u64>,
}

/// What the load generator saw.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ClientStats {
    /// Requests attempted (successful + failed).
    pub requests: u64,
    pub ok: u64,
    /// Error kind (refused, reset, timeout, tls, protocol, too-large, ...) → count.
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    /// Input lines not replayed, by reason (non-GET method, malformed line with --skip-bad).
    #[serde(default)]
    pub skipped: BTreeMap<String, u64>,
    pub connections: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub elapsed_s: f64,
    /// Successful requests per second of elapsed time.
    pub throughput_rps: f64,
    pub latency: LatencySummary,
    /// HDR histogram of latencies, as (upper bound µs, count) for every non-empty bucket.
    #[serde(default)]
    pub latency_histogram: Vec<HistogramBucket>,
    /// Response status (HTTP code, Gemini two-digit status) → count; empty for gopher and tcp.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub statuses: BTreeMap<String, u64>,
    /// TLS connections whose handshake resumed a session; `None` for plain-text protocols.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_resumed: Option<u64>,
    /// Load-generator threads that sent the phase's requests; absent when reqcost sent none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_threads: Option<u32>,
    /// The CPU of those threads over the phase: reqcost's own load generator, the client's
    /// cost beside the server's; absent when reqcost sent nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_cpu: Option<CpuTimes>,
    /// Requests reqcost's QUIC client completed, by class (`GET /path`): the requests inside
    /// QUIC are not visible on the server's sockets, so these are the only classes of a QUIC
    /// run.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub quic_classes: BTreeMap<String, u64>,
}

/// Request bytes as printable text: bytes that are not UTF-8 as `\xNN`, control characters as
/// `\u{..}`, so that a terminal shows what was read and never interprets it.
pub fn printable(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() {
                out.extend(c.escape_unicode());
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

impl ClientStats {
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Default)]
pub struct LatencySummary {
    pub min_us: f64,
    pub mean_us: f64,
    pub p50_us: f64,
    pub p90_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    pub max_us: f64,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct HistogramBucket {
    pub le_us: u64,
    pub count: u64,
}

/// Server-side totals for one phase, each `None` when it could not be collected.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ServerTotals {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuTimes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub io: Option<ProcIo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_switches: Option<ContextSwitches>,
    /// Kernel-side accounting from eBPF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelStats>,
    /// Bytes on the tree's TCP sockets as the kernel keeps them per socket (sock_diag), when
    /// the probes were off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_bytes: Option<TcpBytes>,
    /// What the eBPF probes themselves ran, on the server's events and everyone else's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe_cost: Option<ProbeCost>,
}

/// Bytes the tree's TCP sockets moved, from the kernel's per-socket counters.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct TcpBytes {
    /// Bytes sent and acknowledged by the peer (`tcpi_bytes_acked`).
    pub sent: u64,
    /// Bytes received (`tcpi_bytes_received`).
    pub received: u64,
    /// The TCP connections counted.
    pub sockets: u64,
    /// How they were read, and where they undercount.
    pub source: String,
}

/// CPU time of the whole server tree, exited tasks included.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(from = "CpuTimesWire")]
pub struct CpuTimes {
    pub total_ns: u64,
    pub user_ns: u64,
    pub system_ns: u64,
    /// Where the figures come from, e.g. `cgroup-v1 cpuacct (scheduler ns)`.
    pub source: String,
    /// What the user/system split is made of, which decides whether it can be trusted.
    pub split: CpuSplit,
}

/// What a CPU reading's user/system split is made of.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "kebab-case")]
pub enum CpuSplit {
    /// The kernel's scheduler ticks, each charged whole to the mode it interrupted: the total
    /// is precise, the split only as good as the ticks are many.
    Ticks,
    /// As the source reported it (getrusage, a fixture), taken as it is.
    #[default]
    Reported,
}

/// [`CpuTimes`] as records store it: records written before `split` existed said it only in
/// `source`'s text, which every tick-based source mentions.
#[derive(Deserialize)]
struct CpuTimesWire {
    total_ns: u64,
    user_ns: u64,
    system_ns: u64,
    source: String,
    #[serde(default)]
    split: Option<CpuSplit>,
}

impl From<CpuTimesWire> for CpuTimes {
    fn from(w: CpuTimesWire) -> CpuTimes {
        let split = w.split.unwrap_or(if w.source.contains("tick") {
            CpuSplit::Ticks
        } else {
            CpuSplit::Reported
        });
        CpuTimes {
            total_ns: w.total_ns,
            user_ns: w.user_ns,
            system_ns: w.system_ns,
            source: w.source,
            split,
        }
    }
}

/// `/proc/PID/io` deltas summed over the tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ProcIo {
    /// read(2)-family calls; socket recv*/recvfrom are not counted by the kernel here.
    pub syscr: u64,
    /// write(2)-family calls; socket send*/sendto are not counted by the kernel here.
    pub syscw: u64,
    pub rchar: u64,
    pub wchar: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ContextSwitches {
    pub voluntary: u64,
    pub involuntary: u64,
}

/// Server figures per successful request. Fractions are kept: 0.5 writes per request is real.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PerRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_total_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_user_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_system_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_syscalls: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_syscalls: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_switches: Option<f64>,
    /// Syscall name → calls per request, from eBPF.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub syscalls: BTreeMap<String, f64>,
}

impl PerRequest {
    /// Divides a phase's totals by its units of work; empty when there were none.
    pub fn from_totals(totals: &ServerTotals, units: f64) -> PerRequest {
        if units <= 0.0 {
            return PerRequest::default();
        }
        let per = |v: u64| v as f64 / units;
        let per_us = |ns: u64| ns as f64 / 1000.0 / units;
        PerRequest {
            cpu_total_us: totals.cpu.as_ref().map(|c| per_us(c.total_ns)),
            cpu_user_us: totals.cpu.as_ref().map(|c| per_us(c.user_ns)),
            cpu_system_us: totals.cpu.as_ref().map(|c| per_us(c.system_ns)),
            read_syscalls: totals.io.as_ref().map(|io| per(io.syscr)),
            write_syscalls: totals.io.as_ref().map(|io| per(io.syscw)),
            context_switches: totals
                .context_switches
                .as_ref()
                .map(|c| per(c.voluntary + c.involuntary)),
            syscalls: totals
                .kernel
                .as_ref()
                .map(|k| {
                    k.syscalls
                        .iter()
                        .map(|s| (s.name.clone(), per(s.count)))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

impl Phase {
    /// The units of work its per-unit figures divide by: those of its `unit`, 0 when they were
    /// not counted. Requests are the HTTP/3 requests the server's libnghttp3 answered when it
    /// answered any (QUIC hides them from the socket probes), else the load generator's
    /// successful ones, or, in a phase where reqcost sent nothing (attach, --load) or loaded a
    /// server that has other clients (`run --pid`), the requests the server served as
    /// per-request accounting counted them.
    pub fn units(&self) -> f64 {
        self.units_of(self.unit).unwrap_or(0.0)
    }

    /// How many `unit`s of work the phase did, None when they could not be counted.
    pub fn units_of(&self, unit: Unit) -> Option<f64> {
        let kernel = self.server.kernel.as_ref();
        match unit {
            Unit::Request => Some(match &self.requests {
                Some(served) if served.http3_requests > 0 => served.http3_requests,
                Some(served) if self.client.requests == 0 || self.other_traffic.is_some() => {
                    served.requests
                }
                _ => self.client.ok,
            } as f64),
            Unit::Connection => self
                .requests
                .as_ref()
                .map(|r| r.connections)
                .or(kernel.map(|k| k.sockets.accepted))
                .or((self.client.requests > 0).then_some(self.client.connections))
                .map(|n| n as f64),
            Unit::MiB => kernel
                .map(KernelStats::socket_bytes_sent)
                .or((self.client.requests > 0).then_some(self.client.bytes_received))
                .or(self.server.tcp_bytes.as_ref().map(|b| b.sent))
                .map(|b| b as f64 / (1u64 << 20) as f64),
            Unit::Datagram => {
                kernel.map(|k| (k.udp.datagrams_sent + k.udp.datagrams_received) as f64)
            }
        }
    }

    /// The unit the phase reads best in: requests when it had any (reqcost's own load, or
    /// requests the server served), else MiB sent for a server that moved data without
    /// requests (UDP), else requests.
    pub fn default_unit(&self) -> Unit {
        let has = |unit| self.units_of(unit).is_some_and(|n| n > 0.0);
        if has(Unit::Request) || !has(Unit::MiB) {
            Unit::Request
        } else {
            Unit::MiB
        }
    }

    /// The phase with its per-unit figures divided by `unit`.
    pub fn in_units(&mut self, unit: Unit) {
        self.unit = unit;
        self.per_request = PerRequest::from_totals(&self.server, self.units());
    }
}

impl RunRecord {
    /// Every phase per `unit`, or per its own default unit when None.
    pub fn in_units(&mut self, unit: Option<Unit>) {
        for p in &mut self.phases {
            let unit = unit.unwrap_or_else(|| p.default_unit());
            p.in_units(unit);
        }
    }

    /// Requests the call-chain sampler ran through: the warm-up's, every phase's and every
    /// unprobed pass's (its warm-up included). The profile's samples divide by these; the
    /// phases' alone would charge the pass's samples to fewer requests.
    pub fn sampled_requests(&self) -> u64 {
        let phases: f64 = self
            .phases
            .iter()
            .filter_map(|p| p.units_of(Unit::Request))
            .sum();
        let passes: u64 = self
            .phases
            .iter()
            .filter_map(|p| p.cpu_windows.as_ref())
            .map(|w| w.pass_requests)
            .sum();
        self.workload.warmup_requests + phases as u64 + passes
    }

    /// The headline phase: the one named `main`, or the first.
    pub fn main_phase(&self) -> Option<&Phase> {
        self.phases
            .iter()
            .find(|p| p.name == "main")
            .or(self.phases.first())
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a run record always serializes")
    }

    pub fn from_json(text: &str) -> Result<RunRecord, RecordError> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(RecordError::Json)?;
        match value.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            _ => return Err(RecordError::NotARecord),
        }
        match value.get("version").and_then(|v| v.as_u64()) {
            Some(v) if v == u64::from(FORMAT_VERSION) => {}
            Some(v) => return Err(RecordError::Version(v)),
            None => return Err(RecordError::NoVersion),
        }
        serde_json::from_value(value).map_err(RecordError::Json)
    }

    pub fn load(path: &Path) -> Result<RunRecord, RecordError> {
        let text = std::fs::read_to_string(path).map_err(RecordError::Io)?;
        RunRecord::from_json(&text)
    }

    /// Writes the record atomically (temporary file, then rename), so a crash never leaves half
    /// a record behind.
    pub fn save(&self, path: &Path) -> Result<(), RecordError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(RecordError::Io)?;
        }
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, self.to_json() + "\n").map_err(RecordError::Io)?;
        std::fs::rename(&tmp, path).map_err(RecordError::Io)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("{0}")]
    Io(std::io::Error),
    #[error("not valid JSON: {0}")]
    Json(serde_json::Error),
    #[error("not a reqcost run record (no \"format\": \"{FORMAT}\" field)")]
    NotARecord,
    #[error("run record without a \"version\" field (a whole number; this reqcost reads version {FORMAT_VERSION}): was it written by reqcost?")]
    NoVersion,
    #[error("record format version {0} is not supported by this reqcost (reads version {FORMAT_VERSION})")]
    Version(u64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cpu_split_is_stored_and_old_records_read_it_from_their_source() {
        let cpu = |json: &str| serde_json::from_str::<CpuTimes>(json).unwrap().split;
        let old = r#"{"total_ns": 1, "user_ns": 1, "system_ns": 0, "source": "#;
        assert_eq!(
            cpu(&format!(r#"{old}"cgroup cpuacct (split by ticks)"}}"#)),
            CpuSplit::Ticks
        );
        assert_eq!(cpu(&format!(r#"{old}"getrusage"}}"#)), CpuSplit::Reported);
        let ticks = CpuTimes {
            split: CpuSplit::Ticks,
            ..CpuTimes::default()
        };
        let text = serde_json::to_string(&ticks).unwrap();
        assert!(text.ends_with(r#""split":"ticks"}"#), "{text}");
        assert_eq!(serde_json::from_str::<CpuTimes>(&text).unwrap(), ticks);
    }

    /// A phase of a UDP server driven by an external client: no requests, 2 MiB sent in 2000
    /// datagrams, 1000 received, 4 ms of CPU.
    /// A tree that held 3 ms from before the phase: its requests' 10 ms (attributed +
    /// unattributed) stand for 7 ms of the phase's CPU, so scaled to a CPU of 14 ms measured
    /// apart they read 20 ms, of which 6 ms held before: the cpu-total invariant's sum, less
    /// what was held, is the CPU. Scaled to attributed + unattributed it was 14 - 4.2 ms.
    #[test]
    fn scaling_to_a_cpu_keeps_what_was_held_from_before_the_phase() {
        let mut p = udp_phase();
        p.server.cpu = Some(CpuTimes {
            total_ns: 14_000_000,
            ..Default::default()
        });
        p.requests = Some(RequestStats {
            requests: 10,
            attributed_cpu_ns: 9_000_000,
            unattributed_cpu_ns: 1_000_000,
            held_before_cpu_ns: 3_000_000,
            ..Default::default()
        });
        p.scale_requests_to_cpu(1.0);
        let r = p.requests.unwrap();
        assert_eq!(
            (
                r.attributed_cpu_ns,
                r.unattributed_cpu_ns,
                r.held_before_cpu_ns
            ),
            (18_000_000, 2_000_000, 6_000_000)
        );
    }

    fn udp_phase() -> Phase {
        let kernel = KernelStats {
            io: vec![IoStat {
                syscall: "sendmsg".into(),
                direction: IoDirection::Write,
                fd_kind: FdKind::Udp,
                calls: 2000,
                bytes: 2 << 20,
                sizes: vec![],
            }],
            udp: UdpStats {
                datagrams_sent: 2000,
                datagrams_received: 1000,
                bytes_sent: 2 << 20,
                bytes_received: 50_000,
            },
            ..Default::default()
        };
        Phase {
            name: "main".into(),
            client_model: None,
            client: ClientStats::default(),
            server: ServerTotals {
                cpu: Some(CpuTimes {
                    total_ns: 4_000_000,
                    ..Default::default()
                }),
                kernel: Some(kernel),
                ..Default::default()
            },
            per_request: PerRequest::default(),
            requests: None,
            other_traffic: None,
            cpu_windows: None,
            missing: BTreeMap::new(),
            unit: Unit::Request,
            hops: vec![],
        }
    }

    #[test]
    fn units_of_work_are_counted_on_the_server_side() {
        let mut p = udp_phase();
        assert_eq!(p.units(), 0.0, "no requests");
        assert_eq!(p.units_of(Unit::MiB), Some(2.0));
        assert_eq!(p.units_of(Unit::Datagram), Some(3000.0));
        assert_eq!(p.units_of(Unit::Connection), Some(0.0));
        assert_eq!(p.default_unit(), Unit::MiB);
        p.in_units(Unit::MiB);
        assert_eq!(p.per_request.cpu_total_us, Some(2000.0));
        assert_eq!(p.per_request.syscalls.len(), 0);
        p.in_units(Unit::Datagram);
        assert_eq!(p.units(), 3000.0);
        let json = serde_json::to_string(&p).unwrap();
        assert!(json.contains(r#""unit":"datagram""#), "{json}");
        assert_eq!(Unit::parse("mib"), Some(Unit::MiB));
        assert_eq!(
            Unit::parse("MiB").unwrap().label(),
            "MiB (sent by the server)"
        );
    }

    fn refusal(text: &str) -> String {
        RunRecord::from_json(text).unwrap_err().to_string()
    }

    #[test]
    fn malformed_records_are_named_by_what_they_lack() {
        assert!(refusal("{").starts_with("not valid JSON"));
        assert!(refusal(r#"{"version": 1}"#).contains("no \"format\""));
        assert!(refusal(r#"{"format": "other", "version": 1}"#).contains("no \"format\""));
        let no_version = refusal(&format!(r#"{{"format": "{FORMAT}"}}"#));
        assert!(no_version.contains("without a \"version\""), "{no_version}");
        let text_version = refusal(&format!(r#"{{"format": "{FORMAT}", "version": "1"}}"#));
        assert!(
            text_version.contains("without a \"version\""),
            "{text_version}"
        );
        let future = refusal(&format!(r#"{{"format": "{FORMAT}", "version": 999}}"#));
        assert!(future.contains("version 999 is not supported"), "{future}");
    }
}
