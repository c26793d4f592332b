//! How a phase's CPU was measured when the probes ran only part of it: probed and unprobed
//! windows, and the scaling that turns the probed windows' counts into the phase's.

use serde::{Deserialize, Serialize};

use crate::requests::is_zero;
use crate::{GroupCost, KernelStats, NsDistribution, RequestStats};

/// Where a phase's CPU figures come from.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum CpuMethod {
    /// CPU per request from the windows without probes (free of their cost); syscalls, bytes
    /// and per-request figures from the probed windows, scaled to the phase's requests.
    UnprobedWindows,
    /// A phase too short for unprobed windows: CPU per request from a second, unprobed pass of
    /// the same work (`unprobed`: the same requests again, or the first of them when repeating
    /// all would take long); syscalls, bytes and per-request figures from the probed pass,
    /// exact.
    UnprobedPass,
    /// CPU per request from the probed windows: it includes the probes' cost (`--probes-full-time`,
    /// or a phase too short for unprobed windows whose unprobed pass could not be used).
    Probed,
    /// `attach --duty`: counts from the probed windows scaled to the whole window (sampled);
    /// CPU is the whole window's, with the probes' cost of the probed part.
    Sampled,
}

impl CpuMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            CpuMethod::UnprobedWindows => "unprobed-windows",
            CpuMethod::UnprobedPass => "unprobed-pass",
            CpuMethod::Probed => "probed",
            CpuMethod::Sampled => "sampled",
        }
    }
}

/// Probed and unprobed windows of one phase and what came out of them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CpuWindows {
    pub method: CpuMethod,
    /// Why this method, in one line.
    pub reason: String,
    /// Windows of each kind added up.
    pub probed: WindowTotals,
    pub unprobed: WindowTotals,
    /// Factor applied to the probed windows' counts (kernel figures, per-request accounting)
    /// to cover the whole phase: its requests over the probed windows' (1 when nothing was
    /// scaled).
    pub count_scale: f64,
    /// Requests in flight at a pause, never reported by per-request accounting (at most one
    /// per open connection per pause; docs/request-attribution.md).
    pub requests_cut: u64,
    /// With `--load`: how much work the command's unprobed second run did next to its probed
    /// run, which scales the requests the probes counted to the pass's (`unprobed.requests`
    /// is then that estimate, not a count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_work: Option<PassWork>,
    /// Requests `run`'s unprobed pass sent, its warm-up included, whether its CPU was used or
    /// not, or a `--load` command's second run served (`unprobed.requests`, when it was used):
    /// the call-chain sampler ran through them as through the phase's (0 without a pass, and
    /// in records from before it was kept).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pass_requests: u64,
    /// `attach --budget`: what the probes cost in the probed windows and the duty kept so that
    /// the cost stays within the budget.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<ProbeBudget>,
}

/// `attach --budget`: the probes' cost to the server's tree as reqcost measured it while
/// attached, and the duty it set each cycle to keep that cost within a share of the server's
/// CPU. The fraction of the time probed is [`CpuWindows::probed_fraction`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct ProbeBudget {
    /// The budget: the probes' cost over the server's CPU without them, as a fraction.
    pub budget: f64,
    /// The least duty the controller sets (the probes always see some of the traffic).
    pub min_duty: f64,
    /// Duty cycles run, and the least and greatest duty set over them.
    pub cycles: u32,
    pub duty_low: f64,
    pub duty_high: f64,
    /// The slow syscall path a program on a syscall tracepoint turns on, per syscall: not in
    /// the programs' run time. Its interval, and how it was measured (`trap_source`).
    pub trap_ns: f64,
    pub trap_interval_ns: [f64; 2],
    pub trap_source: String,
    /// The tree's syscalls in the probed windows.
    pub syscalls: u64,
    /// The probes' accounted cost in the probed windows, in three parts: the programs' run
    /// time on the tree's events (`probe_cost.tree_ns`), the trap (`syscalls` times
    /// `trap_ns`), and the uretprobe syscalls of TLS return probes (`probe_cost.uretprobe_ns`).
    pub program_ns: u64,
    pub syscall_trap_ns: u64,
    pub uretprobe_ns: u64,
    /// Their sum.
    pub accounted_ns: u64,
    /// The bytes the tree's TCP sockets received in the probed and in the unprobed windows
    /// (sock_diag): the work both kinds of window did, without the probes to count requests.
    pub probed_bytes: u64,
    pub unprobed_bytes: u64,
    /// The cost as on/off turns measure it, summed over the cycles that had bytes in both
    /// kinds of window: each cycle's probed windows' CPU beyond what their bytes cost in its
    /// unprobed ones. None before three such cycles (UDP, full duty, a short window).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_ns: Option<u64>,
    /// Its interval: two standard errors of the cycles' spread either side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_interval_ns: Option<[u64; 2]>,
    /// The cost: `accounted_ns`, raised by the ratio of the measured interval's low end to
    /// the accounted cost of the same cycles where that is above 1.
    pub cost_ns: u64,
    /// The tree's CPU over the whole window, the probes' cost in it.
    pub server_cpu_ns: u64,
    /// The achieved cost: `cost_ns` over the server's CPU without it (`server_cpu_ns -
    /// cost_ns`), and its interval: from the least to the greatest of the accounted cost
    /// (with the trap's interval), `cost_ns` and the measured interval's high end.
    pub cost_share: f64,
    pub cost_share_interval: [f64; 2],
    /// What the probes would have cost at `min_duty` over the whole window: above the
    /// budget, the budget could not hold.
    pub floor_share: f64,
}

impl ProbeBudget {
    /// By how much the budget could not hold (the probes' cost at the least duty over it),
    /// None when it held.
    pub fn over_by(&self) -> Option<f64> {
        (self.floor_share > self.budget).then_some(self.floor_share - self.budget)
    }
}

/// The work of a `--load` command's two runs, measured the same way without the probes: the
/// server tree's read/write-family calls and their bytes as the kernel keeps them per process
/// (/proc/PID/io, reaped children included).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PassWork {
    /// Calls (`syscr` + `syscw`) in the probed run and in the unprobed pass.
    pub probed_calls: u64,
    pub pass_calls: u64,
    /// Bytes (`rchar` + `wchar`) in each.
    pub probed_bytes: u64,
    pub pass_bytes: u64,
    /// The pass's work over the probed run's, by calls: its requests are about the probed
    /// run's times this.
    pub factor: f64,
}

impl PassWork {
    /// The same factor by bytes: it agrees with the calls' when each request is read and
    /// written alike in both runs.
    pub fn bytes_factor(&self) -> f64 {
        self.pass_bytes as f64 / self.probed_bytes.max(1) as f64
    }
}

/// Windows of one kind (probed or not), added up.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct WindowTotals {
    pub windows: u32,
    /// Requests finished in them: the load generator's count, or, when attached (no load
    /// generator), the requests the probes counted (in unprobed windows only those counted
    /// while the probes paused or re-attached).
    pub requests: u64,
    pub elapsed_s: f64,
    /// The server tree's CPU over them (cgroup or schedstat, as `server.cpu`).
    pub cpu_ns: u64,
    pub user_ns: u64,
    pub system_ns: u64,
}

impl WindowTotals {
    pub fn cpu_per_request_us(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.cpu_ns as f64 / 1000.0 / self.requests as f64)
    }

    /// Adds one window.
    pub fn add(&mut self, requests: u64, elapsed_s: f64, cpu: &crate::CpuTimes) {
        self.windows += 1;
        self.extend_last(requests, elapsed_s, cpu);
    }

    /// Adds a stretch to the last window.
    pub fn extend_last(&mut self, requests: u64, elapsed_s: f64, cpu: &crate::CpuTimes) {
        self.requests += requests;
        self.elapsed_s += elapsed_s;
        self.cpu_ns += cpu.total_ns;
        self.user_ns += cpu.user_ns;
        self.system_ns += cpu.system_ns;
    }
}

impl CpuWindows {
    /// Share of the phase's time the probes were attached.
    pub fn probed_fraction(&self) -> f64 {
        let all = self.probed.elapsed_s + self.unprobed.elapsed_s;
        if all > 0.0 {
            self.probed.elapsed_s / all
        } else {
            1.0
        }
    }

    /// CPU per request with the probes over CPU per request without: their cost as a ratio,
    /// when both kinds of window finished requests.
    pub fn probe_cost_ratio(&self) -> Option<f64> {
        let unprobed = self.unprobed.cpu_per_request_us().filter(|u| *u > 0.0)?;
        Some(self.probed.cpu_per_request_us()? / unprobed)
    }
}

fn scale(v: u64, f: f64) -> u64 {
    (v as f64 * f).round() as u64
}

fn scale_each<const N: usize>(counts: [&mut u64; N], f: f64) {
    for c in counts {
        *c = scale(*c, f);
    }
}

impl KernelStats {
    /// Every count multiplied by `f` (rounded): the figures of the probed windows made to cover
    /// a whole phase. Changes of the tree (forks, exits) and lost events are counted whether
    /// the probes are paused or not, so they stay.
    pub fn scaled(&self, f: f64) -> KernelStats {
        let mut k = self.clone();
        for s in &mut k.syscalls {
            s.count = scale(s.count, f);
            s.time_ns = scale(s.time_ns, f);
            s.errors = scale(s.errors, f);
            s.errnos
                .iter_mut()
                .for_each(|e| e.count = scale(e.count, f));
        }
        for io in &mut k.io {
            io.calls = scale(io.calls, f);
            io.bytes = scale(io.bytes, f);
            io.sizes
                .iter_mut()
                .for_each(|b| b.count = scale(b.count, f));
        }
        k.ioctls
            .iter_mut()
            .for_each(|i| i.count = scale(i.count, f));
        let e = &mut k.epoll_ctl;
        scale_each([&mut e.add, &mut e.modify, &mut e.delete, &mut e.other], f);
        for w in &mut k.waits {
            scale_each(
                [
                    &mut w.returns,
                    &mut w.zero_ready,
                    &mut w.ready,
                    &mut w.fds_asked,
                ],
                f,
            );
        }
        let s = &mut k.sched;
        scale_each(
            [
                &mut s.wakeups,
                &mut s.voluntary_switches,
                &mut s.involuntary_switches,
                &mut s.runqueue_waits,
                &mut s.runqueue_delay_ns,
            ],
            f,
        );
        s.runqueue_histogram
            .iter_mut()
            .for_each(|b| b.count = scale(b.count, f));
        let m = &mut k.memory;
        scale_each(
            [
                &mut m.page_faults_user,
                &mut m.page_faults_kernel,
                &mut m.mmap_bytes,
                &mut m.munmap_bytes,
            ],
            f,
        );
        let so = &mut k.sockets;
        scale_each([&mut so.accepted, &mut so.closed, &mut so.other_closes], f);
        k.opened
            .iter_mut()
            .for_each(|o| o.count = scale(o.count, f));
        k
    }
}

impl crate::Phase {
    /// The part of `count`, one of the phase's counts scaled to the whole phase by
    /// `count_scale`, that the probed windows counted: what a figure seen only while the probes
    /// were attached stands for, such as their own cost or the call-chain samples tagged with
    /// a request (a sample taken while they are paused is untagged). `count` itself when
    /// nothing was scaled.
    pub fn probed_part(&self, count: f64) -> f64 {
        match &self.cpu_windows {
            Some(w) if w.count_scale > 0.0 => count / w.count_scale,
            _ => count,
        }
    }

    /// Scales the phase's per-request accounting by `count` (the probed windows' counts made
    /// the phase's) and to its CPU figures, measured apart: each tree's shares kept of its own
    /// CPU, the target's of `server.cpu`, each upstream hop's of its tree's, and the target's
    /// parts at a hop (`by_hop`) by that hop's factor, so that they stay the hop's linked CPU
    /// (docs/stack.md).
    pub fn scale_requests_to_cpu(&mut self, count: f64) {
        let hops: Vec<(u8, f64)> = self
            .hops
            .iter()
            .map(|h| (h.hop, cpu_factor(h.requests.as_ref(), h.cpu.as_ref())))
            .collect();
        let front = cpu_factor(self.requests.as_ref(), self.server.cpu.as_ref());
        let hop_cpu = |hop: u8| {
            hops.iter()
                .find(|(h, _)| *h == hop)
                .map_or(1.0, |(_, f)| *f)
        };
        if let Some(r) = self.requests.as_mut() {
            *r = r.scaled_stack(count, front, &hop_cpu);
        }
        for hop in &mut self.hops {
            if let Some(r) = hop.requests.as_mut() {
                *r = r.scaled(count, hop_cpu(hop.hop));
            }
        }
    }
}

/// What a tree's per-request accounting is multiplied by to add up to `cpu`: attributed +
/// unattributed less what was held from before the phase, as the cpu-total invariant adds
/// them. 1 without either.
fn cpu_factor(requests: Option<&RequestStats>, cpu: Option<&crate::CpuTimes>) -> f64 {
    let (Some(r), Some(cpu)) = (requests, cpu) else {
        return 1.0;
    };
    let tree_ns =
        (r.attributed_cpu_ns + r.unattributed_cpu_ns).saturating_sub(r.held_before_cpu_ns);
    if tree_ns > 0 {
        cpu.total_ns as f64 / tree_ns as f64
    } else {
        1.0
    }
}

impl RequestStats {
    /// The probed windows' requests made to cover a whole phase: counts multiplied by `count`,
    /// CPU totals by `cpu` (so every group keeps its share), and each request's CPU by
    /// `cpu / count`. Averages per request (syscalls, bytes) stay; dropped events stay, as
    /// counted, and so do the requests in flight at the end (each one real, read once).
    pub fn scaled(&self, count: f64, cpu: f64) -> RequestStats {
        self.scaled_stack(count, cpu, &|_| cpu)
    }

    /// [`RequestStats::scaled`] of the front's figures of a stack (docs/stack.md), whose
    /// upstream hops' parts (`by_hop`, the costliest's hops) are each hop's CPU, scaled by
    /// that hop's tree's factor `hop_cpu(hop)`, as the hop's own figures are: the front's
    /// factor is its own tree's. Each part across the stack is the sum of its scaled parts,
    /// and the costliest across the stack are ranked again.
    pub fn scaled_stack(&self, count: f64, cpu: f64, hop_cpu: &dyn Fn(u8) -> f64) -> RequestStats {
        let per_request = cpu / count;
        let group = |g: &GroupCost| {
            let cpu_ns = scale(g.cpu_ns, cpu);
            let by_hop: Vec<crate::HopCost> = g
                .by_hop
                .iter()
                .map(|h| h.scaled(count, hop_cpu(h.hop)))
                .collect();
            GroupCost {
                requests: scale(g.requests, count),
                no_request: scale(g.no_request, count),
                cpu_ns,
                in_flight_cpu_ns: scale(g.in_flight_cpu_ns, cpu),
                cpu_per_request: g.cpu_per_request.scaled(per_request),
                stack_cpu_ns: if by_hop.is_empty() {
                    scale(g.stack_cpu_ns, cpu)
                } else {
                    cpu_ns + by_hop.iter().map(|h| h.cpu_ns).sum::<u64>()
                },
                by_hop,
                ..g.clone()
            }
        };
        let groups = |gs: &[GroupCost]| gs.iter().map(group).collect();
        // The handshakes' CPU scaled by kind and summed, so full + resumed still add up to the
        // total where every kind is known (rounding each figure apart broke that by 1 ns).
        let (full_cpu, resumed_cpu) = (
            scale(self.tls_full_handshake_cpu_ns, cpu),
            scale(self.tls_resumed_handshake_cpu_ns, cpu),
        );
        let unknown_kind_cpu = self
            .tls_handshake_cpu_ns
            .saturating_sub(self.tls_full_handshake_cpu_ns + self.tls_resumed_handshake_cpu_ns);
        RequestStats {
            requests: scale(self.requests, count),
            connections: scale(self.connections, count),
            no_request: scale(self.no_request, count),
            attributed_cpu_ns: scale(self.attributed_cpu_ns, cpu),
            unattributed_cpu_ns: scale(self.unattributed_cpu_ns, cpu),
            unserved_cpu_ns: scale(self.unserved_cpu_ns, cpu),
            exit_cpu_ns: scale(self.exit_cpu_ns, cpu),
            cpu_reading_skew_ns: scale(self.cpu_reading_skew_ns, cpu),
            held_before_cpu_ns: scale(self.held_before_cpu_ns, cpu),
            tallied_cpu_ns: scale(self.tallied_cpu_ns, cpu),
            in_flight_cpu_ns: scale(self.in_flight_cpu_ns, cpu),
            cpu_per_request: self.cpu_per_request.scaled(per_request),
            by_class: groups(&self.by_class),
            by_client: groups(&self.by_client),
            by_speed: groups(&self.by_speed),
            costliest: self
                .costliest
                .iter()
                .map(|c| crate::CostlyRequest {
                    cpu_ns: scale(c.cpu_ns, per_request),
                    ..c.clone()
                })
                .collect(),
            classes_over_cap: scale(self.classes_over_cap, count),
            clients_over_cap: scale(self.clients_over_cap, count),
            tls_ciphertext: scale(self.tls_ciphertext, count),
            http2_connections: scale(self.http2_connections, count),
            http2_unnamed: scale(self.http2_unnamed, count),
            http2_lost: scale(self.http2_lost, count),
            tls_handshakes: scale(self.tls_handshakes, count),
            tls_handshake_cpu_ns: full_cpu + resumed_cpu + scale(unknown_kind_cpu, cpu),
            tls_resumed_handshakes: scale(self.tls_resumed_handshakes, count),
            tls_resumed_handshake_cpu_ns: resumed_cpu,
            tls_full_handshakes: scale(self.tls_full_handshakes, count),
            tls_full_handshake_cpu_ns: full_cpu,
            setup_turns: scale(self.setup_turns, count),
            setup_cpu_ns: scale(self.setup_cpu_ns, cpu),
            unparsed_requests: scale(self.unparsed_requests, count),
            pipelined_turns: scale(self.pipelined_turns, count),
            upstream_calls: scale(self.upstream_calls, count),
            upstream_call_cpu_ns: scale(self.upstream_call_cpu_ns, cpu),
            stack_costliest: {
                let mut costly: Vec<crate::CostlyStackRequest> = self
                    .stack_costliest
                    .iter()
                    .map(|c| c.scaled(count, per_request, hop_cpu))
                    .collect();
                costly.sort_by_key(|c| std::cmp::Reverse(c.stack_cpu_ns));
                costly
            },
            front_links: self.front_links.as_ref().map(|l| l.scaled(count, cpu)),
            ..self.clone()
        }
    }
}

impl crate::HopCost {
    /// As [`RequestStats::scaled`] scales its class's figures.
    fn scaled(&self, count: f64, cpu: f64) -> crate::HopCost {
        crate::HopCost {
            cpu_ns: scale(self.cpu_ns, cpu),
            requests: scale(self.requests, count),
            classes: self
                .classes
                .iter()
                .map(|c| crate::HopClass {
                    requests: scale(c.requests, count),
                    cpu_ns: scale(c.cpu_ns, cpu),
                    ..c.clone()
                })
                .collect(),
            ..self.clone()
        }
    }
}

impl crate::CostlyStackRequest {
    /// Its own CPU by `per_request`, as a costly request's; each hop's part by that hop's
    /// factor `hop_cpu(hop)` over `count`; across the stack, their sum.
    fn scaled(
        &self,
        count: f64,
        per_request: f64,
        hop_cpu: &dyn Fn(u8) -> f64,
    ) -> crate::CostlyStackRequest {
        let cpu_ns = scale(self.cpu_ns, per_request);
        let hops: Vec<crate::CostlyHop> = self
            .hops
            .iter()
            .map(|h| crate::CostlyHop {
                cpu_ns: scale(h.cpu_ns, hop_cpu(h.hop) / count),
                ..h.clone()
            })
            .collect();
        crate::CostlyStackRequest {
            cpu_ns,
            stack_cpu_ns: cpu_ns + hops.iter().map(|h| h.cpu_ns).sum::<u64>(),
            hops,
            ..self.clone()
        }
    }
}

impl crate::FrontLinks {
    /// Counts by `count`, CPU by `cpu`; the dropped links stay, as counted.
    fn scaled(&self, count: f64, cpu: f64) -> crate::FrontLinks {
        crate::FrontLinks {
            linked_requests: scale(self.linked_requests, count),
            linked_cpu_ns: scale(self.linked_cpu_ns, cpu),
            own_requests: scale(self.own_requests, count),
            own_cpu_ns: scale(self.own_cpu_ns, cpu),
            unlinked_requests: scale(self.unlinked_requests, count),
            unlinked_cpu_ns: scale(self.unlinked_cpu_ns, cpu),
            links_dropped: self.links_dropped,
        }
    }
}

impl NsDistribution {
    fn scaled(&self, f: f64) -> NsDistribution {
        NsDistribution {
            mean: self.mean * f,
            p50: scale(self.p50, f),
            p90: scale(self.p90, f),
            p99: scale(self.p99, f),
            max: scale(self.max, f),
            stddev: self.stddev.map(|s| s * f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn group(name: &str, requests: u64, cpu_ns: u64, share: f64) -> GroupCost {
        GroupCost {
            name: name.into(),
            requests,
            cpu_ns,
            cpu_share_pct: share,
            cpu_per_request: NsDistribution {
                mean: cpu_ns as f64 / requests as f64,
                p50: cpu_ns / requests,
                ..NsDistribution::default()
            },
            syscalls_per_request: 9.0,
            ..GroupCost::default()
        }
    }

    /// The paths opened are counted as the opens are: a phase whose probed pass served half its
    /// requests still opens its log once per request (nginx with a log path per host got no
    /// log-per-request when only its opens were scaled).
    #[test]
    fn scaled_opens_keep_their_paths_counts() {
        let k = KernelStats {
            syscalls: vec![crate::SyscallStat {
                name: "openat".into(),
                count: 1047,
                ..crate::SyscallStat::default()
            }],
            opened: vec![crate::OpenedPath {
                path: "logs/127.0.0.1.log".into(),
                count: 1047,
            }],
            ..KernelStats::default()
        };
        let s = k.scaled(2000.0 / 1047.0);
        assert_eq!(s.syscalls[0].count, 2000);
        assert_eq!(s.opened[0].count, 2000);
    }

    /// Full and resumed handshakes' CPU still add up to the handshakes' CPU once scaled, by a
    /// factor that rounds each of them up or down.
    #[test]
    fn scaled_handshakes_keep_their_sum() {
        let stats = RequestStats {
            tls_handshakes: 30,
            tls_handshake_cpu_ns: 10_131_682,
            tls_full_handshakes: 1,
            tls_full_handshake_cpu_ns: 2_731_845,
            tls_resumed_handshakes: 29,
            tls_resumed_handshake_cpu_ns: 7_399_837,
            ..RequestStats::default()
        };
        for cpu in [1.1998, 1.2, 0.8333, 1.5] {
            let s = stats.scaled(1.0, cpu);
            assert_eq!(
                s.tls_full_handshake_cpu_ns + s.tls_resumed_handshake_cpu_ns,
                s.tls_handshake_cpu_ns,
                "factor {cpu}"
            );
        }
    }

    /// Shares and per-request averages survive scaling; totals follow the factors.
    #[test]
    fn scaled_requests_keep_their_shares() {
        let stats = RequestStats {
            requests: 100,
            attributed_cpu_ns: 800_000,
            unattributed_cpu_ns: 200_000,
            by_class: vec![group("a", 60, 600_000, 60.0), group("b", 40, 200_000, 20.0)],
            ..RequestStats::default()
        };
        let s = stats.scaled(3.0, 2.4);
        assert_eq!(s.requests, 300);
        assert_eq!(s.attributed_cpu_ns + s.unattributed_cpu_ns, 2_400_000);
        let share = |g: &GroupCost| {
            g.cpu_ns as f64 * 100.0 / (s.attributed_cpu_ns + s.unattributed_cpu_ns) as f64
        };
        for (before, after) in stats.by_class.iter().zip(&s.by_class) {
            assert_eq!(after.cpu_share_pct, before.cpu_share_pct);
            assert!((share(after) - before.cpu_share_pct).abs() < 1e-9);
            assert_eq!(after.requests, before.requests * 3);
            assert_eq!(after.syscalls_per_request, 9.0);
        }
        // 10 µs per request at 3x the requests and 2.4x the CPU: 8 µs.
        assert_eq!(s.by_class[0].cpu_per_request.p50, 8_000);
    }

    #[test]
    fn probe_cost_ratio_and_fraction() {
        let totals = |requests, elapsed_s, cpu_ns| WindowTotals {
            windows: 2,
            requests,
            elapsed_s,
            cpu_ns,
            ..WindowTotals::default()
        };
        let w = CpuWindows {
            method: CpuMethod::UnprobedWindows,
            reason: String::new(),
            probed: totals(1000, 1.0, 25_000_000),
            unprobed: totals(1250, 1.0, 25_000_000),
            count_scale: 2.25,
            requests_cut: 0,
            pass_work: None,
            pass_requests: 0,
            budget: None,
        };
        assert_eq!(w.probe_cost_ratio(), Some(1.25));
        assert_eq!(w.probed_fraction(), 0.5);
    }

    /// Records from before the pass's requests were kept read none; a window without a pass
    /// writes none.
    #[test]
    fn pass_requests_are_optional() {
        let windows = r#"{"method": "unprobed-pass", "reason": "", "probed": {"windows": 1,
            "requests": 10, "elapsed_s": 1.0, "cpu_ns": 1, "user_ns": 1, "system_ns": 0},
            "unprobed": {"windows": 1, "requests": 10, "elapsed_s": 1.0, "cpu_ns": 1,
            "user_ns": 1, "system_ns": 0}, "count_scale": 1.0, "requests_cut": 0"#;
        let old: CpuWindows = serde_json::from_str(&format!("{windows}}}")).unwrap();
        assert_eq!(old.pass_requests, 0);
        assert!(!serde_json::to_string(&old)
            .unwrap()
            .contains("pass_requests"));
        let new: CpuWindows =
            serde_json::from_str(&format!(r#"{windows}, "pass_requests": 20}}"#)).unwrap();
        assert_eq!(new.pass_requests, 20);
    }
}
