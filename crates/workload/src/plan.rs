//! A validated workload, [`Plan`], and the phases it runs: what each phase sends, to whom, how
//! fast, and on how many load threads; what the record says of the workload.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use regex::bytes::Regex;
use reqcost_record::{ClientStats, Workload};

use crate::client_model::{ClientMix, ClientModel, ReplayModel};
use crate::endpoint::{Endpoint, Protocol};
use crate::options::{TlsSetup, SLOW_CLIENT_RCVBUF};
use crate::source::{Format, Normalizer, Request, Sample, Scan, Source};
use crate::units::format_size;
use crate::{client, engine, quic, replay};

/// A validated workload, ready to run phase by phase.
pub struct Plan {
    pub(crate) url: String,
    pub(crate) endpoint: Endpoint,
    pub(crate) requests_file: Option<PathBuf>,
    pub(crate) scan: Option<Scan>,
    pub(crate) normalizer: Normalizer,
    pub(crate) sample: Option<Sample>,
    pub(crate) replay: Option<ReplayModel>,
    pub(crate) anonymize: bool,
    pub(crate) timing: Option<f64>,
    pub(crate) single: Request,
    pub(crate) count: u64,
    pub(crate) duration: Option<Duration>,
    pub(crate) rate: Option<f64>,
    pub(crate) concurrency: u32,
    pub(crate) threads: Option<u32>,
    pub(crate) warmup: u64,
    pub(crate) classes: Vec<(String, Regex)>,
    pub(crate) client: ClientMix,
    pub(crate) request_timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) max_response: u64,
    pub(crate) keepalive: bool,
    pub(crate) tls_resume: bool,
    pub(crate) headers: Vec<u8>,
    pub(crate) tls: Option<TlsSetup>,
    pub(crate) quic: Option<quic::QuicTarget>,
}

/// When a phase ends.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    Requests(u64),
    Duration(Duration),
}

/// One stretch of load; warm-up phases are run but not measured.
#[derive(Debug, Clone)]
pub struct PhaseSpec {
    pub name: String,
    pub measured: bool,
    /// Client speed model shown in reports, e.g. `unlimited`.
    pub client_model: String,
    /// Requests this phase will send, when known (for progress bars).
    pub expected_requests: Option<u64>,
    bound: Bound,
    client: ClientMix,
    /// Index into the plan's classes: only requests of that class are sent.
    class: Option<usize>,
    /// Open loop at this many requests per second; closed loop when None.
    rate: Option<f64>,
    /// Requests read as the log shows (`--replay-speeds`); the phase's clients otherwise.
    replay: Option<ReplayModel>,
    /// Requests sent at their logged times compressed by this factor (`--replay-timing`).
    timing: Option<f64>,
}

impl Plan {
    /// Where the server must accept connections before load starts.
    pub fn addr(&self) -> SocketAddr {
        self.endpoint.addr
    }

    /// Whether the load speaks QUIC: the server binds a UDP port and accepts nothing.
    pub fn is_quic(&self) -> bool {
        self.endpoint.protocol == Protocol::Quic
    }

    /// `--class` names with their regular expressions, in the order given.
    pub fn classes(&self) -> Vec<(&str, &str)> {
        self.classes
            .iter()
            .map(|(name, re)| (name.as_str(), re.as_str()))
            .collect()
    }

    /// What the user should know about the inputs before trusting the run, one line each.
    pub fn warnings(&self) -> Vec<String> {
        let (Some(scan), Some(path)) = (&self.scan, &self.requests_file) else {
            return Vec::new();
        };
        if scan.typed_paths == 0 {
            return Vec::new();
        }
        vec![format!(
            "{}: {} of {} requests look like gopher URL paths (/TYPE/SELECTOR, e.g. /0/about.txt); \
             the item type is not part of the selector, and servers answer these with error \
             items: write the selectors themselves (about.txt or /about.txt)",
            path.display(),
            scan.typed_paths,
            scan.requests
        )]
    }

    /// What the log says of the requests replayed, per class too; None for a plain list.
    fn logged_traffic(&self) -> Option<reqcost_record::LoggedTraffic> {
        let scan = self.scan.as_ref().filter(|s| s.format != Format::List)?;
        let mut log = scan.log.to_record(scan.requests);
        for ((name, _), (sum, n)) in self.classes.iter().zip(&scan.class_durations) {
            if *n > 0 {
                log.class_request_time_mean_s
                    .insert(name.clone(), sum / *n as f64);
            }
        }
        Some(log)
    }

    /// The logged client each loopback address stands for under `--replay-speeds` (as logged
    /// or hashed with `--anonymize`), so that per-client figures name the log's clients.
    pub fn client_names(&self) -> Vec<(IpAddr, String)> {
        let (Some(scan), Some(ReplayModel { aliases: true, .. })) = (&self.scan, &self.replay)
        else {
            return Vec::new();
        };
        let mut names: Vec<(IpAddr, String)> = scan
            .clients
            .order
            .iter()
            .enumerate()
            .map(|(n, addr)| {
                (
                    replay::alias(n as u32),
                    replay::client_name(addr, self.anonymize),
                )
            })
            .collect();
        if scan.clients.others > 0 {
            names.push((
                replay::alias(replay::MAX_CLIENTS),
                "(other logged clients)".into(),
            ));
        }
        names
    }

    /// Format of the requests file, when there is one.
    pub fn requests_format(&self) -> Option<Format> {
        self.scan.as_ref().map(|s| s.format)
    }

    pub fn describe(&self) -> Workload {
        let mut options = BTreeMap::new();
        let mut opt = |k: &str, v: String| options.insert(k.to_string(), v);
        if let Some(scan) = &self.scan {
            opt("requests-format", scan.format.name().into());
            opt("requests-in-file", scan.requests.to_string());
            for (reason, n) in &scan.skipped {
                opt(&format!("skipped-in-file: {reason}"), n.to_string());
            }
            if let Some(sample) = self.sample {
                opt("sample", sample.describe());
                opt("sampled-out-lines", scan.sampled_out.to_string());
            }
            if let Some(factor) = self.timing {
                opt(
                    "replay-timing",
                    format!("each request at its logged time, {factor}x faster (open loop; latency from the scheduled time)"),
                );
            }
            if let Some(r) = &self.replay {
                opt(
                    "replay-speeds",
                    format!(
                        "each request read at its logged speed (bytes over request time; unlimited under {}s), rcvbuf {}",
                        replay::SPEED_MIN_TIME_S,
                        format_size(u64::from(r.rcvbuf))
                    ),
                );
                for (ip, name) in self.client_names() {
                    opt(&format!("logged-client {ip}"), name);
                }
            }
            for ((name, re), n) in self.classes.iter().zip(&scan.class_requests) {
                opt(
                    &format!("class:{name}"),
                    format!("{} ({n} requests in file)", re.as_str()),
                );
            }
        }
        opt("client", self.client_model());
        opt("request-timeout", format!("{:?}", self.request_timeout));
        opt("connect-timeout", format!("{:?}", self.connect_timeout));
        opt("max-response", format_size(self.max_response));
        if self.endpoint.protocol.is_http() {
            opt("keepalive", self.keepalive.to_string());
        }
        if !self.headers.is_empty() {
            let text = String::from_utf8_lossy(&self.headers);
            opt("headers", text.trim_end().replace("\r\n", "; "));
        }
        if self.endpoint.protocol.uses_tls() {
            opt("tls-resumption", self.tls_resume.to_string());
        }
        Workload {
            log: self.logged_traffic(),
            url: self.url.clone(),
            protocol: self.endpoint.protocol.name().to_string(),
            requests_file: self.requests_file.as_ref().map(|p| p.display().to_string()),
            concurrency: self.concurrency,
            requests: self.duration.is_none().then_some(self.count),
            duration_s: self.duration.map(|d| d.as_secs_f64()),
            rate_per_s: self.rate,
            warmup_requests: self.warmup,
            options,
            load: None,
        }
    }

    /// How the main phases' clients read: the client mix's models, or the log's speeds.
    fn client_model(&self) -> String {
        match &self.replay {
            Some(r) if r.aliases => {
                "as-logged (each request at its logged speed, each logged client from its own address)".into()
            }
            Some(_) => "as-logged (each request at its logged speed)".into(),
            None => self.client.describe(),
        }
    }

    fn measured_phase(&self, name: String, class: Option<usize>) -> PhaseSpec {
        let bound = match (self.duration, self.timing, &self.scan) {
            (Some(d), _, _) => Bound::Duration(d),
            // At the logged times, the log is sent once: a second pass would start over at
            // the log's first time.
            (None, Some(_), Some(scan)) => Bound::Requests(match class {
                Some(i) => scan.class_requests[i],
                None => scan.requests,
            }),
            (None, ..) => Bound::Requests(self.count),
        };
        PhaseSpec {
            name,
            measured: true,
            client_model: self.client_model(),
            expected_requests: match bound {
                Bound::Requests(n) => Some(n),
                Bound::Duration(d) => self.rate.map(|r| (r * d.as_secs_f64()) as u64),
            },
            bound,
            client: self.client.clone(),
            class,
            rate: self.rate,
            replay: self.replay,
            timing: self.timing,
        }
    }

    /// Warm-up (when `--warmup` is not 0), `main`, then `class:NAME` for each `--class`.
    pub fn phases(&self) -> Vec<PhaseSpec> {
        let mut phases = Vec::new();
        if self.warmup > 0 {
            phases.push(PhaseSpec {
                name: "warmup".into(),
                measured: false,
                client_model: self.client_model(),
                expected_requests: Some(self.warmup),
                bound: Bound::Requests(self.warmup),
                client: self.client.clone(),
                class: None,
                rate: None,
                replay: self.replay,
                timing: None,
            });
        }
        phases.push(self.measured_phase("main".into(), None));
        for (i, (name, _)) in self.classes.iter().enumerate() {
            phases.push(self.measured_phase(format!("class:{name}"), Some(i)));
        }
        phases
    }

    /// A measured phase `slow-clients` sending `requests` requests (closed loop, `-c`
    /// connections) with each connection reading at most `bytes_per_s`, through a receive
    /// buffer of `--client-rcvbuf` or [`SLOW_CLIENT_RCVBUF`].
    pub fn slow_client_phase(&self, requests: u64, bytes_per_s: u64) -> PhaseSpec {
        let client = ClientMix::single(ClientModel {
            bandwidth: Some(bytes_per_s.max(1)),
            rcvbuf: Some(self.client.rcvbuf().unwrap_or(SLOW_CLIENT_RCVBUF)),
            source: None,
        });
        PhaseSpec {
            name: "slow-clients".into(),
            measured: true,
            client_model: client.describe(),
            expected_requests: Some(requests),
            bound: Bound::Requests(requests),
            client,
            class: None,
            rate: None,
            replay: None,
            timing: None,
        }
    }

    /// A measured phase `fast-same-rate` sending `requests` requests from unlimited clients,
    /// open loop at `rate` per second over `-c` connections: the fast reference at another
    /// phase's pace, so that only the clients' speed differs between the two.
    pub fn fast_phase_at_rate(&self, requests: u64, rate: f64) -> PhaseSpec {
        let client = ClientMix::single(ClientModel::default());
        PhaseSpec {
            name: "fast-same-rate".into(),
            measured: true,
            client_model: format!("{}, open loop at {rate:.0} req/s", client.describe()),
            expected_requests: Some(requests),
            bound: Bound::Requests(requests),
            client,
            class: None,
            rate: Some(rate),
            replay: None,
            timing: None,
        }
    }

    /// Whether `phase` replays a log at its logged clients' speeds or times
    /// (`--replay-speeds`, `--replay-timing`): a replay is held against the log afterwards.
    pub fn replays_log(&self, phase: &PhaseSpec) -> bool {
        phase.replay.is_some() || phase.timing.is_some()
    }

    /// The same phase sending only its first `requests` requests (at its rate and clients):
    /// the same work again, shortened where repeating all of it would take too long.
    pub fn repeat_phase(&self, phase: &PhaseSpec, requests: u64) -> PhaseSpec {
        PhaseSpec {
            expected_requests: Some(requests),
            bound: Bound::Requests(requests),
            ..phase.clone()
        }
    }

    /// How long `requests` requests of `phase` take at the pace something other than the server
    /// sets: its open-loop rate, or its clients' bandwidth reading `bytes_per_request` each over
    /// the plan's connections. None for unlimited clients in a closed loop: the server's pace.
    pub fn paced_secs(
        &self,
        phase: &PhaseSpec,
        requests: u64,
        bytes_per_request: f64,
    ) -> Option<f64> {
        let by_rate = phase.rate.map(|rate| requests as f64 / rate);
        let connections = f64::from(self.concurrency.max(1));
        let by_bandwidth = phase
            .client
            .groups
            .iter()
            .filter_map(|(share, m)| {
                let read = share * requests as f64 * bytes_per_request;
                m.bandwidth.map(|b| read / b as f64 / connections)
            })
            .reduce(|a, b| a + b);
        [by_rate, by_bandwidth]
            .into_iter()
            .flatten()
            .reduce(f64::max)
    }

    fn source(&self, phase: &PhaseSpec) -> std::io::Result<Source> {
        match (&self.requests_file, &self.scan) {
            (Some(path), Some(scan)) => Source::open(
                path,
                scan.format,
                self.normalizer.clone(),
                phase
                    .class
                    .and_then(|i| self.classes.get(i))
                    .map(|(_, r)| r.clone()),
                self.sample,
            ),
            _ => Ok(Source::Single(self.single.clone())),
        }
    }

    /// Runs one phase on [`Plan::load_threads`] threads until done or `stop` is set; `progress`
    /// gets the number of finished requests, summed over the threads, as they finish (several
    /// finishing together are reported once), so it must be cheap: an atomic store.
    pub fn run(
        &self,
        phase: &PhaseSpec,
        stop: &AtomicBool,
        progress: &(dyn Fn(u64) + Sync),
    ) -> ClientStats {
        let threads = self.load_threads();
        let parts: std::io::Result<Vec<engine::PhaseRun>> = (0..threads)
            .map(|t| self.phase_part(phase, share(self.concurrency, threads, t)))
            .collect();
        let Ok(parts) = parts else {
            let mut stats = ClientStats::default();
            stats.skipped.insert("requests file unreadable".into(), 1);
            return stats;
        };
        ClientStats {
            load_threads: Some(threads),
            ..engine::run(parts, stop, progress)
        }
    }

    /// Threads a phase runs on: `--threads`, or as many as the CPUs the calling thread may
    /// run on (reqcost pins itself off the server's CPUs first), but no more than connections.
    pub fn load_threads(&self) -> u32 {
        let cpus = || {
            std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(1))
        };
        self.threads
            .unwrap_or_else(cpus)
            .min(self.concurrency)
            .max(1)
    }

    /// One load thread's part of `phase`, with `concurrency` connections.
    fn phase_part(&self, phase: &PhaseSpec, concurrency: u32) -> std::io::Result<engine::PhaseRun> {
        let (limit, duration) = match phase.bound {
            Bound::Requests(n) => (Some(n), None),
            Bound::Duration(d) => (None, Some(d)),
        };
        Ok(engine::PhaseRun {
            clients: phase
                .client
                .groups
                .iter()
                .map(|(share, model)| (*share, self.client_config(model)))
                .collect(),
            source: self.source(phase)?,
            concurrency,
            limit,
            duration,
            rate: phase.rate,
            replay: phase.replay,
            timing: phase.timing,
            request_timeout: self.request_timeout,
        })
    }
}

/// Thread `t`'s share of `total` connections over `threads` threads: as even as can be.
fn share(total: u32, threads: u32, t: u32) -> u32 {
    total / threads + u32::from(t < total % threads)
}

impl Plan {
    fn client_config(&self, model: &ClientModel) -> client::ClientConfig {
        client::ClientConfig {
            protocol: self.endpoint.protocol,
            addr: self.endpoint.addr,
            tls: self
                .tls
                .as_ref()
                .filter(|_| self.quic.is_none())
                .map(|(c, n)| (tokio_rustls::TlsConnector::from(c.clone()), n.clone())),
            quic: self.quic.clone(),
            authority: self.endpoint.authority.clone(),
            keepalive: self.keepalive,
            headers: self.headers.clone(),
            connect_timeout: self.connect_timeout,
            max_response: self.max_response,
            bandwidth: model.bandwidth,
            rcvbuf: model.rcvbuf,
            source: model.source,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::WorkloadOptions;

    fn plan(options: WorkloadOptions) -> Plan {
        options.plan().unwrap()
    }

    #[test]
    fn headers_go_on_the_wire_and_bad_ones_are_refused() {
        let with = |url: &str, headers: &[&str]| {
            WorkloadOptions {
                url: url.into(),
                headers: headers.iter().map(|h| h.to_string()).collect(),
                ..Default::default()
            }
            .plan()
        };
        let p = with("http://127.0.0.1:80/a", &["Accept-Encoding: gzip", "X-A:b"]).unwrap();
        assert_eq!(p.headers, b"Accept-Encoding: gzip\r\nX-A:b\r\n");
        assert_eq!(
            p.describe().options.get("headers").map(String::as_str),
            Some("Accept-Encoding: gzip; X-A:b")
        );
        for bad in ["no colon", ": empty name", "A: b\r\nC: d", "Sp ace: x"] {
            let e = with("http://127.0.0.1:80/a", &[bad]).err().unwrap();
            assert!(e.to_string().contains("'Name: value'"), "{bad}: {e}");
        }
        let e = with("gopher://127.0.0.1:70/", &["A: b"]).err().unwrap();
        assert!(e.to_string().contains("--header needs an http://"), "{e}");
    }

    #[test]
    fn phases_and_description() {
        let p = plan(WorkloadOptions {
            url: "gopher://127.0.0.1:7070/1/menu".into(),
            count: 500,
            concurrency: 4,
            ..Default::default()
        });
        let phases = p.phases();
        let names: Vec<(&str, bool, Option<u64>)> = phases
            .iter()
            .map(|ph| (ph.name.as_str(), ph.measured, ph.expected_requests))
            .collect();
        assert_eq!(
            names,
            [("warmup", false, Some(50)), ("main", true, Some(500))]
        );
        assert_eq!(phases[1].client_model, "unlimited");
        assert_eq!(p.single.target, b"/menu");
        let d = p.describe();
        assert_eq!(
            (
                d.protocol.as_str(),
                d.concurrency,
                d.requests,
                d.warmup_requests
            ),
            ("gopher", 4, Some(500), 50)
        );
        assert_eq!(
            d.options.get("client").map(String::as_str),
            Some("unlimited")
        );

        let p = plan(WorkloadOptions {
            url: "http://127.0.0.1:8080/".into(),
            duration: Some(Duration::from_secs(10)),
            rate: Some(100.0),
            warmup: Some(0),
            ..Default::default()
        });
        let phases = p.phases();
        assert_eq!(phases.len(), 1);
        assert_eq!(phases[0].expected_requests, Some(1000));
        let d = p.describe();
        assert_eq!(
            (d.requests, d.duration_s, d.rate_per_s),
            (None, Some(10.0), Some(100.0))
        );

        let p = plan(WorkloadOptions {
            url: "http://127.0.0.1:8080/".into(),
            client_bandwidth: Some(64 * 1024),
            client_rcvbuf: Some(4 * 1024),
            ..Default::default()
        });
        assert_eq!(
            p.phases()[1].client_model,
            "64 KiB/s per connection, rcvbuf 4 KiB"
        );
        let slow = p.slow_client_phase(20, 1024);
        assert_eq!(slow.client_model, "1 KiB/s per connection, rcvbuf 4 KiB");
        assert_eq!(slow.expected_requests, Some(20));
        let same_rate = p.fast_phase_at_rate(20, 98.4);
        assert_eq!(same_rate.client_model, "unlimited, open loop at 98 req/s");
        assert_eq!(
            (same_rate.rate, same_rate.expected_requests),
            (Some(98.4), Some(20))
        );
    }

    #[test]
    fn client_mix_groups_connect_from_their_own_addresses() {
        let mix = |groups: Vec<(f64, Option<u64>)>| WorkloadOptions {
            url: "gopher://127.0.0.1:7070/".into(),
            client_mix: groups,
            ..Default::default()
        };
        let p = plan(mix(vec![(80.0, None), (20.0, Some(20 * 1024))]));
        assert_eq!(
            p.phases()[1].client_model,
            "80% unlimited from 127.0.0.10 + 20% 20 KiB/s per connection, rcvbuf 8 KiB from 127.0.0.11"
        );
        let e = mix(vec![(80.0, None), (30.0, None)]).plan().err().unwrap();
        assert!(e.to_string().contains("add up to 100 %, not 110 %"), "{e}");
        let mut both = mix(vec![(50.0, None), (50.0, Some(1024))]);
        both.client_bandwidth = Some(1024);
        assert!(both.plan().is_err());
    }

    fn log_file(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("reqcost-plan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    #[test]
    fn replay_needs_what_the_log_must_say() {
        let timed = log_file(
            "timed.log",
            "192.0.2.1 - - [24/Nov/2026:16:00:00 +0000] \"GET /a HTTP/1.1\" 200 100000 0.5\n\
             192.0.2.2 - - [24/Nov/2026:16:00:01 +0000] \"GET /b HTTP/1.1\" 200 10 0.000\n",
        );
        let options = |path: &Path| WorkloadOptions {
            url: "http://127.0.0.1:8080/".into(),
            requests: Some(path.to_path_buf()),
            log_format: Some("%h %l %u %t \"%r\" %>s %b %T".into()),
            replay_speeds: true,
            ..Default::default()
        };
        let p = plan(WorkloadOptions {
            anonymize: true,
            ..options(&timed)
        });
        let names = p.client_names();
        assert_eq!(names.len(), 2);
        assert_eq!(names[0].0, replay::alias(0));
        assert_eq!(names[0].1, replay::client_name(b"192.0.2.1", true));
        assert!(names[0].1.starts_with("client-"), "{names:?}");
        let log = p.describe().log.unwrap();
        assert_eq!((log.requests, log.bytes_mean), (2, Some(50005.0)));

        let untimed = log_file(
            "untimed.log",
            "192.0.2.1 - - [24/Nov/2026:16:00:00 +0000] \"GET /a HTTP/1.1\" 200 100000\n",
        );
        let e = WorkloadOptions {
            log_format: None,
            ..options(&untimed)
        }
        .plan()
        .err()
        .unwrap();
        assert!(e.to_string().contains("logs no request time"), "{e}");
        let e = WorkloadOptions {
            client_mix: vec![(100.0, None)],
            ..options(&timed)
        }
        .plan()
        .err()
        .unwrap();
        assert!(
            e.to_string()
                .contains("drop --client-bandwidth and --client-mix"),
            "{e}"
        );
        let e = WorkloadOptions {
            replay_timing: Some(0.0),
            ..options(&timed)
        }
        .plan()
        .err()
        .unwrap();
        assert!(e.to_string().contains("must be a positive number"), "{e}");
        let timing = plan(WorkloadOptions {
            replay_timing: Some(10.0),
            ..options(&timed)
        });
        assert_eq!(timing.phases().last().unwrap().expected_requests, Some(2));
    }
}
