//! The command line as clap parses it, and its conversion into plain options
//! (`WorkloadOptions`, `MeasureOptions`, the `Load`, the exporters), done once, before anything
//! runs: no module below the commands sees a clap type.
//!
//! `--url` and `-c` are not in the shared workload group: `run` and `sweep` need a URL where
//! `compare` wants one only with `--a/--b`, and `sweep` takes a list of connection counts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::builder::{PossibleValuesParser, TypedValueParser};
use clap::{Args, Parser, Subcommand};
use reqcost_analysis::tagged::{self, TagFilter};
use reqcost_measure::{ExternalLoad, Load, MeasureOptions, ProbeSchedule, Upstreams};
use reqcost_profile::{SampleOptions, DEFAULT_FREQ_HZ};
use reqcost_record::Unit;
use reqcost_report::export::{ExportManager, Format, PyroscopeUrl, Selection};
use reqcost_workload::{units, Method, Sample, WorkloadOptions};

use crate::Failure;

#[derive(Parser)]
#[command(
    name = "reqcost",
    version,
    about = "What does each request cost your server, and why?",
    long_about = "What does each request cost your server, and why?\n\n\
        reqcost launches (or attaches to) a network server, drives it with a workload, measures \
        the whole server process tree (CPU in scheduler nanoseconds, syscalls, I/O) and prints \
        the cost per request. Every run is saved as a JSON run record that `report` can read \
        back later.",
    after_help = "Examples:\n  \
        reqcost demo\n  \
        reqcost run --url gopher://127.0.0.1:7070/ --requests selectors.txt -n 500 -c 4 -- ./myserver --port 7070\n  \
        reqcost run --url gopher://127.0.0.1:7070/ --pid 1234\n  \
        reqcost attach --port 7070 --duration 60s\n  \
        reqcost report reqcost-runs/<id>.json"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Launch (or attach to) a server, drive it with a workload, and measure each request's cost
    Run(RunArgs),
    /// Watch a running server's real traffic (sending it nothing) and measure each request's cost
    Attach(AttachArgs),
    /// Print the summary of a saved run record
    Report(ReportArgs),
    /// A/B: two server configurations (interleaved repetitions) or two run records
    Compare(CompareArgs),
    /// The same workload at several concurrency levels: does cost per request grow?
    Sweep(SweepArgs),
    /// CI gate: fail when a run costs more per request than a baseline allows
    Check(CheckArgs),
    /// Build the testbed servers, measure them, and show how they differ
    Demo(DemoArgs),
}

const URL_HELP: &str = "Server to drive: SCHEME://HOST:PORT/PATH with scheme gopher, gemini, \
    http, https, tcp or quic (gopher paths are /TYPE/SELECTOR as in RFC 4266; tcp sends the path \
    without its / as a line; quic speaks hq-interop or HTTP/3, whichever the server accepts, \
    over one reused QUIC connection per -c slot)";

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    reqcost run --url gopher://127.0.0.1:7070/ -n 500 -c 4 -- ./myserver --port 7070\n  \
    reqcost run --url gopher://127.0.0.1:7070/ --requests selectors.txt --pid 1234 --json")]
pub struct RunArgs {
    #[arg(long, help = URL_HELP, required_unless_present = "load")]
    pub url: Option<String>,
    /// Connections kept busy at once
    #[arg(short = 'c', long, default_value_t = 1)]
    pub concurrency: u32,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    /// Measure this already running server (and its descendants) instead of launching one.
    /// reqcost says what it will send before sending it; per-request figures divide by every
    /// request the server served, and the summary names the traffic of its other clients
    #[arg(long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// Save the run record here [default: reqcost-runs/<id>.json]
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the analysis (findings, per-request figures; docs/analysis.md) as JSON on stdout
    /// instead of the summary
    #[arg(long)]
    pub json: bool,
    /// Print the run record itself as JSON on stdout instead of the summary
    #[arg(long, conflicts_with = "json")]
    pub record_json: bool,
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Skip the short slow-client phase that follows main (64 KiB/s per connection, ~2 s) and
    /// its reference (fast clients at the same request rate), which reveal servers whose cost
    /// depends on how fast clients read
    #[arg(long)]
    pub no_slow_phase: bool,
    #[command(flatten)]
    pub per: PerArgs,
    #[command(flatten)]
    pub stacks: StackOutputArgs,
    /// The server command line, after `--`
    #[arg(
        last = true,
        value_name = "SERVER CMD",
        required_unless_present = "pid"
    )]
    pub command: Vec<String>,
}

#[derive(Args)]
#[command(
    after_help = "The record has one phase, `live`: the server's requests in the window, \
    counted on the server side (per-request accounting), its CPU divided by them.\n\n\
    The probes' cost: by default the probes keep a budget of 1 % of the server's CPU. reqcost \
    measures what they cost the server while attached (their programs' run time on its events, \
    the slow syscall path they turn on, calibrated at start, TLS return probes' syscalls, and \
    the server's CPU per byte received with and without them) and attaches them for the part of each second that keeps the cost within the budget: all \
    the time on a server whose requests are costly, a few percent of it on one that answers in \
    microseconds. Requests and counts are then scaled from the probed part; the summary and the \
    record (cpu_windows.budget) give the cost achieved with its interval and the share probed, \
    and say when even the least duty (1 %) costs more than the budget. --duty PCT fixes the \
    share instead, --probes-full-time keeps them on throughout (exact counts, the server pays \
    their full cost). Call chains are sampled at 47 Hz throughout, outside the budget (at 499 \
    Hz, `run`'s rate, sampling raised a 13 µs request's CPU by about 17 %); --freq sets the \
    rate, --no-sample turns it off.\n\n\
    Examples:\n  \
    reqcost attach --port 8080 --duration 60s\n  \
    reqcost attach --pid 1234 -o live.json          (until Ctrl-C)\n  \
    reqcost attach --port 8080 --metrics 127.0.0.1:9464   (for Prometheus)"
)]
pub struct AttachArgs {
    /// The running server to watch, with its descendants
    #[arg(long, required_unless_present = "port", conflicts_with = "port")]
    pub pid: Option<u32>,
    /// Watch the process that listens on this TCP port (the common parent of those that do)
    #[arg(long)]
    pub port: Option<u16>,
    /// Length of the window (e.g. 60s, 5m) [default: until Ctrl-C or SIGTERM]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Save the run record here [default: reqcost-runs/<id>.json]
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// Print the run record as JSON on stdout instead of the summary (and no progress lines)
    #[arg(long)]
    pub json: bool,
    /// Serve the live figures for Prometheus at http://ADDR/metrics while attached
    /// (e.g. 127.0.0.1:9464; docs/metrics.md)
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<SocketAddr>,
    /// Attach the probes only PCT of the time (e.g. 20%), in turns within each second, for a
    /// server where their full-time cost is too high: requests, syscalls and per-class figures
    /// are scaled from the probed part to the whole window and the record says they are
    /// sampled (with the fraction actually probed); the CPU is the whole window's. Requests in
    /// flight at each switch are left out of the per-request figures
    #[arg(long, value_name = "PCT", value_parser = parse_duty)]
    pub duty: Option<f64>,
    /// Keep the probes' cost to the server within PCT of its CPU (e.g. 3%, 0.5%): the share of
    /// each second they are attached is set from what they are measured to cost. The default;
    /// --duty and --probes-full-time override it
    #[arg(long, value_name = "PCT", value_parser = parse_budget)]
    pub budget: Option<f64>,
    /// Keep the probes attached the whole window: every request counted exactly, the server's
    /// CPU with their full cost (1.4x on a 17 µs request)
    #[arg(long, conflicts_with = "duty")]
    pub probes_full_time: bool,
    /// Also measure the probes' cost on the whole machine, as `run --probe-stats` does
    #[arg(long)]
    pub probe_stats: bool,
    #[command(flatten)]
    pub upstreams: UpstreamArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub stacks: StackOutputArgs,
}

/// A percentage, `%` or not.
fn percent(s: &str) -> Option<f64> {
    s.trim().trim_end_matches('%').trim().parse::<f64>().ok()
}

/// `--budget`: a percentage above 0 and at most 100, as a fraction.
fn parse_budget(s: &str) -> Result<f64, String> {
    percent(s)
        .filter(|p| *p > 0.0 && *p <= 100.0)
        .map(|p| p / 100.0)
        .ok_or_else(|| {
            format!(
                "\"{s}\" is not a budget: use a percentage of the server's CPU above 0 and at \
                 most 100%, e.g. 3%"
            )
        })
}

/// `--duty`: a percentage strictly between 0 and 100, as a fraction.
fn parse_duty(s: &str) -> Result<f64, String> {
    percent(s)
        .filter(|p| *p >= 1.0 && *p < 100.0)
        .map(|p| p / 100.0)
        .ok_or_else(|| {
            format!(
                "\"{s}\" is not a duty: use a percentage from 1% to 99%, e.g. 20%, or leave \
                 --duty out for probes the whole time"
            )
        })
}

#[derive(Args)]
pub struct ReportArgs {
    /// A run record written by `reqcost run`
    pub record: PathBuf,
    #[command(flatten)]
    pub per: PerArgs,
    #[command(flatten)]
    pub stacks: StackOutputArgs,
    /// Print the analysis (findings, per-request figures; docs/analysis.md) as JSON instead of
    /// the summary
    #[arg(long)]
    pub json: bool,
    /// Print the record itself as JSON instead of the summary
    #[arg(long, conflicts_with = "json")]
    pub record_json: bool,
    /// Check the record's invariants instead of printing the summary (docs/analysis.md,
    /// "Record invariants"): exit 0 when they hold, 1 with one line per violation
    #[arg(long, conflicts_with_all = ["json", "record_json"])]
    pub check_record: bool,
}

#[derive(Args)]
#[command(after_help = "Examples:\n  \
    reqcost compare --a \"./server --no-cache\" --b \"./server --cache\" --url http://127.0.0.1:8080/ -n 2000\n  \
    reqcost compare before.json after.json")]
pub struct CompareArgs {
    /// Two run records to compare (A then B), instead of --a/--b
    #[arg(value_name = "RECORD", num_args = 0..=2, conflicts_with_all = ["a", "b"])]
    pub records: Vec<PathBuf>,
    /// Server command line A (quoted, split like a shell would)
    #[arg(long, value_name = "CMD", requires = "b")]
    pub a: Option<String>,
    /// Server command line B
    #[arg(long, value_name = "CMD", requires = "a")]
    pub b: Option<String>,
    /// Measured repetitions of each, interleaved A B B A A B …
    #[arg(long, default_value_t = 5, value_name = "N")]
    pub runs: u32,
    /// Directory for the run records of every repetition
    #[arg(long, default_value = "reqcost-runs", value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Write a differential flame graph SVG to FILE: every call chain of A or B, in CPU per
    /// request, red where B costs more, blue where less (a chain gone in B stays, blue)
    #[arg(long, value_name = "FILE")]
    pub diff_flamegraph: Option<PathBuf>,
    /// Write a self-contained HTML report to FILE: both sides and their runs, every phase's
    /// verdicts with their 95 % intervals, the differential flame graph, each side's findings.
    /// One file, nothing fetched: mail it or attach it to a ticket
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print the comparison as JSON (verdicts, intervals, what ran; docs/compare.md)
    #[arg(long)]
    pub json: bool,
    // Comparing two records needs no workload: --url is checked only with --a/--b.
    #[arg(long, help = URL_HELP)]
    pub url: Option<String>,
    /// Connections kept busy at once
    #[arg(short = 'c', long, default_value_t = 1)]
    pub concurrency: u32,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Skip the short slow-client phase that follows main (64 KiB/s per connection, ~2 s) and
    /// its reference (fast clients at the same request rate), which reveal servers whose cost
    /// depends on how fast clients read
    #[arg(long)]
    pub no_slow_phase: bool,
    // `run` and `sweep` take --pid; compare launches both sides, so it is refused with the way
    // to compare running servers instead of clap's bare "unexpected argument".
    #[arg(long, hide = true)]
    pub pid: Option<u32>,
}

#[derive(Args)]
#[command(
    after_help = "Each run's main phase lasts 2 s unless -n or --duration says otherwise: long \
    enough that a phase's edges (its first requests, a timer's wakeup, a neighbour's time slice) \
    weigh under 1 % of its CPU, short enough that 3 runs of 4 levels take about a minute.\n\n\
    No slow-client phase follows each level's main phase (run and compare have one): the \
    levels differ in connections alone.\n\n\
    Examples:\n  \
    reqcost sweep --concurrency 1,5,10,15 --repeat 5 --url gopher://127.0.0.1:7070/ --chart sweep.svg -- ./server --port 7070\n  \
    reqcost sweep --concurrency 1,16,64 --url http://127.0.0.1:8080/ --pid 1234 --json"
)]
pub struct SweepArgs {
    /// Connection counts to measure, comma-separated
    #[arg(
        short = 'c',
        long = "concurrency",
        value_delimiter = ',',
        required = true,
        value_name = "N,N,..."
    )]
    pub levels: Vec<u32>,
    /// Write an SVG chart of CPU per request against connections
    #[arg(long, value_name = "FILE")]
    pub chart: Option<PathBuf>,
    /// Write a self-contained HTML report (chart, levels side by side, costs) to FILE
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Directory for the run record of every level
    #[arg(long, default_value = "reqcost-runs", value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Measured runs per level, interleaved across levels (1 16 64, 1 16 64, ...): each level's
    /// figures are the mean over its runs with a 95 % interval, and growth is claimed only when
    /// the intervals allow it
    #[arg(long, default_value_t = 3, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: u32,
    /// Print the sweep as JSON: each level's means and intervals, the verdict, the run order and
    /// every run's record (docs/sweep.md)
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub per: PerArgs,
    #[arg(long, help = URL_HELP, required_unless_present = "load")]
    pub url: Option<String>,
    #[command(flatten)]
    pub workload: WorkloadArgs,
    #[command(flatten)]
    pub load: LoadArgs,
    #[command(flatten)]
    pub measure: MeasureArgs,
    /// Sweep this already running server (and its descendants) instead of launching one per
    /// run: every run loads the same server, so what one level leaves behind (caches, open
    /// connections) the next one inherits
    #[arg(long, conflicts_with = "command")]
    pub pid: Option<u32>,
    /// The server command line, after `--`; a fresh server for every run
    #[arg(
        last = true,
        value_name = "SERVER CMD",
        required_unless_present = "pid"
    )]
    pub command: Vec<String>,
}

#[derive(Args)]
#[command(
    after_help = "Every phase both records measured (main, slow-clients, class:NAME, ...) is \
    held to the bounds on its own; a major finding the baseline does not have fails the check \
    too.\n\n\
    Exit status: 0 within bounds, 1 regression, 2 bad input (a partial record without \
    --allow-partial).\n\n\
    Example:\n  reqcost check reqcost-runs/new.json --baseline baseline.json --max-cpu-regression 10"
)]
pub struct CheckArgs {
    /// The run record to judge
    pub run: PathBuf,
    /// The run record it must not be worse than
    #[arg(long, value_name = "RECORD")]
    pub baseline: PathBuf,
    /// Largest allowed increase of CPU per unit (`--per`), in percent
    #[arg(long, default_value_t = 10.0, value_name = "PCT", value_parser = parse_pct)]
    pub max_cpu_regression: f64,
    /// Largest allowed increase of syscalls per unit (`--per`), in percent
    #[arg(long, default_value_t = 5.0, value_name = "PCT", value_parser = parse_pct)]
    pub max_syscalls_regression: f64,
    /// Judge a partial record (interrupted, server died) for what it holds instead of refusing
    /// it
    #[arg(long)]
    pub allow_partial: bool,
    /// Print the result as JSON (each bound, new findings; docs/ci.md)
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub per: PerArgs,
}

#[derive(Args)]
pub struct DemoArgs {
    /// Requests per server
    #[arg(short = 'n', long, default_value_t = 2000)]
    pub requests: u64,
    /// Directory for the demo's run records
    #[arg(long, default_value = "reqcost-runs", value_name = "DIR")]
    pub out_dir: PathBuf,
}

/// Workload options shared by every command that drives a server, but for `--url` and `-c`.
#[derive(Args, Debug, Clone)]
pub struct WorkloadArgs {
    /// Requests to replay: one selector, path or URL a line, or an access log in Common or
    /// Combined Log Format or JSON lines (detected; GET and HEAD replayed in order)
    #[arg(long, value_name = "FILE")]
    pub requests: Option<PathBuf>,
    /// How the access log is written, in the server's own syntax: an nginx log_format string
    /// ('$remote_addr [$time_local] "$request" $status $body_bytes_sent $request_time'), an
    /// Apache LogFormat string ('%h %l %u %t "%r" %>s %O %D'), either pasted with its
    /// directive, or combined, common, json. Time, client, request, status, bytes and request
    /// time are read from it [default: detected from the first line]
    #[arg(long, value_name = "FORMAT", requires = "requests")]
    pub log_format: Option<String>,
    /// Replay part of the log: every K-th line (e.g. 100), or the requests logged FROM..TO
    /// after the first one (e.g. 2m..5m)
    #[arg(long, value_name = "K|FROM..TO", value_parser = parse_sample, requires = "requests")]
    pub sample: Option<Sample>,
    /// Replay production's clients: each request read at the speed its log line shows (bytes
    /// sent over request time; unlimited for requests under 10 ms, whose speed cannot be
    /// told), and on loopback each logged client connecting from its own address (127.1.0.1,
    /// .2, ...), shown in the per-client tables by its logged address. Needs a log with bytes
    /// and request time (see --log-format)
    #[arg(long, requires = "requests", conflicts_with_all = ["client_bandwidth", "client_mix"])]
    pub replay_speeds: bool,
    /// Send each request at its logged time, the log's times divided by FACTOR (e.g. 10 plays a
    /// 20 s log in 2 s), keeping its bursts and lulls: open loop, latency counted from each
    /// request's scheduled time; the log (or its --sample) is sent once, whatever -n
    #[arg(long, value_name = "FACTOR", num_args = 0..=1, default_missing_value = "1", requires = "requests", conflicts_with = "rate")]
    pub replay_timing: Option<f64>,
    /// With --replay-speeds: show logged client addresses hashed (client-1a2b3c4d), the same
    /// address always the same name
    #[arg(long, requires = "replay_speeds")]
    pub anonymize: bool,
    /// Number of measured requests [default: 1000; sweep: each run lasts 2s instead]
    #[arg(short = 'n', long = "requests-count", value_name = "N")]
    pub count: Option<u64>,
    /// Run each measured phase for this long instead of -n requests (e.g. 10s, 2m)
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    pub duration: Option<Duration>,
    /// Open loop: send at this rate (requests per second) whatever the server's pace; latency
    /// counts from each request's scheduled time
    #[arg(long, value_name = "N/s", value_parser = parse_rate)]
    pub rate: Option<f64>,
    /// Load-generator threads, to drive a server faster than one client core can. Each runs its
    /// own connections (-c is split among them; with fewer connections than threads, one
    /// thread per connection) and sends every N-th request, so counts, classes and client
    /// groups match a one-thread run; --rate is split among them too [default: the CPUs the
    /// load generator may run on: one when pinned apart from the server, all with --no-pin]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
    /// Requests sent before measuring, excluded from every figure [default: min(n/10, 100);
    /// 0 with --pid, a running server being warm already]
    #[arg(long, value_name = "N")]
    pub warmup: Option<u64>,
    /// Group requests whose selector, path or URL matches REGEX; each class is replayed as its
    /// own measured phase `class:NAME` after main (repeatable)
    #[arg(long = "class", value_name = "NAME=REGEX")]
    pub classes: Vec<String>,
    /// Skip and count malformed lines of the requests file instead of failing
    #[arg(long)]
    pub skip_bad: bool,
    /// Slow clients: read each response at most this fast per connection (e.g. 100KiB/s)
    #[arg(long, value_name = "RATE", value_parser = parse_bandwidth)]
    pub client_bandwidth: Option<u64>,
    /// Socket receive buffer of each connection (e.g. 8KiB) [default with --client-bandwidth: 8KiB]
    #[arg(long, value_name = "SIZE", value_parser = parse_rcvbuf)]
    pub client_rcvbuf: Option<u32>,
    /// Fast and slow clients in the same phase, as production has them: SHARE%:SPEED groups,
    /// comma-separated, SPEED `unlimited` or a bandwidth (e.g. 80%:unlimited,20%:20KiB/s).
    /// Requests go to the groups in proportion; on loopback each group connects from its own
    /// address (127.0.0.10, .11, ...) so the per-client figures tell them apart
    #[arg(long, value_name = "MIX", value_parser = parse_client_mix, conflicts_with = "client_bandwidth")]
    pub client_mix: Option<ClientMix>,
    /// Give up on a request after this long, connecting included
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    pub request_timeout: Duration,
    /// Give up connecting (TCP and TLS handshake) after this long
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Largest response accepted; a longer one is cut and counted as too-large
    #[arg(long, value_name = "SIZE", default_value = "64MiB", value_parser = parse_size)]
    pub max_response: u64,
    /// HTTP method for requests from --url or a plain list
    #[arg(long, value_name = "GET|HEAD", default_value = "GET", value_parser = method_parser())]
    pub method: Method,
    /// HTTP: one connection per request (Connection: close) instead of keep-alive
    #[arg(long)]
    pub no_keepalive: bool,
    /// TLS: make every handshake a full one (no session resumption)
    #[arg(long)]
    pub no_tls_resume: bool,
    /// HTTP: add this request header, 'Name: value' (repeat for more), e.g. 'Accept-Encoding: gzip'
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
}

impl WorkloadArgs {
    /// The workload's options, given the URL and connection count each command takes its own
    /// way.
    pub fn options(&self, url: String, concurrency: u32) -> WorkloadOptions {
        WorkloadOptions {
            url,
            requests: self.requests.clone(),
            count: self.count.unwrap_or(WorkloadOptions::default().count),
            concurrency,
            threads: self.threads,
            duration: self.duration,
            rate: self.rate,
            warmup: self.warmup,
            classes: self.classes.clone(),
            skip_bad: self.skip_bad,
            log_format: self.log_format.clone(),
            sample: self.sample,
            replay_speeds: self.replay_speeds,
            anonymize: self.anonymize,
            replay_timing: self.replay_timing,
            client_bandwidth: self.client_bandwidth,
            client_rcvbuf: self.client_rcvbuf,
            client_mix: self.client_mix.clone().map(|m| m.0).unwrap_or_default(),
            request_timeout: self.request_timeout,
            connect_timeout: self.connect_timeout,
            max_response: self.max_response,
            method: self.method,
            keepalive: !self.no_keepalive,
            tls_resume: !self.no_tls_resume,
            headers: self.headers.clone(),
        }
    }
}

/// The unit of work per-unit figures divide by.
#[derive(Args, Debug, Clone)]
pub struct PerArgs {
    /// Show every per-unit figure (CPU, syscalls, kernel block, sweep table) per request,
    /// connection, MiB (sent by the server on its sockets) or datagram (UDP, sent or
    /// received). The record keeps totals, so any unit can be asked of it later with `report`
    /// [default: request when the server served requests, else MiB (a UDP server)]
    #[arg(long, value_name = "UNIT", value_parser = parse_unit)]
    pub per: Option<Unit>,
}

fn parse_unit(s: &str) -> Result<Unit, String> {
    Unit::parse(s)
        .ok_or_else(|| format!("\"{s}\" is not a unit: use request, connection, MiB or datagram"))
}

/// An external client program instead of reqcost's load generator.
#[derive(Args, Debug, Clone)]
pub struct LoadArgs {
    /// Drive the server with this client command instead of reqcost's own load, run through
    /// `sh -c` as its own process tree on the load generator's CPUs; `{c}` in it becomes the
    /// connection count (-c, or each sweep level). E.g. 'h2load -n 2000 -c {c}
    /// http://127.0.0.1:8080/'. The server is measured for exactly the command's lifetime, in
    /// one phase (no warm-up, no slow-client phase), with requests, connections, bytes and
    /// datagrams counted on the server side. A non-zero exit fails the run (exit 1); the record
    /// is kept with the command's status and last output. --url is then optional: it only says
    /// where the server accepts TCP connections before the command starts
    #[arg(long, value_name = "CMD", conflicts_with_all = LOAD_GENERATOR_FLAGS)]
    pub load: Option<String>,
    /// With --load and no --url: start the command once the server listens on this TCP port or
    /// has this UDP port bound (for UDP servers such as QUIC) [default: any port of the
    /// server's process tree]
    #[arg(long, value_name = "PORT", requires = "load", conflicts_with = "url")]
    pub port: Option<u16>,
    /// With --load: run the command once only, for a command with side effects or one that
    /// cannot run twice. By default it runs a second time with the probes detached, and the
    /// CPU figures come from that run, free of the probes' cost; with this flag they keep it
    #[arg(long, requires = "load")]
    pub load_once: bool,
}

/// reqcost's load generator settings, which mean nothing to an external client.
const LOAD_GENERATOR_FLAGS: [&str; 18] = [
    "requests",
    "log_format",
    "sample",
    "replay_speeds",
    "replay_timing",
    "anonymize",
    "count",
    "duration",
    "rate",
    "warmup",
    "classes",
    "client_bandwidth",
    "client_rcvbuf",
    "client_mix",
    "method",
    "no_keepalive",
    "no_tls_resume",
    "headers",
];

impl LoadArgs {
    /// What drives the server: the `--load` command, or reqcost's own load from the workload
    /// flags. Either way `--url` is checked as reqcost's own load would.
    pub fn load(
        &self,
        url: Option<String>,
        concurrency: u32,
        workload: &WorkloadArgs,
    ) -> Result<Load, Failure> {
        let plan = |url: String| {
            workload
                .options(url, concurrency)
                .plan()
                .map_err(Failure::bad_input)
        };
        match (&self.load, url) {
            (None, Some(url)) => Ok(Load::Engine(Box::new(plan(url)?))),
            (None, None) => Err(Failure::bad_input(
                "no workload: give --url for reqcost's own load, or --load CMD for a client program",
            )),
            (Some(cmd), url) => {
                let url = url
                    .map(|u| Ok::<_, Failure>((u.clone(), plan(u)?.addr())))
                    .transpose()?;
                let load = ExternalLoad::new(cmd, concurrency, url, self.port)?;
                Ok(Load::External(Box::new(load.run_once(self.load_once))))
            }
        }
    }
}

/// How to measure a server, shared by every command that runs one.
#[derive(Args, Debug, Clone)]
pub struct MeasureArgs {
    /// Let the load generator and the server share CPUs (default: pinned apart when there are 2+)
    #[arg(long)]
    pub no_pin: bool,
    /// Seconds to wait for a launched server to accept connections
    #[arg(long, default_value_t = 10, value_name = "SECS",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub startup_timeout: u64,
    /// Do not attach the eBPF probes: no syscall figures or findings that need them, but no
    /// probe cost in the server's CPU either (about 0.5 µs per syscall)
    #[arg(long)]
    pub no_probes: bool,
    /// Keep the probes attached the whole phase. By default each phase alternates probed and
    /// unprobed windows (0.5 s and 1000 requests at least): its CPU figures come from the
    /// unprobed ones, free of the probes' cost, its syscall and per-request figures from the
    /// probed ones; a phase too short for that is sent again with the probes detached, and
    /// its CPU comes from that unprobed pass (cpu_windows in the record says how). Full time counts every request exactly, at the price of the probes' cost
    /// in the CPU figures
    #[arg(long, conflicts_with = "no_probes")]
    pub probes_full_time: bool,
    /// Also measure the probes' cost on the whole machine (probe_cost.run_ns), with the
    /// kernel's BPF run-time statistics: they read the clock twice per program run, on every
    /// syscall, switch and fault of the machine (about 0.1 µs each in a VM)
    #[arg(long, conflicts_with = "no_probes")]
    pub probe_stats: bool,
    #[command(flatten)]
    pub upstreams: UpstreamArgs,
    #[command(flatten)]
    pub sampling: SamplingArgs,
}

/// Which local upstreams to follow, for every command that measures with the probes.
#[derive(Args, Debug, Clone)]
pub struct UpstreamArgs {
    /// Measure the server's tree alone: do not follow its requests into the local servers it
    /// connects to over loopback TCP or Unix sockets (its application server, its database),
    /// which are followed by default (docs/stack.md)
    #[arg(long, conflicts_with = "follow")]
    pub no_follow_upstreams: bool,
    /// Follow only these local upstreams: root pids or process names, comma-separated
    #[arg(long, value_name = "PID|NAME,...", value_delimiter = ',')]
    pub follow: Vec<String>,
}

impl UpstreamArgs {
    pub fn upstreams(&self) -> Upstreams {
        if self.no_follow_upstreams {
            Upstreams::Off
        } else if self.follow.is_empty() {
            Upstreams::All
        } else {
            Upstreams::Only(self.follow.clone())
        }
    }
}

impl MeasureArgs {
    /// The measurement's options; `slow_phase` is each command's own choice.
    pub fn options(&self, slow_phase: bool) -> MeasureOptions {
        MeasureOptions {
            pin: !self.no_pin,
            startup_timeout: Duration::from_secs(self.startup_timeout),
            probes: !self.no_probes,
            sampling: self.sampling.options(DEFAULT_FREQ_HZ),
            slow_phase,
            probe_schedule: if self.probes_full_time {
                ProbeSchedule::FullTime
            } else {
                ProbeSchedule::Alternate
            },
            probe_stats: self.probe_stats,
            count_client: false,
            upstreams: self.upstreams.upstreams(),
        }
    }
}

/// Call-chain sampling, for every command that measures.
#[derive(Args, Debug, Clone)]
pub struct SamplingArgs {
    /// Call-chain samples per second of each server thread's CPU time [default: 499; attach:
    /// 47, as production profilers sample]
    #[arg(long = "freq", value_name = "HZ",
          value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub freq: Option<u64>,
    /// Do not sample call chains.
    #[arg(long)]
    pub no_sample: bool,
}

impl SamplingArgs {
    /// None when sampling is off; `default_hz` without `--freq`.
    pub fn options(&self, default_hz: u64) -> Option<SampleOptions> {
        (!self.no_sample).then_some(SampleOptions {
            freq_hz: self.freq.unwrap_or(default_hz),
        })
    }
}

/// Files made from a record (its sampled stacks, its report), by `run` and `report`.
#[derive(Args, Debug, Clone)]
pub struct StackOutputArgs {
    /// Write folded stacks (one `frame;frame;... count` line per chain) to FILE.
    #[arg(long, value_name = "FILE")]
    pub folded: Option<PathBuf>,
    /// Write a flame graph SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub flamegraph: Option<PathBuf>,
    /// Draw only the samples taken while the server served requests of this class (or client,
    /// speed bucket, phase, request) in --folded and --flamegraph, e.g. `class=/blog`
    /// (repeatable: all must hold); `class=(unattributed)` is the time serving no request.
    #[arg(long = "where", value_name = "KEY=VALUE", value_parser = parse_tag_filter)]
    pub where_: Vec<TagFilter>,
    /// Write one --folded and --flamegraph file per class (or client, speed, phase, request),
    /// named FILE's stem, the value, FILE's extension (`flame.svg` → `flame._blog.svg`).
    #[arg(long, value_name = "KEY", value_parser = parse_tag_key)]
    pub by: Option<String>,
    /// Write a gzipped pprof profile (for `go tool pprof`, Pyroscope, Parca) to FILE.
    #[arg(long, value_name = "FILE")]
    pub pprof: Option<PathBuf>,
    /// Write a self-contained HTML report (findings, phases, charts, flame graph) to FILE.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Write the analysis as OpenMetrics gauges (requests, CPU and syscalls per unit of each
    /// phase, each class's requests and CPU share, each finding's CPU share) to FILE, for the
    /// node exporter's textfile collector or a Pushgateway.
    #[arg(long, value_name = "FILE")]
    pub openmetrics: Option<PathBuf>,
    /// Push the profile as pprof to the Pyroscope server at URL (e.g. http://127.0.0.1:4040),
    /// labelled service_name, run_id, phases (e.g. main+slow-clients) and reqcost_version, to
    /// keep and diff runs from many machines in Pyroscope or Grafana. http:// only: https is
    /// not supported (push through a local proxy that adds TLS). The record is saved first; a
    /// failed push is a warning naming the URL and the server's answer, and the command then
    /// exits with status 1 so that scripts notice (push again with `reqcost report RECORD
    /// --push-pyroscope URL`).
    #[arg(long, value_name = "URL")]
    pub push_pyroscope: Option<PyroscopeUrl>,
    /// The service name the profile is pushed under [default: the server command's file name,
    /// or the attached process's name]; characters Pyroscope refuses become `_`.
    #[arg(long, value_name = "NAME", requires = "push_pyroscope")]
    pub service: Option<String>,
}

impl StackOutputArgs {
    /// Folded stacks, flame graph, pprof and HTML report of one run (`run`, `report`).
    pub fn exports(&self) -> ExportManager {
        let mut exports = ExportManager::default();
        exports.add_if_given(Format::Folded, self.folded.as_deref());
        exports.add_if_given(Format::Flamegraph, self.flamegraph.as_deref());
        exports.add_if_given(Format::Pprof, self.pprof.as_deref());
        exports.add_if_given(Format::Html, self.html.as_deref());
        exports.add_if_given(Format::OpenMetrics, self.openmetrics.as_deref());
        exports.select(Selection {
            filters: self.where_.clone(),
            by: self.by.clone(),
        });
        exports
    }
}

fn parse_tag_filter(s: &str) -> Result<TagFilter, String> {
    s.parse()
}

fn parse_tag_key(s: &str) -> Result<String, String> {
    tagged::check_key(s).map(|()| s.to_string())
}

impl CompareArgs {
    /// The differential flame graph and HTML report of a comparison.
    pub fn exports(&self) -> ExportManager {
        let mut exports = ExportManager::default();
        exports.add_if_given(Format::DiffFlamegraph, self.diff_flamegraph.as_deref());
        exports.add_if_given(Format::Html, self.html.as_deref());
        exports
    }
}

impl SweepArgs {
    /// The chart and HTML report of a sweep.
    pub fn exports(&self) -> ExportManager {
        let mut exports = ExportManager::default();
        exports.add_if_given(Format::SweepChart, self.chart.as_deref());
        exports.add_if_given(Format::Html, self.html.as_deref());
        exports
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    units::parse_duration(s)
        .ok_or_else(|| format!("\"{s}\" is not a duration: use e.g. 30s, 500ms, 2m"))
}

fn parse_pct(s: &str) -> Result<f64, String> {
    s.trim_end_matches('%')
        .parse::<f64>()
        .ok()
        .filter(|p| p.is_finite() && *p >= 0.0)
        .ok_or_else(|| format!("\"{s}\" is not a percentage: use a number of 0 or more, e.g. 10"))
}

fn parse_rate(s: &str) -> Result<f64, String> {
    units::parse_rate(s).ok_or_else(|| format!("\"{s}\" is not a rate: use a positive number of requests per second, e.g. 500 or 500/s"))
}

fn parse_bandwidth(s: &str) -> Result<u64, String> {
    units::parse_bandwidth(s)
        .ok_or_else(|| format!("\"{s}\" is not a bandwidth: use e.g. 100KiB/s, 1MiB/s, 64kB/s"))
}

fn parse_sample(s: &str) -> Result<Sample, String> {
    Sample::parse(s).ok_or_else(|| {
        format!("\"{s}\" is not a sample: use K (every K-th line, K >= 1) or FROM..TO (durations after the first logged request, e.g. 2m..5m)")
    })
}

/// `--client-mix` groups: (percent of requests, bandwidth; None for unlimited).
#[derive(Debug, Clone)]
pub struct ClientMix(Vec<(f64, Option<u64>)>);

fn parse_client_mix(s: &str) -> Result<ClientMix, String> {
    let group = |g: &str| {
        let (share, speed) = g.split_once(':')?;
        let share: f64 = share.trim().strip_suffix('%')?.trim().parse().ok()?;
        let speed = match speed.trim() {
            "unlimited" => None,
            bw => Some(units::parse_bandwidth(bw)?),
        };
        (share.is_finite() && share > 0.0).then_some((share, speed))
    };
    let groups = s
        .split(',')
        .map(|g| {
            group(g).ok_or_else(|| {
                format!("\"{g}\" is not a client group: use SHARE%:SPEED, e.g. 20%:20KiB/s or 80%:unlimited")
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let total: f64 = groups.iter().map(|(share, _)| share).sum();
    if (total - 100.0).abs() > 0.01 {
        return Err(format!("the shares add up to {total} %, not 100 %"));
    }
    Ok(ClientMix(groups))
}

fn parse_size(s: &str) -> Result<u64, String> {
    units::parse_size(s)
        .ok_or_else(|| format!("\"{s}\" is not a size: use e.g. 65536, 64KiB, 16MiB"))
}

fn parse_rcvbuf(s: &str) -> Result<u32, String> {
    units::parse_size(s)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| format!("\"{s}\" is not a buffer size: use e.g. 4KiB, 8KiB, 64KiB"))
}

/// `GET` or `HEAD`, listed as the possible values in the help.
fn method_parser() -> impl TypedValueParser<Value = Method> {
    PossibleValuesParser::new(["GET", "HEAD"]).map(|m| match m.as_str() {
        "HEAD" => Method::Head,
        _ => Method::Get,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("reqcost").chain(argv.iter().copied()))
    }

    fn run_args(argv: &[&str]) -> RunArgs {
        let mut full = vec!["run"];
        full.extend(argv);
        full.extend(["--", "server"]);
        match parse(&full).unwrap().command {
            Command::Run(args) => args,
            _ => unreachable!("parsed as run"),
        }
    }

    #[test]
    fn workload_defaults_are_the_librarys() {
        let args = run_args(&["--url", "http://127.0.0.1:8080/"]);
        assert_eq!(
            args.workload
                .options(args.url.clone().unwrap(), args.concurrency),
            WorkloadOptions {
                url: "http://127.0.0.1:8080/".into(),
                ..Default::default()
            }
        );
        assert_eq!(
            args.measure.options(!args.no_slow_phase),
            MeasureOptions::default()
        );
    }

    #[test]
    fn workload_flags_with_units() {
        let args = run_args(&[
            "--url",
            "http://127.0.0.1:8080/",
            "-c",
            "4",
            "--duration",
            "10s",
            "--rate",
            "100/s",
            "--client-bandwidth",
            "64KiB/s",
            "--client-rcvbuf",
            "4KiB",
            "--max-response",
            "1MiB",
            "--method",
            "HEAD",
            "--no-keepalive",
        ]);
        let o = args.workload.options(args.url.unwrap(), args.concurrency);
        assert_eq!(o.concurrency, 4);
        assert_eq!(o.duration, Some(Duration::from_secs(10)));
        assert_eq!(o.rate, Some(100.0));
        assert_eq!(
            (o.client_bandwidth, o.client_rcvbuf),
            (Some(65536), Some(4096))
        );
        assert_eq!(o.max_response, 1 << 20);
        assert_eq!(
            (o.method, o.keepalive, o.tls_resume),
            (Method::Head, false, true)
        );
    }

    #[test]
    fn sampling_defaults_and_flags() {
        let a = run_args(&["--url", "gopher://127.0.0.1:70/"]);
        assert_eq!(
            (a.measure.sampling.freq, a.measure.sampling.no_sample),
            (None, false)
        );
        assert_eq!(
            a.measure.options(true).sampling.map(|s| s.freq_hz),
            Some(499)
        );
        assert!(
            a.stacks.folded.is_none() && a.stacks.flamegraph.is_none() && a.stacks.pprof.is_none()
        );
        let a = run_args(&[
            "--url",
            "gopher://127.0.0.1:70/",
            "--freq",
            "997",
            "--pprof",
            "p.pb.gz",
            "--no-sample",
        ]);
        assert_eq!(
            (a.measure.sampling.freq, a.measure.sampling.no_sample),
            (Some(997), true)
        );
        assert_eq!(a.stacks.pprof.unwrap(), PathBuf::from("p.pb.gz"));
        assert_eq!(a.measure.options(true).sampling, None);
        let e = parse(&[
            "run",
            "--url",
            "gopher://127.0.0.1:70/",
            "--freq",
            "0",
            "--",
            "x",
        ])
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("--freq"), "{e}");
    }

    #[test]
    fn report_takes_only_the_stack_outputs() {
        assert!(parse(&["report", "r.json", "--folded", "f.txt"]).is_ok());
        assert!(parse(&["report", "r.json", "--freq", "997"]).is_err());
        assert!(parse(&["report", "r.json", "--no-sample"]).is_err());
    }

    /// The measurement and client options `compare` and `sweep` were given, as their commands
    /// see them.
    fn measured(argv: &[&str]) -> (MeasureOptions, WorkloadOptions) {
        match parse(argv).unwrap().command {
            Command::Compare(a) => (
                a.measure.options(!a.no_slow_phase),
                a.workload.options("gopher://127.0.0.1:70/".into(), 1),
            ),
            Command::Sweep(a) => (
                a.measure.options(false),
                a.workload.options(a.url.clone().unwrap_or_default(), 1),
            ),
            _ => unreachable!("compare or sweep"),
        }
    }

    #[test]
    fn compare_and_sweep_take_runs_measurement_options() {
        let shared = [
            "--no-probes",
            "--freq",
            "997",
            "--no-pin",
            "--client-bandwidth",
            "64KiB/s",
            "--client-rcvbuf",
            "4KiB",
        ];
        let compare: Vec<&str> = ["compare", "--a", "x", "--b", "y", "--no-slow-phase"]
            .into_iter()
            .chain(shared)
            .collect();
        let sweep: Vec<&str> = ["sweep", "-c", "1,4", "--url", "gopher://127.0.0.1:70/"]
            .into_iter()
            .chain(shared)
            .chain(["--", "server"])
            .collect();
        for argv in [compare, sweep] {
            let (m, w) = measured(&argv);
            assert!(!m.probes && !m.pin && !m.slow_phase, "{argv:?}");
            assert_eq!(m.sampling.map(|s| s.freq_hz), Some(997), "{argv:?}");
            assert_eq!(
                (w.client_bandwidth, w.client_rcvbuf),
                (Some(65536), Some(4096))
            );
        }
        let (m, w) = measured(&[
            "sweep",
            "-c",
            "1",
            "--url",
            "gopher://127.0.0.1:70/",
            "--no-sample",
            "--client-mix",
            "80%:unlimited,20%:20KiB/s",
            "--",
            "server",
        ]);
        assert_eq!(m.sampling, None);
        assert_eq!(w.client_mix, [(80.0, None), (20.0, Some(20 * 1024))]);
        let (m, _) = measured(&["compare", "--a", "x", "--b", "y", "--no-sample"]);
        assert!(m.slow_phase && m.sampling.is_none());
    }

    #[test]
    fn sweep_takes_a_pid_instead_of_a_command_and_not_both() {
        let Command::Sweep(a) = parse(&[
            "sweep",
            "-c",
            "1,4",
            "--url",
            "gopher://x:70/",
            "--pid",
            "42",
        ])
        .unwrap()
        .command
        else {
            unreachable!("parsed as sweep")
        };
        assert_eq!((a.pid, a.command.len(), a.repeat), (Some(42), 0, 3));
        let e = parse_sweep(&["--pid", "42"]).err().unwrap().to_string();
        assert!(e.contains("--pid"), "{e}");
        assert!(parse_sweep(&["--repeat", "0"]).is_err());
    }

    /// `sweep -c 1 --url gopher://x:70/ EXTRA -- server`, parsed.
    fn parse_sweep(extra: &[&str]) -> Result<Cli, clap::Error> {
        let mut argv = vec!["sweep", "-c", "1", "--url", "gopher://x:70/"];
        argv.extend(extra);
        argv.extend(["--", "server"]);
        parse(&argv)
    }

    #[test]
    fn sweep_owns_the_connection_counts() {
        let cli = parse(&[
            "sweep",
            "-c",
            "1,5,10",
            "--url",
            "gopher://127.0.0.1:70/",
            "--",
            "server",
        ])
        .unwrap();
        let Command::Sweep(args) = cli.command else {
            unreachable!("parsed as sweep")
        };
        assert_eq!(args.levels, [1, 5, 10]);
        assert!(parse(&["sweep", "--url", "gopher://127.0.0.1:70/", "--", "server"]).is_err());
        assert!(parse_sweep(&["--no-slow-phase"]).is_err());
    }
}
