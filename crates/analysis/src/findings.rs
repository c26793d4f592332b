//! The findings catalog: rules that turn a run record into "here is why", each with the numbers
//! that support it, the share of CPU it explains, and a fix hint. Thresholds and their seed
//! stories are explained in docs/findings.md; every rule needs at least two independent signals.

use reqcost_record::{
    FdKind, Frame, GroupCost, IoDirection, KernelStats, Phase, Profile, RequestStats, RunRecord,
};
use serde::{Deserialize, Serialize};

use crate::profile::{self, View};
use crate::requests::{OTHER, SPEED_BUCKETS};

/// A finding explaining at least this share of the server's CPU is major; below, minor.
pub const MAJOR_SHARE: f64 = 0.10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Medium,
    High,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    /// Catalog id: `small-writes`, `busy-wait`, ...
    pub id: String,
    /// One line saying what is wrong.
    pub title: String,
    /// The numbers behind it, with units, from the record.
    pub evidence: Vec<String>,
    /// Estimated share of the server's CPU this explains (0..1), in the phase named by `phase`.
    pub cpu_share: f64,
    /// Phase where the evidence is strongest.
    pub phase: String,
    pub fix: String,
    pub confidence: Confidence,
    /// `cpu_share` ≥ [`MAJOR_SHARE`].
    pub major: bool,
    /// The request classes or clients that carry the cost, where the phase has per-request
    /// accounting: `client 10.0.0.7 (< 16 KiB/s)`, `class /search: 80 % of the phase's CPU`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carriers: Vec<String>,
}

/// Every finding the record supports, the ones explaining most CPU first.
pub fn diagnose(rec: &RunRecord) -> Vec<Finding> {
    let Some(main) = rec.main_phase() else {
        return Vec::new();
    };
    let slow = rec.phases.iter().find(|p| p.name == "slow-clients");
    let same_rate = rec.phases.iter().find(|p| p.name == "fast-same-rate");
    let ctx = Ctx {
        rec,
        main: Facts::of(main),
        slow: slow.map(Facts::of),
        same_rate: same_rate.map(Facts::of),
        profile: rec.profile.as_ref(),
    };
    let rules: [fn(&Ctx) -> Option<Draft>; 12] = [
        small_writes,
        busy_wait,
        |c| client_sensitive_in_phase(c).or_else(|| client_sensitive(c)),
        poll_scaling,
        fs_storm,
        log_per_request,
        copy_heavy,
        nagle,
        tls_handshake,
        conn_per_request,
        kernel_bound,
        alloc_churn,
    ];
    let mut findings: Vec<Finding> = rules
        .iter()
        .filter_map(|rule| rule(&ctx))
        .map(Draft::finish)
        .collect();
    for f in &mut findings {
        f.carriers = carriers(rec, f);
    }
    findings.sort_by(|a, b| {
        b.cpu_share
            .total_cmp(&a.cpu_share)
            .then(b.confidence.cmp(&a.confidence))
            .then(a.id.cmp(&b.id))
    });
    findings
}

/// Rules that could not be judged on a record, and why: the figures they read were not taken.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Unevaluated {
    pub rules: Vec<&'static str>,
    pub reason: String,
}

/// Rules that read the eBPF probes' figures (syscalls, bytes, waits, per-request accounting).
const KERNEL_RULES: &[&str] = &[
    "small-writes",
    "busy-wait",
    "client-sensitive",
    "poll-scaling",
    "fs-storm",
    "log-per-request",
    "nagle",
    "tls-handshake",
    "conn-per-request",
    "kernel-bound",
    "alloc-churn",
];
/// Rules that read sampled call chains.
const PROFILE_RULES: &[&str] = &["copy-heavy", "tls-handshake"];

/// The rules [`diagnose`] could not judge on `rec`, so that "no finding" is not read as "nothing
/// wrong" when the probes or the sampler were off.
pub fn unevaluated(rec: &RunRecord) -> Vec<Unevaluated> {
    let Some(main) = rec.main_phase() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let no_kernel = main.server.kernel.is_none();
    if no_kernel {
        let why = main
            .missing
            .get("kernel")
            .filter(|w| !w.is_empty())
            .map_or("the record has no eBPF figures", String::as_str);
        out.push(Unevaluated {
            rules: KERNEL_RULES.to_vec(),
            reason: format!("they read the eBPF probes' syscall counts: {why}"),
        });
    }
    let thin = match &rec.profile {
        None => Some("no call chains were sampled (--no-sample, or the sampler failed)".into()),
        Some(p) if p.samples < PROFILE_MIN_SAMPLES => Some(format!(
            "the profile has {} samples, under the {PROFILE_MIN_SAMPLES} they need (--duration, --freq)",
            p.samples
        )),
        Some(_) => None,
    };
    if let Some(reason) = thin {
        let rules: Vec<&str> = PROFILE_RULES
            .iter()
            .copied()
            .filter(|r| !(no_kernel && KERNEL_RULES.contains(r)))
            .collect();
        out.push(Unevaluated {
            rules,
            reason: format!("they read sampled call chains: {reason}"),
        });
    }
    out
}

struct Ctx<'a> {
    rec: &'a RunRecord,
    main: Facts<'a>,
    slow: Option<Facts<'a>>,
    /// Fast clients at the slow phase's request rate: its reference, where the record has it.
    same_rate: Option<Facts<'a>>,
    profile: Option<&'a Profile>,
}

/// Per-request views of one phase.
struct Facts<'a> {
    phase: &'a Phase,
    kernel: Option<&'a KernelStats>,
    ok: f64,
    cpu_ns: Option<f64>,
}

impl<'a> Facts<'a> {
    fn of(phase: &'a Phase) -> Facts<'a> {
        Facts {
            phase,
            kernel: phase.server.kernel.as_ref(),
            ok: phase.units(),
            cpu_ns: phase.server.cpu.as_ref().map(|c| c.total_ns as f64),
        }
    }

    fn usable(&self) -> bool {
        self.ok >= 1.0
    }

    /// Calls per request of the named syscalls.
    fn calls(&self, names: &[&str]) -> f64 {
        self.sum(names, |s| s.count)
    }

    /// Nanoseconds per request spent inside the named syscalls (wall time in the call).
    fn time_ns(&self, names: &[&str]) -> f64 {
        self.sum(names, |s| s.time_ns)
    }

    fn errno(&self, names: &[&str], errno: &str) -> f64 {
        self.sum(names, |s| {
            s.errnos
                .iter()
                .filter(|e| e.errno == errno)
                .map(|e| e.count)
                .sum()
        })
    }

    fn sum(&self, names: &[&str], f: impl Fn(&reqcost_record::SyscallStat) -> u64) -> f64 {
        let Some(k) = self.kernel else { return 0.0 };
        k.syscalls
            .iter()
            .filter(|s| names.contains(&s.name.as_str()))
            .map(f)
            .sum::<u64>() as f64
            / self.ok
    }

    /// (calls, bytes) per request of write- or read-like calls on one kind of fd.
    fn io(&self, dir: IoDirection, kind: FdKind) -> (f64, f64) {
        let Some(k) = self.kernel else {
            return (0.0, 0.0);
        };
        let (calls, bytes) = k.io_total(dir, kind);
        (calls as f64 / self.ok, bytes as f64 / self.ok)
    }

    /// Bytes per request that reached the client: what the load generator received, or, when
    /// reqcost sent nothing (attach) or the server had other clients too (`run --pid`), what
    /// the server wrote on its sockets.
    fn bytes_out(&self) -> f64 {
        if self.phase.client.requests > 0 && self.phase.other_traffic.is_none() {
            self.phase.client.bytes_received as f64 / self.ok
        } else {
            self.io(IoDirection::Write, FdKind::Socket).1
        }
    }

    fn cpu_us(&self) -> Option<f64> {
        self.phase.per_request.cpu_total_us
    }

    fn system_share(&self) -> Option<f64> {
        let c = self.phase.server.cpu.as_ref()?;
        (c.total_ns > 0).then(|| c.system_ns as f64 / c.total_ns as f64)
    }

    /// Share of this phase's CPU that `ns_per_request` of work stands for.
    fn share(&self, ns_per_request: f64) -> f64 {
        match self.cpu_ns {
            Some(cpu) if cpu > 0.0 => (ns_per_request * self.ok / cpu).clamp(0.0, 1.0),
            _ => 0.0,
        }
    }
}

struct Draft {
    id: &'static str,
    title: String,
    evidence: Vec<String>,
    cpu_share: f64,
    phase: String,
    fix: &'static str,
    /// Independent signals that agreed; rules return nothing with fewer than two.
    signals: usize,
}

impl Draft {
    fn finish(self) -> Finding {
        Finding {
            id: self.id.into(),
            title: self.title,
            evidence: self.evidence,
            cpu_share: self.cpu_share,
            phase: self.phase,
            fix: self.fix.into(),
            confidence: if self.signals >= 3 {
                Confidence::High
            } else {
                Confidence::Medium
            },
            major: self.cpu_share >= MAJOR_SHARE,
            carriers: Vec::new(),
        }
    }
}

const WRITE_CALLS: &[&str] = &[
    "write", "writev", "pwrite64", "pwritev", "pwritev2", "send", "sendto", "sendmsg", "sendmmsg",
];
const STAT_CALLS: &[&str] = &[
    "stat",
    "lstat",
    "newfstatat",
    "statx",
    "access",
    "faccessat",
    "faccessat2",
    "readlink",
    "readlinkat",
];
const OPEN_CALLS: &[&str] = &["open", "openat", "openat2"];
const SYNC_CALLS: &[&str] = &["fsync", "fdatasync", "sync_file_range"];
const MEM_CALLS: &[&str] = &["mmap", "munmap", "brk", "mremap"];

/// seeds/001: a response written in many small pieces, each a syscall.
fn small_writes(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    if !f.usable() {
        return None;
    }
    let (calls, bytes) = f.io(IoDirection::Write, FdKind::Socket);
    let mean = if calls > 0.0 { bytes / calls } else { 0.0 };
    // Signal 1: many socket writes per request; signal 2: each carries little data.
    if calls < 8.0 || mean >= 1024.0 {
        return None;
    }
    let mut signals = 2;
    if mean < 256.0 {
        signals += 1;
    }
    // One write per 64 KiB would do; the rest is overhead.
    let needed = (bytes / 65536.0).ceil().max(1.0);
    let wasted = f.time_ns(WRITE_CALLS) * (1.0 - needed / calls).max(0.0);
    Some(Draft {
        id: "small-writes",
        title: format!(
            "{calls:.0} socket writes per request of {mean:.0} B each: the response goes out in tiny pieces"
        ),
        evidence: vec![
            format!("{calls:.1} write-like calls on sockets per request"),
            format!("{mean:.0} B per call on average, {bytes:.0} B per request"),
            format!(
                "{:.1} µs per request inside write-like syscalls",
                f.time_ns(WRITE_CALLS) / 1000.0
            ),
        ],
        cpu_share: f.share(wasted),
        phase: f.phase.name.clone(),
        fix: "buffer the response in user space and write it with one write/writev (or sendfile); \
              on sockets, cork (TCP_CORK/MSG_MORE) while assembling",
        signals,
    })
}

/// seeds/002: polling the send queue and bouncing epoll interest until the peer has read.
fn busy_wait(ctx: &Ctx) -> Option<Draft> {
    // The pathology shows most when clients are slow: judge the slow phase when there is one.
    let f = ctx
        .slow
        .as_ref()
        .filter(|s| s.usable())
        .unwrap_or(&ctx.main);
    if !f.usable() || f.kernel.is_none() {
        return None;
    }
    let k = f.kernel?;
    let ioctl: u64 = k.ioctls.iter().map(|i| i.count).sum();
    let outq: u64 = k
        .ioctls
        .iter()
        .filter(|i| i.name.as_deref().is_some_and(|n| n.contains("OUTQ")))
        .map(|i| i.count)
        .sum();
    let ioctl = ioctl as f64 / f.ok;
    let outq = outq as f64 / f.ok;
    let mods = k.epoll_ctl.modify as f64 / f.ok;
    let wakeups = k.sched.wakeups as f64 / f.ok;
    let waits: f64 = k.waits.iter().map(|w| w.returns).sum::<u64>() as f64 / f.ok;
    let mut evidence = Vec::new();
    let mut signals = 0;
    if ioctl >= 3.0 {
        signals += 1;
        evidence.push(format!(
            "{ioctl:.1} ioctl calls per request ({outq:.1} of them SIOCOUTQ: polling the send queue)"
        ));
    }
    if mods >= 3.0 {
        signals += 1;
        evidence.push(format!(
            "{mods:.1} epoll_ctl(MOD) per request: interest bounced"
        ));
    }
    if waits >= 10.0 || wakeups >= 10.0 {
        signals += 1;
        evidence.push(format!(
            "{waits:.1} readiness-wait returns and {wakeups:.1} wakeups per request for {:.0} B sent",
            f.bytes_out()
        ));
    }
    let growth = client_growth(ctx);
    if let Some((ratio, main_us, slow_us)) = growth.filter(|(r, _, _)| *r >= 2.0) {
        signals += 1;
        evidence.push(format!(
            "CPU per request {main_us:.1} µs with fast clients, {slow_us:.1} µs with slow ones ({ratio:.1}x)"
        ));
    }
    let contrast = SpeedContrast::of(f.phase).filter(|c| c.ratio() >= 2.0);
    if let (None, Some(c)) = (growth.filter(|(r, _, _)| *r >= 2.0), &contrast) {
        signals += 1;
        evidence.push(c.cpu_evidence());
    }
    if signals < 2 || (ioctl < 3.0 && mods < 3.0) {
        return None;
    }
    let share = match growth {
        Some((ratio, _, _)) if ratio > 1.0 && f.phase.name == "slow-clients" => 1.0 - 1.0 / ratio,
        _ => contrast.map_or_else(|| loop_share(f, ioctl + mods, waits), |c| c.excess_share()),
    };
    Some(Draft {
        id: "busy-wait",
        title: "the server spins on the kernel while clients drain their responses (send-queue polling, epoll churn)".into(),
        evidence,
        cpu_share: share,
        phase: f.phase.name.clone(),
        fix: "after writing, wait for EPOLLOUT (or just close/shutdown and let the kernel finish \
              sending); never poll SIOCOUTQ or toggle epoll interest in a loop",
        signals,
    })
}

/// Share of the phase's CPU that a send-queue loop of `churn` ioctl and epoll_ctl(MOD) calls and
/// `waits` readiness-wait returns per request stands for, when no fast-client figure says what a
/// request costs without it. The time measured inside ioctl and epoll_ctl misses most of the
/// loop: each iteration's kernel entry and exit, its wait and the user code between calls (33 %
/// for a loop that was 99.5 % of the CPU). A loop that does nothing else is its syscalls, so it
/// counts for its share of the phase's calls (waits beyond one per request being the loop's),
/// never less than the time inside them.
fn loop_share(f: &Facts, churn: f64, waits: f64) -> f64 {
    let calls = f.kernel.map_or(0.0, |k| k.total_syscalls() as f64 / f.ok);
    let looping = churn + (waits - 1.0).max(0.0);
    let by_calls = if calls > 0.0 {
        (looping / calls).min(1.0)
    } else {
        0.0
    };
    by_calls.max(f.share(f.time_ns(&["ioctl", "epoll_ctl"])))
}

/// (slow/main CPU ratio, main µs, slow µs) when both phases have CPU per request.
fn client_growth(ctx: &Ctx) -> Option<(f64, f64, f64)> {
    let main = ctx.main.cpu_us()?;
    let slow = ctx.slow.as_ref()?.cpu_us()?;
    (main > 0.0).then(|| (slow / main, main, slow))
}

/// seeds/000: CPU per request depends on how fast clients read; loopback replays hide it.
/// The slow phase is held against fast clients at its own request rate (`fast-same-rate`), so
/// that only the clients' speed differs: against a saturated main phase, the wake-ups a server
/// idle between requests pays would pass for slow-client cost. Records without that phase are
/// held against main, and the evidence says so.
fn client_sensitive(ctx: &Ctx) -> Option<Draft> {
    let slow = ctx.slow.as_ref()?;
    let (fast, reference) = match &ctx.same_rate {
        Some(r) => (
            r,
            format!(
                "fast clients at the slow phase's request rate ({}: {}), so only the clients' speed differs",
                r.phase.name,
                client_model(r)
            ),
        ),
        None => (
            &ctx.main,
            "fast clients from main: this record has no fast-same-rate phase, and main's load \
             differs from the slow phase's, so part of the difference may be idle wake-ups at low load"
                .to_string(),
        ),
    };
    let (fast_us, slow_us) = (fast.cpu_us()?, slow.cpu_us()?);
    if fast_us <= 0.0 {
        return None;
    }
    let ratio = slow_us / fast_us;
    // Signal 1: CPU per request grows markedly; signal 2: the kernel work (syscalls) grows too,
    // so it is the server's behaviour that changed, not noise.
    if ratio < 1.5 || slow_us - fast_us < 5.0 {
        return None;
    }
    let (sf, ss) = (request_syscalls(fast)?, request_syscalls(slow)?);
    if ss < sf * 1.3 {
        return None;
    }
    Some(Draft {
        id: "client-sensitive",
        title: format!(
            "CPU per request is {ratio:.1}x higher when clients read slowly: a loopback benchmark underestimates production"
        ),
        evidence: vec![
            format!("CPU per request: {fast_us:.1} µs with fast clients, {slow_us:.1} µs with slow clients ({})", client_model(slow)),
            format!("syscalls per request beyond connection set-up and teardown: {sf:.1} fast, {ss:.1} slow"),
            reference,
        ],
        cpu_share: 1.0 - 1.0 / ratio,
        phase: slow.phase.name.clone(),
        fix: "find what the server does while a response is in flight (see busy-wait); measure with \
              --client-bandwidth to reproduce production costs",
        signals: 2,
    })
}

fn client_model<'a>(f: &Facts<'a>) -> &'a str {
    f.phase.client_model.as_deref().unwrap_or("unknown clients")
}

/// Syscalls per request beyond those every connection costs once: its accept, the listener's
/// wakeup, epoll_ctl ADD/DEL, the end-of-stream read, shutdown and close. A short phase with
/// many connections opens about one per request where a long one amortizes them; that is not
/// the server behaving differently.
fn request_syscalls(f: &Facts) -> Option<f64> {
    let k = f.kernel?;
    let total = k.total_syscalls();
    let accepted = k.sockets.accepted;
    let eof_reads: u64 =
        k.io.iter()
            .filter(|s| s.direction == IoDirection::Read && s.fd_kind == FdKind::Socket)
            .flat_map(|s| &s.sizes)
            .filter(|b| b.max_bytes == 0)
            .map(|b| b.count)
            .sum();
    let wait_returns: u64 = k.waits.iter().map(|w| w.returns).sum();
    let per_connection = accepted
        + k.sockets.closed
        + k.epoll_ctl.add
        + k.epoll_ctl.delete
        + eof_reads
        + wait_returns.min(accepted)
        + k.syscalls
            .iter()
            .filter(|s| s.name == "shutdown")
            .map(|s| s.count)
            .sum::<u64>();
    Some(total.saturating_sub(per_connection) as f64 / f.ok)
}

/// seeds/004: select()/poll() over every connection, each call scanning them all.
fn poll_scaling(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let scans: Vec<_> = k
        .waits
        .iter()
        .filter(|w| matches!(w.syscall.as_str(), "select" | "pselect6" | "poll" | "ppoll"))
        .collect();
    let returns: u64 = scans.iter().map(|w| w.returns).sum();
    if returns == 0 {
        return None;
    }
    let asked: u64 = scans.iter().map(|w| w.fds_asked).sum();
    let ready: u64 = scans.iter().map(|w| w.ready).sum();
    let fds_per_call = asked as f64 / returns as f64;
    let ready_ratio = ready as f64 / asked.max(1) as f64;
    // Signal 1: each call hands the kernel many fds; signal 2: few of them are ever ready.
    if fds_per_call < 16.0 || ready_ratio > 0.25 {
        return None;
    }
    let calls = returns as f64 / f.ok;
    let scanned = asked as f64 / f.ok;
    let from_profile = ctx.profile.and_then(|p| {
        profile_share(p, |name| {
            name.contains("do_select")
                || name.contains("do_sys_poll")
                || name.contains("core_sys_select")
        })
    });
    // Without stacks: about 50 ns of kernel work per fd scanned.
    let share = from_profile.unwrap_or_else(|| f.share(scanned * 50.0));
    let names: Vec<&str> = scans.iter().map(|w| w.syscall.as_str()).collect();
    let estimated = ctx.profile.filter(|_| from_profile.is_none()).map(|p| {
        format!(
            "CPU share estimated at 50 ns per fd scanned: {}",
            unsampled(p, "do_select/do_sys_poll")
        )
    });
    Some(Draft {
        id: "poll-scaling",
        title: format!(
            "{} scans {fds_per_call:.0} fds per call to find {:.1} ready: cost grows with connections",
            names.join("/"),
            ready as f64 / returns as f64
        ),
        evidence: [
            format!("{calls:.1} {} calls per request", names.join("/")),
            format!("{fds_per_call:.0} fds asked per call, {:.1} % ready", ready_ratio * 100.0),
            format!("{scanned:.0} fds scanned per request"),
        ]
        .into_iter()
        .chain(estimated)
        .chain(ctx.profile.and_then(kernel_split_evidence))
        .collect(),
        cpu_share: share,
        phase: f.phase.name.clone(),
        fix: "use epoll (or io_uring), whose cost follows ready events rather than open connections",
        signals: 2 + usize::from(from_profile.is_some_and(|s| s >= 0.05)),
    })
}

/// seeds/003: a directory walk per request, stat-ing and opening paths, many of them missing.
fn fs_storm(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    if !f.usable() || f.kernel.is_none() {
        return None;
    }
    let lookups = f.calls(STAT_CALLS) + f.calls(OPEN_CALLS);
    let enoent = f.errno(STAT_CALLS, "ENOENT") + f.errno(OPEN_CALLS, "ENOENT");
    // Signal 1: many path lookups per request; signal 2: many fail with ENOENT.
    if lookups < 6.0 || enoent < 2.0 {
        return None;
    }
    let ns = f.time_ns(STAT_CALLS) + f.time_ns(OPEN_CALLS);
    Some(Draft {
        id: "fs-storm",
        title: format!(
            "{lookups:.0} path lookups per request, {enoent:.0} of them for files that do not exist"
        ),
        evidence: vec![
            format!(
                "{:.1} stat-family and {:.1} open calls per request",
                f.calls(STAT_CALLS),
                f.calls(OPEN_CALLS)
            ),
            format!("{enoent:.1} ENOENT per request"),
            format!("{:.1} µs per request inside them", ns / 1000.0),
        ],
        cpu_share: f.share(ns),
        phase: f.phase.name.clone(),
        fix:
            "cache per-directory lookups (e.g. Apache: AllowOverride None), resolve paths once at \
              startup, keep file descriptors open",
        signals: 2 + usize::from(enoent >= 5.0),
    })
}

/// seeds/003: an open/write/fsync/close "log transaction" per request.
fn log_per_request(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    if !f.usable() || f.kernel.is_none() {
        return None;
    }
    let (file_writes, _) = f.io(IoDirection::Write, FdKind::File);
    let syncs = f.calls(SYNC_CALLS);
    let opens = f.calls(OPEN_CALLS);
    let closes = f
        .kernel
        .map_or(0.0, |k| k.sockets.other_closes as f64 / f.ok);
    // Signal 1: a file write on every request. Signal 2: it is synced, or the file is opened
    // and closed around it (more opens and closes than serving one file needs).
    if file_writes < 0.9 {
        return None;
    }
    let reopened = opens >= 1.8 && closes >= 1.8;
    if syncs < 0.5 && !reopened {
        return None;
    }
    let ns = f.time_ns(SYNC_CALLS)
        + f.time_ns(&["write", "pwrite64", "writev"])
            .min(f.time_ns(WRITE_CALLS))
            * (file_writes / (file_writes + f.io(IoDirection::Write, FdKind::Socket).0).max(1.0))
        + if reopened {
            f.time_ns(OPEN_CALLS) / 2.0 + f.time_ns(&["close"]) / 2.0
        } else {
            0.0
        };
    let mut evidence = vec![format!(
        "{file_writes:.1} writes to regular files per request"
    )];
    if syncs >= 0.5 {
        evidence.push(format!(
            "{syncs:.1} fsync/fdatasync per request ({:.0} µs each, the request waits for the disk)",
            f.time_ns(SYNC_CALLS) / 1000.0 / syncs
        ));
    }
    if reopened {
        evidence.push(format!(
            "{opens:.1} opens and {closes:.1} file closes per request"
        ));
    }
    let title = match (reopened, syncs >= 0.5) {
        (true, true) => "every request opens, writes and syncs a log file",
        (true, false) => "every request opens, writes and closes a log file (no fsync seen)",
        _ => "every request writes and syncs a log file (kept open: no open per request seen)",
    };
    Some(Draft {
        id: "log-per-request",
        title: title.into(),
        evidence,
        cpu_share: f.share(ns),
        phase: f.phase.name.clone(),
        fix: "keep the log open and buffer lines (write every N requests or every second); sync \
              periodically, not per request",
        signals: 1 + usize::from(syncs >= 0.5) + usize::from(reopened),
    })
    .filter(|d| d.signals >= 2)
}

/// Samples a profile needs before a rule takes a share from it.
const PROFILE_MIN_SAMPLES: u64 = 50;

/// Total share of the profile in chains passing through a function matching `pred` (self and
/// callees alike), when there are enough samples to judge and some chain passes there. None
/// matching says nothing about the share: the profile may lack kernel frames or their names, so
/// a rule estimates it some other way rather than claim 0 %.
fn profile_share(p: &Profile, pred: impl Fn(&str) -> bool) -> Option<f64> {
    let matching = profile::total_samples(p, |f| pred(&f.function));
    (p.samples >= PROFILE_MIN_SAMPLES && matching > 0).then(|| matching as f64 / p.samples as f64)
}

/// Why a share could not be taken from a profile, for the rule's evidence: without this line a
/// reader would take the estimate for a measured share.
fn unsampled(p: &Profile, frames: &str) -> String {
    if p.samples < PROFILE_MIN_SAMPLES {
        format!(
            "the profile has only {} samples (under {PROFILE_MIN_SAMPLES})",
            p.samples
        )
    } else {
        format!("no sampled chain passes through {frames} (kernel frames missing?)")
    }
}

/// Where in the kernel the sampled CPU went, as `CPU samples: kernel 62 %: network send 30 %,
/// ...`, from a profile large enough for shares ([`profile_share`]'s bound).
fn kernel_split_evidence(p: &Profile) -> Option<String> {
    let split = profile::kernel_split(p).filter(|_| p.samples >= PROFILE_MIN_SAMPLES)?;
    Some(format!("CPU samples: {}", split.describe()))
}

/// Self share of the samples whose innermost user frame matches `pred`: kernel frames a copy or
/// a cipher trapped into count for the user function that caused them.
fn user_self_share(p: &Profile, pred: impl Fn(&Frame) -> bool) -> f64 {
    profile::self_samples(p, View::User, pred) as f64 / p.samples.max(1) as f64
}

/// The most common user-space caller chains (three callers each) of the samples whose innermost
/// user frame matches `pred`, chains naming the same functions counted as one, with the samples
/// of every chain whose nearest caller is resolved. A caller known only as `binary+0x...` does
/// not say who copies, so its chains are left out.
fn user_callers(p: &Profile, pred: impl Fn(&Frame) -> bool) -> (Vec<(String, u64)>, u64) {
    let mut named: std::collections::BTreeMap<String, u64> = Default::default();
    for (chain, n) in profile::callers(p, View::User, pred, 3) {
        if chain.first().is_some_and(|f| f.resolved) {
            let names: Vec<&str> = chain.iter().map(|f| f.function.as_str()).collect();
            *named.entry(names.join(" ← ")).or_default() += n;
        }
    }
    let resolved = named.values().sum();
    let mut callers: Vec<(String, u64)> = named.into_iter().collect();
    callers.sort_by_key(|c| std::cmp::Reverse(c.1));
    callers.truncate(3);
    (callers, resolved)
}

/// seeds/003: memcpy on top of the profile; the callers say who copies.
fn copy_heavy(ctx: &Ctx) -> Option<Draft> {
    let p = ctx.profile?;
    let is_copy = |f: &Frame| profile::is_copy_function(&f.function);
    let (share, (callers, resolved)) = (user_self_share(p, is_copy), user_callers(p, is_copy));
    let hits = share * p.samples as f64;
    // Signal 1: copies are a large share of all CPU samples; signal 2: enough of those samples
    // (±22 % relative error at 20), with resolved callers, that it is not a sampling accident.
    if share < 0.10 || resolved < 20 {
        return None;
    }
    let mut evidence = vec![format!(
        "{:.1} % of CPU samples in memcpy/memmove ({hits:.0} of {})",
        share * 100.0,
        p.samples
    )];
    for (chain, n) in &callers {
        evidence.push(format!("called from {chain} ({n} samples)"));
    }
    Some(Draft {
        id: "copy-heavy",
        title: format!(
            "{:.0} % of CPU copies memory; the callers below do it",
            share * 100.0
        ),
        evidence,
        cpu_share: share,
        phase: ctx.main.phase.name.clone(),
        fix: "pass buffers by reference (iovecs, writev, sendfile, splice) instead of assembling \
              copies; cache the assembled response",
        signals: 2 + usize::from(share >= 0.25),
    })
}

/// seeds/001: small writes meet delayed ACKs, and responses stall for 40 ms.
fn nagle(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    if !f.usable() {
        return None;
    }
    let c = &f.phase.client;
    let stalled: u64 = c
        .latency_histogram
        .iter()
        .filter(|b| (35_000..=60_000).contains(&b.le_us) || (190_000..=260_000).contains(&b.le_us))
        .map(|b| b.count)
        .sum();
    let stalled_share = stalled as f64 / c.ok.max(1) as f64;
    let (writes, bytes) = f.io(IoDirection::Write, FdKind::Socket);
    // Signal 1: a cluster of latencies at the delayed-ACK timeouts; signal 2: several small
    // socket writes per request, the pattern Nagle holds back.
    if stalled_share < 0.2 || writes < 2.0 || bytes / writes >= 1448.0 {
        return None;
    }
    Some(Draft {
        id: "nagle",
        title: format!(
            "{:.0} % of requests stall ~40 ms: small writes held back by Nagle's algorithm until the delayed ACK",
            stalled_share * 100.0
        ),
        evidence: vec![
            format!("{stalled} of {} requests took 35–60 ms or 190–260 ms (p50 {:.1} ms)", c.ok, c.latency.p50_us / 1000.0),
            format!("{writes:.1} socket writes of {:.0} B per request", bytes / writes),
        ],
        cpu_share: 0.0,
        phase: f.phase.name.clone(),
        fix: "send each response with one write (writev), or set TCP_NODELAY",
        signals: 2,
    })
}

/// Code of a TLS library (distro builds are stripped: their internal functions, where the bignum
/// and cipher work happens, only show as `libcrypto.so.3+0x...`, so the module says it), or a
/// crypto routine by name (statically linked: ring, Go's crypto/..., BoringSSL...).
fn is_crypto(frame: &Frame) -> bool {
    const LIBRARIES: &[&str] = &[
        "libcrypto",
        "libssl",
        "libgnutls",
        "libnettle",
        "libhogweed",
        "libgcrypt",
        "libmbedcrypto",
        "libmbedtls",
        "libwolfssl",
        "libs2n",
    ];
    const MARKERS: &[&str] = &[
        "aes",
        "sha256",
        "sha512",
        "sha1_",
        "x25519",
        "ecdsa",
        "ecp_nistz",
        "p256",
        "p384",
        "rsa",
        "bn_",
        "BN_",
        "EVP_",
        "chacha",
        "poly1305",
        "gcm",
        "ossl_",
        "mbedtls",
        "gnutls",
        "nettle",
        "curve25519",
        "ring_core",
        "montgomery",
        "mont_",
        "crypto/",
    ];
    let module = frame.module.rsplit('/').next().unwrap_or_default();
    LIBRARIES.iter().any(|l| module.starts_with(l))
        || MARKERS.iter().any(|m| frame.function.contains(m))
}

/// Crypto dominates because every request pays for a full handshake.
fn tls_handshake(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let p = ctx.profile.filter(|p| p.samples >= PROFILE_MIN_SAMPLES)?;
    let w = &ctx.rec.workload;
    if !f.usable() || !matches!(w.protocol.as_str(), "gemini" | "https") {
        return None;
    }
    // Self time only: samples whose innermost user frame is crypto. Counting every chain that
    // passes through the TLS library would also count the socket writes it makes.
    let share = user_self_share(p, is_crypto);
    let accepts = f.kernel.map(|k| k.sockets.accepted as f64 / f.ok)?;
    // Signal 1: crypto is a large share of CPU; signal 2: about one connection, so one
    // handshake, per request.
    if share < 0.25 || accepts < 0.9 {
        return None;
    }
    let offered = w.options.get("tls-resumption").is_some_and(|v| v == "true");
    let c = &f.phase.client;
    let resumed = c
        .tls_resumed
        .filter(|_| offered && c.connections > 0)
        .map(|r| r as f64 / c.connections as f64);
    // A server that resumes sessions already does what can be done for a protocol that closes
    // per request (or a client that does): the crypto left is the floor, not a full handshake.
    if resumed.is_some_and(|r| r >= 0.5) {
        return None;
    }
    // Signal 3: the client offered resumption and the server would not take it.
    let refused = resumed.is_some_and(|r| r < 0.1);
    Some(Draft {
        id: "tls-handshake",
        title: format!(
            "{:.0} % of CPU is TLS crypto: a full handshake on every request",
            share * 100.0
        ),
        evidence: vec![
            format!("{:.1} % of CPU samples in crypto code", share * 100.0),
            format!("{accepts:.2} connections accepted per request"),
            match resumed {
                Some(r) => format!(
                    "the client offered session resumption; {:.0} % of {} handshakes resumed",
                    r * 100.0,
                    c.connections
                ),
                None if offered => "the client offered session resumption".into(),
                None => "the client did not offer session resumption (--no-tls-resume)".into(),
            },
        ],
        cpu_share: share,
        phase: f.phase.name.clone(),
        fix: "enable TLS session tickets/resumption and keep-alive; prefer ECDSA certificates and \
              X25519 key exchange",
        signals: 2 + usize::from(refused),
    })
}

/// A connection per request on a protocol that can keep them alive.
fn conn_per_request(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let w = &ctx.rec.workload;
    // Gopher, Gemini and raw TCP close after each response by design; only HTTP can reuse.
    let keepalive_asked = matches!(w.protocol.as_str(), "http" | "https")
        && w.options.get("keepalive").is_none_or(|v| v != "false");
    if !keepalive_asked {
        return None;
    }
    let accepts = k.sockets.accepted as f64 / f.ok;
    let client_conns = f.phase.client.connections as f64 / f.ok;
    // Signal 1: the server accepts a connection per request; signal 2: the client, which
    // asked for keep-alive, had to open one per request too, so the server closed them.
    if accepts < 0.5 || client_conns < 0.5 {
        return None;
    }
    let ns = f.time_ns(&["accept", "accept4", "close", "shutdown", "epoll_ctl"])
        + f.time_ns(&["setsockopt", "getsockname"]);
    Some(Draft {
        id: "conn-per-request",
        title: format!(
            "{accepts:.2} connections per request although the client asked for keep-alive"
        ),
        evidence: vec![
            format!(
                "{accepts:.2} accepts and {:.2} socket closes per request",
                k.sockets.closed as f64 / f.ok
            ),
            format!(
                "the client opened {client_conns:.2} connections per request with keep-alive on"
            ),
        ],
        cpu_share: f.share(ns),
        phase: f.phase.name.clone(),
        fix: "honour HTTP/1.1 keep-alive (Connection header, Content-Length or chunked bodies) \
              so clients reuse connections",
        signals: 2,
    })
}

/// seeds/004: system time dominates, spent in per-packet network stack work.
fn kernel_bound(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    // Tiny writes are the more specific explanation of the same kernel time.
    if small_writes(ctx).is_some() {
        return None;
    }
    let system = f.system_share()?;
    let syscalls = k.total_syscalls() as f64 / f.ok;
    let (wc, wb) = f.io(IoDirection::Write, FdKind::Socket);
    let (rc, rb) = f.io(IoDirection::Read, FdKind::Socket);
    let socket_calls = wc + rc;
    let per_call = (wb + rb) / socket_calls.max(1e-9);
    // Signal 1: system time dominates; signal 2: many socket reads/writes per request, each
    // moving little (per-packet work; path lookups or logging are other rules' business);
    // signal 3 (when sampled): the network stack tops the profile.
    if system < 0.75 || socket_calls < 30.0 || per_call >= 2048.0 {
        return None;
    }
    let net = ctx.profile.and_then(|p| {
        profile_share(p, |n| {
            n.starts_with("tcp_")
                || n.starts_with("ip_")
                || n.starts_with("__dev_queue")
                || n.starts_with("net_rx")
                || n.starts_with("udp_")
                || n.starts_with("__netif")
        })
    });
    Some(Draft {
        id: "kernel-bound",
        title: format!(
            "{:.0} % of CPU is in the kernel: {socket_calls:.0} socket reads/writes per request moving {per_call:.0} B each",
            system * 100.0
        ),
        evidence: [
            Some(format!("system time {:.0} % of CPU", system * 100.0)),
            Some(format!("{socket_calls:.1} socket reads/writes per request moving {per_call:.0} B each, of {syscalls:.1} syscalls")),
            net.map(|s| format!("{:.0} % of CPU samples in the network stack", s * 100.0)),
            ctx.profile.filter(|_| net.is_none()).map(|p| {
                format!(
                    "CPU share estimated as half the system time: {}",
                    unsampled(p, "the network stack (tcp_*, ip_*, udp_*, ...)")
                )
            }),
            ctx.profile.and_then(kernel_split_evidence),
        ]
        .into_iter()
        .flatten()
        .collect(),
        cpu_share: net.unwrap_or(system * 0.5),
        phase: f.phase.name.clone(),
        fix: "batch: fewer, larger syscalls (writev, sendmmsg/recvmmsg, GSO/GRO for UDP), or \
              move the data path out of per-packet syscalls (io_uring, sendfile)",
        signals: 2 + usize::from(net.is_some_and(|s| s >= 0.3)),
    })
}

/// Memory mapped and unmapped, and fresh pages faulted in, on every request.
fn alloc_churn(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let maps = f.calls(MEM_CALLS);
    let faults = k.memory.page_faults_user as f64 / f.ok;
    let mapped = k.memory.mmap_bytes as f64 / f.ok;
    // Signal 1: mmap/munmap/brk on (nearly) every request; signal 2: large mappings (≥ 64 KiB a
    // request) or many fresh pages faulted in, so it is not the odd small allocation.
    if maps < 0.9 || (mapped < 65536.0 && faults < 8.0) {
        return None;
    }
    // A minor fault with a page zeroed costs about 0.5 µs.
    let ns = f.time_ns(MEM_CALLS) + faults * 500.0;
    Some(Draft {
        id: "alloc-churn",
        title: format!("{maps:.1} mmap/munmap/brk and {faults:.0} page faults per request: memory is mapped anew each time"),
        evidence: vec![
            format!("{:.1} mmap, {:.1} munmap, {:.1} brk per request", f.calls(&["mmap"]), f.calls(&["munmap"]), f.calls(&["brk"])),
            format!("{faults:.0} user page faults per request ({:.0} KiB mapped per request)", k.memory.mmap_bytes as f64 / f.ok / 1024.0),
        ],
        cpu_share: f.share(ns),
        phase: f.phase.name.clone(),
        fix: "reuse buffers across requests (a pool or per-connection arena); raise \
              M_MMAP_THRESHOLD / M_TRIM_THRESHOLD so glibc keeps large blocks",
        signals: 2 + usize::from(faults >= 8.0 && mapped >= 65536.0),
    })
}

/// Slow clients' CPU per request at least this many times fast clients' in one phase.
pub const IN_PHASE_CONTRAST: f64 = 10.0;
/// Requests each side of the contrast needs, so that one odd request does not make it.
pub const MIN_SIDE_REQUESTS: u64 = 10;
/// Slow clients: speed buckets below 256 KiB/s; fast ones: from 1 MiB/s. The bucket between
/// is on neither side, so that the two stand clearly apart.
const SLOW_BELOW: u64 = 256 * 1024;
const FAST_FROM: u64 = 1024 * 1024;

/// seeds/000 and 002 inside one phase: the same traffic, slow clients' requests cost many
/// times fast ones'. From per-request accounting, in the phase where the excess is largest.
fn client_sensitive_in_phase(ctx: &Ctx) -> Option<Draft> {
    let c = ctx
        .rec
        .phases
        .iter()
        .filter_map(SpeedContrast::of)
        .filter(|c| c.ratio() >= IN_PHASE_CONTRAST)
        .max_by(|a, b| a.excess_share().total_cmp(&b.excess_share()))?;
    // Signal 1: CPU per request far above; signal 2: the server made twice the syscalls for
    // them, so its own work grew, not only the time it computed; signal 3: they moved as much
    // data, so they asked for the same kind of response.
    let (slow_calls, fast_calls) = (
        c.slow.mean(|g| g.syscalls_per_request),
        c.fast.mean(|g| g.syscalls_per_request),
    );
    if slow_calls < 2.0 * fast_calls {
        return None;
    }
    let (slow_out, fast_out) = (
        c.slow.mean(|g| g.bytes_out_per_request),
        c.fast.mean(|g| g.bytes_out_per_request),
    );
    Some(Draft {
        id: "client-sensitive",
        title: format!(
            "requests of slow clients cost {:.0}x those of fast ones in the same traffic: a loopback benchmark underestimates production",
            c.ratio()
        ),
        evidence: vec![
            c.cpu_evidence(),
            format!("syscalls per request: {fast_calls:.1} fast, {slow_calls:.1} slow"),
            format!("bytes out per request: {fast_out:.0} fast, {slow_out:.0} slow"),
        ]
        .into_iter()
        .chain(c.slow.describe().into_iter().map(|d| format!("slow clients, {d}")))
        .collect(),
        cpu_share: c.excess_share(),
        phase: c.phase.to_string(),
        fix: "find what the server does while a response is in flight (see busy-wait); measure \
              with --client-mix to reproduce production costs",
        signals: 2 + usize::from(slow_out >= 0.5 * fast_out),
    })
}

/// A phase's slow-client requests against its fast-client ones (`unknown` speed on neither side).
struct SpeedContrast<'a> {
    phase: &'a str,
    stats: &'a RequestStats,
    slow: SpeedSide<'a>,
    fast: SpeedSide<'a>,
}

impl<'a> SpeedContrast<'a> {
    fn of(phase: &'a Phase) -> Option<SpeedContrast<'a>> {
        let stats = phase.requests.as_ref()?;
        // A bucket's bounds: (from, below) bytes per second.
        let bounds = SPEED_BUCKETS.iter().scan(0, |from, b| {
            Some((b.label, std::mem::replace(from, b.below), b.below))
        });
        let side = |pick: fn(u64, u64) -> bool| SpeedSide {
            buckets: stats
                .by_speed
                .iter()
                .filter(|g| {
                    bounds
                        .clone()
                        .any(|(label, from, below)| label == g.name && pick(from, below))
                })
                .collect(),
        };
        let slow = side(|_, below| below <= SLOW_BELOW);
        let fast = side(|from, _| from >= FAST_FROM);
        let enough = |s: &SpeedSide| s.requests() >= MIN_SIDE_REQUESTS;
        (enough(&slow) && enough(&fast) && fast.cpu_ns() > 0.0).then_some(SpeedContrast {
            phase: &phase.name,
            stats,
            slow,
            fast,
        })
    }

    /// Mean CPU per request, slow over fast: CPU adds up, so the mean is what the server pays.
    fn ratio(&self) -> f64 {
        self.slow.cpu_ns() / self.fast.cpu_ns()
    }

    /// Share of the phase's CPU the slow requests cost beyond what fast ones would have.
    fn excess_share(&self) -> f64 {
        let total = self.stats.attributed_cpu_ns + self.stats.unattributed_cpu_ns;
        let extra = self.slow.requests() as f64 * (self.slow.cpu_ns() - self.fast.cpu_ns());
        if total == 0 {
            0.0
        } else {
            (extra / total as f64).clamp(0.0, 1.0)
        }
    }

    fn cpu_evidence(&self) -> String {
        format!(
            "CPU per request {:.1} µs over {} requests of fast clients (≥ 1 MiB/s), {:.1} µs over {} of slow clients ({}): {:.0}x, in phase {}",
            self.fast.cpu_ns() / 1000.0,
            self.fast.requests(),
            self.slow.cpu_ns() / 1000.0,
            self.slow.requests(),
            self.slow.labels(),
            self.ratio(),
            self.phase
        )
    }
}

/// Speed buckets taken together.
struct SpeedSide<'a> {
    buckets: Vec<&'a GroupCost>,
}

impl SpeedSide<'_> {
    fn requests(&self) -> u64 {
        self.buckets.iter().map(|g| g.requests).sum()
    }

    /// The side's mean of a per-request figure, each bucket weighted by its requests.
    fn mean(&self, f: impl Fn(&GroupCost) -> f64) -> f64 {
        let weighted: f64 = self.buckets.iter().map(|g| f(g) * g.requests as f64).sum();
        weighted / self.requests().max(1) as f64
    }

    fn cpu_ns(&self) -> f64 {
        self.mean(|g| g.cpu_per_request.mean)
    }

    fn labels(&self) -> String {
        let labels: Vec<&str> = self.buckets.iter().map(|g| g.name.as_str()).collect();
        labels.join(", ")
    }

    /// Each bucket with the clients in it: `< 16 KiB/s: 10.0.0.7, 10.0.0.9`.
    fn describe(&self) -> Vec<String> {
        self.buckets
            .iter()
            .map(|g| format!("{} ({} requests): {}", g.name, g.requests, clients_of(g)))
            .collect()
    }
}

fn clients_of(g: &GroupCost) -> String {
    if g.clients.is_empty() {
        "clients not recorded".into()
    } else {
        g.clients.join(", ")
    }
}

/// The classes or clients that carry a finding's cost in its phase. For client-speed findings
/// with an in-phase contrast: the slow clients. Otherwise the classes that hold most of the
/// phase's CPU, or of its syscalls for the rules whose evidence is syscalls.
fn carriers(rec: &RunRecord, f: &Finding) -> Vec<String> {
    let Some(phase) = rec.phases.iter().find(|p| p.name == f.phase) else {
        return Vec::new();
    };
    let Some(stats) = phase.requests.as_ref() else {
        return Vec::new();
    };
    let contrast = SpeedContrast::of(phase).filter(|c| c.ratio() >= 2.0);
    match contrast {
        Some(c) if matches!(f.id.as_str(), "client-sensitive" | "busy-wait") => c
            .slow
            .buckets
            .iter()
            .flat_map(|g| {
                g.clients
                    .iter()
                    .map(move |ip| format!("client {ip} ({})", g.name))
            })
            .collect(),
        _ if matches!(
            f.id.as_str(),
            "copy-heavy" | "tls-handshake" | "poll-scaling"
        ) =>
        {
            top_classes(stats, "CPU", |g| g.cpu_ns as f64)
        }
        _ => top_classes(stats, "syscalls", |g| {
            g.syscalls_per_request * g.requests as f64
        }),
    }
}

/// Up to three classes holding at least 5 % of the phase's `what`, the largest first.
fn top_classes(
    stats: &RequestStats,
    what: &str,
    weight: impl Fn(&GroupCost) -> f64,
) -> Vec<String> {
    let total: f64 = stats.by_class.iter().map(&weight).sum();
    let mut classes: Vec<(&GroupCost, f64)> = stats
        .by_class
        .iter()
        .filter(|g| g.name != OTHER)
        .map(|g| (g, weight(g) / total.max(f64::MIN_POSITIVE)))
        .filter(|(_, share)| *share >= 0.05)
        .collect();
    classes.sort_by(|a, b| b.1.total_cmp(&a.1));
    classes
        .iter()
        .take(3)
        .map(|(g, share)| {
            format!(
                "class {}: {:.0} % of the phase's {what}",
                g.name,
                share * 100.0
            )
        })
        .collect()
}
