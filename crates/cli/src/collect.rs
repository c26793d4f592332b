//! The measurement pipeline: target up, probes on, workload phase by phase, snapshots around
//! each measured phase, target down, one run record out.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use reqcost_probes::Probes;
use reqcost_profile::Sampler;
use reqcost_record::{
    Outcome, PerRequest, Phase, RunRecord, Target, TargetMode, FORMAT, FORMAT_VERSION,
};
use reqcost_target::{machine_info, pin_current_thread, plan_pinning, LaunchSpec, Server};
use reqcost_workload::{PhaseSpec, Plan};

use crate::{signals, Failure};

pub enum TargetSpec {
    Launch(Vec<String>),
    Attach(u32),
}

/// One measurement, configured.
pub struct Collect<'a> {
    pub plan: &'a Plan,
    pub target: TargetSpec,
    pub pin: bool,
    pub startup_timeout: Duration,
    /// Show progress bars (only ever drawn on a terminal).
    pub progress: bool,
    /// Follow main with a short slow-client phase.
    pub slow_clients: bool,
    /// Call-chain sampling rate; `None` turns sampling off.
    pub sample_hz: Option<u64>,
    /// Attach the eBPF probes (exact syscall figures, at a CPU cost to the server).
    pub probes: bool,
}

impl Collect<'_> {
    /// Runs the whole pipeline. Errors before the first measured phase are returned as
    /// failures; anything later ends up in the record's outcome, so measured data is never lost.
    pub fn run(&self) -> Result<RunRecord, Failure> {
        signals::install();
        let started = SystemTime::now();
        let launched = matches!(self.target, TargetSpec::Launch(_));
        let pinning = plan_pinning(self.pin, launched);
        // Everything reqcost runs (load generator, probe readers, this loop) stays off the
        // server's CPUs; threads spawned later inherit this.
        if pinning.enabled {
            pin_current_thread(&pinning.client_cpus).map_err(|e| {
                Failure::run(format!(
                    "cannot pin reqcost to CPU {:?}: {e} (use --no-pin)",
                    pinning.client_cpus
                ))
            })?;
        }
        let run_token = format!(
            "reqcost-{}-{}",
            std::process::id(),
            started
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_millis()
        );
        let mut server = match &self.target {
            TargetSpec::Launch(command) => Server::launch(&LaunchSpec {
                command: command.clone(),
                cpus: (!pinning.server_cpus.is_empty()).then(|| pinning.server_cpus.clone()),
                log_path: std::env::temp_dir().join(format!("{run_token}.log")),
                cgroup_name: run_token.clone(),
            }),
            TargetSpec::Attach(pid) => Server::attach(*pid),
        }
        .map_err(Failure::run)?;

        let addr = self.plan.addr();
        if launched {
            server
                .wait_until_accepting(addr, self.startup_timeout)
                .map_err(Failure::run)?;
        } else {
            server
                .wait_until_accepting(addr, Duration::from_secs(1))
                .map_err(|_| {
                    Failure::run(format!(
                        "nothing accepts connections on {addr} (is process {} serving that --url?)",
                        server.pid()
                    ))
                })?;
        }

        let mut notes = Vec::new();
        let probes = if self.probes {
            match Probes::attach(server.pid()) {
                Ok(p) => {
                    notes.push(
                        "eBPF probes on: server CPU includes their cost, about 0.5 µs per \
                         syscall on a 2-CPU VM (bench/RESULTS.md); --no-probes for CPU \
                         figures without it"
                            .into(),
                    );
                    Some(p)
                }
                Err(e) => {
                    eprintln!("warning: eBPF probes off: {e}");
                    notes.push(format!("eBPF probes off: {e}"));
                    None
                }
            }
        } else {
            notes.push("eBPF probes off: --no-probes".into());
            None
        };
        let probe_reason = probes.is_none().then(|| notes.last().cloned()).flatten();
        let sampler = match self.sample_hz.map(|hz| Sampler::start(server.pid(), hz)) {
            Some(Ok(s)) => Some(s),
            Some(Err(e)) => {
                eprintln!("warning: call-chain sampling off: {e}");
                notes.push(format!("call-chain sampling off: {e}"));
                None
            }
            None => None,
        };
        if addr.ip().is_loopback() {
            notes.push(
                "loopback: the kernel delivers each response to the client within the server's \
                 send call, so system CPU includes the receiver's network stack work, and \
                 loopback clients never make the server wait: use --client-bandwidth for \
                 realistic clients"
                    .into(),
            );
        }
        notes.push(format!("server CPU source: {}", server.cpu_source()));

        let mut phases: Vec<Phase> = Vec::new();
        let mut outcome = Outcome::Completed;
        let mut queue: std::collections::VecDeque<PhaseSpec> = self.plan.phases().into();
        while let Some(spec) = queue.pop_front() {
            let before = server.snapshot();
            let kernel_before = probes.as_ref().map(Probes::read);
            let stats = self.drive(spec_label(&spec), &spec, &mut server);
            let after = server.snapshot();
            if spec.measured {
                let (mut totals, mut missing) = after.since(&before);
                match (&probes, kernel_before) {
                    (Some(p), Some(k0)) => totals.kernel = Some(p.read().since(&k0)),
                    _ => {
                        missing.insert("kernel".into(), probe_reason.clone().unwrap_or_default());
                    }
                }
                phases.push(Phase {
                    name: spec.name.clone(),
                    client_model: Some(spec.client_model.clone()),
                    per_request: PerRequest::from_totals(&totals, stats.ok),
                    requests: None,
                    client: stats,
                    server: totals,
                    missing,
                });
            }
            if signals::interrupted() {
                outcome = Outcome::Interrupted;
                break;
            }
            if let Some(exit) = server.exited() {
                outcome = Outcome::ServerDied {
                    detail: format!("{exit} during phase {}", spec.name),
                };
                break;
            }
            if let Some(failure) = failed_main(&phases, &spec) {
                outcome = failure;
                break;
            }
            if spec.name == "main" && self.slow_clients {
                queue.extend(self.slow_phase(phases.last()));
            }
        }
        let comm = server.comm();
        let exit = server.stop(Duration::from_secs(5));
        Ok(RunRecord {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            id: record_id(started, &comm),
            reqcost_version: env!("CARGO_PKG_VERSION").into(),
            started_unix_s: started
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default()
                .as_secs_f64(),
            target: Target {
                mode: if launched {
                    TargetMode::Launch
                } else {
                    TargetMode::Attach
                },
                command: match &self.target {
                    TargetSpec::Launch(c) => Some(c.clone()),
                    TargetSpec::Attach(_) => None,
                },
                pid: server.pid(),
                comm,
                exit,
            },
            workload: self.plan.describe(),
            machine: machine_info(),
            pinning,
            phases,
            profile: sampler.map(Sampler::finish),
            outcome,
            notes,
        })
    }

    /// Runs one phase on a worker thread while this thread watches for a dead server or a
    /// signal, either of which stops the phase early.
    fn drive(
        &self,
        label: String,
        spec: &PhaseSpec,
        server: &mut Server,
    ) -> reqcost_record::ClientStats {
        let stop = AtomicBool::new(false);
        let bar = self.progress_bar(label, spec.expected_requests);
        let progress = |done: u64| bar.set_position(done);
        thread::scope(|s| {
            let worker = s.spawn(|| self.plan.run(spec, &stop, &progress));
            while !worker.is_finished() {
                if signals::interrupted() || server.exited().is_some() {
                    stop.store(true, Ordering::SeqCst);
                }
                thread::sleep(Duration::from_millis(20));
            }
            bar.finish_and_clear();
            worker.join().unwrap_or_default()
        })
    }

    fn progress_bar(&self, label: String, len: Option<u64>) -> ProgressBar {
        if !self.progress {
            return ProgressBar::hidden();
        }
        let bar = match len {
            Some(n) => ProgressBar::new(n).with_style(
                ProgressStyle::with_template(
                    "{prefix:>12} [{bar:30}] {pos}/{len} requests ({per_sec}, {eta})",
                )
                .expect("valid template")
                .progress_chars("=> "),
            ),
            None => ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template(
                    "{prefix:>12} {spinner} {pos} requests ({per_sec}) {elapsed}",
                )
                .expect("valid template"),
            ),
        };
        // indicatif draws only when stderr is a terminal, so scripts and CI see no bars.
        bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(10));
        bar.with_prefix(label)
    }
}

/// Bandwidth of each connection in the default slow-client phase: a distant client on a
/// modest link, slow enough that a response outlives the socket buffers.
const SLOW_CLIENT_BYTES_PER_S: u64 = 64 * 1024;
/// Target length of the slow-client phase, and bounds on its request count.
const SLOW_PHASE_SECS: f64 = 2.0;
const SLOW_PHASE_REQUESTS: (u64, u64) = (4, 200);

impl Collect<'_> {
    /// The short slow-client phase run after main: its cost per request against main's is
    /// what exposes servers that burn CPU while clients drain responses (seeds/000, 002).
    /// None when main already ran with slow clients, or moved nothing.
    fn slow_phase(&self, main: Option<&Phase>) -> Option<PhaseSpec> {
        let main = main.filter(|m| m.name == "main" && m.client.ok > 0)?;
        if main.client_model.as_deref() != Some("unlimited") {
            return None;
        }
        let bytes = main.client.bytes_received as f64 / main.client.ok as f64;
        let per_conn_secs = SLOW_PHASE_SECS * self.plan.describe().concurrency.max(1) as f64;
        let requests = (per_conn_secs * SLOW_CLIENT_BYTES_PER_S as f64 / bytes.max(1.0)) as u64;
        let (lo, hi) = SLOW_PHASE_REQUESTS;
        Some(
            self.plan
                .slow_client_phase(requests.clamp(lo, hi), SLOW_CLIENT_BYTES_PER_S),
        )
    }
}

/// A main phase with no answer, or refused connections, makes the run a failure.
fn failed_main(phases: &[Phase], spec: &PhaseSpec) -> Option<Outcome> {
    let main = phases
        .last()
        .filter(|p| spec.measured && p.name == "main")?;
    (main.client.ok == 0 || main.client.errors.contains_key("refused")).then(|| Outcome::Failed {
        detail: format!(
            "{} of {} requests failed ({})",
            main.client.error_count(),
            main.client.requests,
            error_kinds(&main.client.errors)
        ),
    })
}

fn spec_label(spec: &PhaseSpec) -> String {
    if spec.measured {
        spec.name.clone()
    } else {
        format!("{} (unmeasured)", spec.name)
    }
}

fn error_kinds(errors: &std::collections::BTreeMap<String, u64>) -> String {
    errors
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Turns a record's outcome into the command's exit status and one-line error.
pub fn outcome_result(record: &RunRecord, path: &Path) -> Result<(), Failure> {
    let saved = format!("partial record saved to {}", path.display());
    match &record.outcome {
        Outcome::Completed => Ok(()),
        Outcome::ServerDied { detail } => Err(Failure::run(format!(
            "server died mid-run ({detail}); check its output, {saved}"
        ))),
        Outcome::Interrupted => Err(Failure::run(format!("interrupted; {saved}"))),
        Outcome::Failed { detail } => Err(Failure::run(format!(
            "{detail}: the server stopped accepting or answering on {}; {saved}",
            record.workload.url
        ))),
    }
}

/// Saves one run of a multi-run command (compare, sweep, demo) as `DIR/ID{suffix}.json`. A run
/// that did not complete stops the command, with its partial record saved.
pub fn save_run(
    record: RunRecord,
    dir: &Path,
    suffix: &str,
    what: &str,
) -> Result<RunRecord, Failure> {
    let path = dir.join(format!("{}{suffix}.json", record.id));
    record.save(&path).map_err(|e| {
        Failure::run(format!(
            "cannot save {}: {e} (choose --out-dir)",
            path.display()
        ))
    })?;
    eprintln!("{what}: record {}", path.display());
    match outcome_result(&record, &path) {
        Ok(()) => Ok(record),
        Err(f) => Err(Failure::run(format!("{what}: {}", f.message))),
    }
}

pub fn default_record_path(record: &RunRecord) -> PathBuf {
    let dir = Path::new("reqcost-runs");
    let mut path = dir.join(format!("{}.json", record.id));
    let mut n = 2;
    while path.exists() {
        path = dir.join(format!("{}-{n}.json", record.id));
        n += 1;
    }
    path
}

/// `YYYYMMDD-HHMMSS-comm` in UTC: sortable, and says what was measured.
fn record_id(t: SystemTime, comm: &str) -> String {
    let secs = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    let name: String = comm
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}-{}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        if name.is_empty() { "server" } else { &name }
    )
}

/// Days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (era * 400 + yoe + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_ids_are_dated_and_safe() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_000_000);
        assert_eq!(record_id(t, "my server"), "20261118-110640-my_server");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }
}
