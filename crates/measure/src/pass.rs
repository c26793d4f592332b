//! The unprobed pass: a phase too short for unprobed windows (a default `run` of 1000 requests,
//! the slow-client phase) is sent a second time with the probes detached, and its CPU figures
//! come from that pass, free of the probes' cost; everything the probes count (syscalls, bytes,
//! classes, findings) stays the probed pass's, exact (docs/record.md, "How CPU was measured").

use std::time::Duration;

use reqcost_record::{ClientStats, CpuMethod, CpuTimes, PerRequest, Phase, WindowTotals};
use reqcost_server::Server;
use reqcost_workload::{PhaseSpec, Plan};

use super::instruments::Instruments;
use super::stack::Stack;
use super::windows::ProbeSchedule;
use super::Collect;
use crate::{signals, stages};

/// Longest a paced phase's pass should take: the slow-client phase and its fast reference
/// (about 2 s each, at their clients' pace) are repeated in part, their first requests only, so
/// that a default run stays about as fast as it was. A phase at the server's own pace (1000
/// requests at full rate) is repeated whole.
const PASS_BUDGET: Duration = Duration::from_millis(500);
/// Fewest requests of a shortened pass (all of the phase's when it had fewer): a handful of
/// requests over a few connections would make the connections' setup weigh in the CPU per
/// request.
const PASS_MIN_REQUESTS: u64 = 20;
/// Shortest a pass at the server's own pace should last, judged by its probed phase: the
/// phase's requests are sent as many whole times over as that takes. Once over, 1000 nginx
/// requests are 20–30 ms of CPU, and a pass that short read 17–29 µs per request against
/// 21 µs bare on a quiet machine (bench/RESULTS.md); ten times over, 17–22 µs.
const PASS_MIN_SECS: f64 = 0.25;
/// Most times a phase's requests are sent over in its pass.
const PASS_MAX_REPEATS: u64 = 20;

impl Collect<'_> {
    /// Runs the unprobed pass of `phase` (measured from `spec`) when it needs one, and takes its
    /// CPU from it; when the pass cannot be used, the phase keeps its probed CPU and says why.
    pub(super) fn unprobed_pass(
        &self,
        plan: &Plan,
        spec: &PhaseSpec,
        phase: &mut Phase,
        server: &mut Server,
        instruments: &Instruments,
    ) {
        let Some(probes) = instruments.probes.as_ref() else {
            return;
        };
        if !needs_pass(instruments.schedule(), phase)
            || signals::interrupted()
            || server.exited().is_some()
        {
            return;
        }
        if plan.replays_log(spec) {
            // Its requests sent twice would be in the server's log twice, which the replay's
            // comparison reads.
            if let Some(w) = phase.cpu_windows.as_mut() {
                w.reason.push_str(
                    "; no unprobed pass: a replay at the logged speeds or times is sent once",
                );
            }
            return;
        }
        let c = &phase.client;
        let bytes = c.bytes_received as f64 / c.ok.max(1) as f64;
        let paced = plan.paced_secs(spec, c.requests, bytes);
        let asked = pass_requests(c.requests, paced, c.elapsed_s);
        let mut pass_spec = plan.repeat_phase(spec, asked);
        pass_spec.name = format!("{} (unprobed pass)", spec.name);
        stages::enter(&format!("unprobed pass {}", spec.name));
        // The probed phase has closed its connections: no request is in flight to be cut.
        probes.pause();
        // The server idled while the probed phase was read: the pass's measure starts after
        // a warm-up, as the phases themselves start after theirs. As long as the pass and no
        // longer: the phase's requests once over, or, for a paced phase shortened to its first
        // requests, those; warming a slow-client phase whole took its 2 s again.
        let mut warm_up = plan.repeat_phase(spec, asked.min(c.requests));
        warm_up.name = format!("{} (unprobed pass warm-up)", spec.name);
        let warmed = self.drive(plan, &warm_up, server, &mut |_, _| {});
        let stack = instruments.stack.as_ref();
        let hops_before = stack.map(Stack::cpu_mark).unwrap_or_default();
        let before = server.snapshot();
        let client = self.drive(plan, &pass_spec, server, &mut |_, _| {});
        let cpu = server.snapshot().since(&before).0.cpu;
        // A hop found within the phase has figures of part of it only: its probed CPU stays.
        let late = stack.map_or_else(Vec::new, |s| s.found_within(&spec.name));
        let hops: Vec<(u8, CpuTimes)> = stack
            .map(|s| s.cpu_since(&hops_before))
            .unwrap_or_default()
            .into_iter()
            .filter(|(hop, _)| !late.contains(hop))
            .collect();
        // A failure to re-attach is seen by the next phase's windows, whose counts it then
        // leaves out with the reason.
        let _ = probes.resume();
        if let Some(w) = phase.cpu_windows.as_mut() {
            // The sampler ran through both, used or not: the profile's samples divide by them.
            w.pass_requests = warmed.requests + client.requests;
        }
        let pass = cpu.ok_or_else(|| "the server's CPU could not be read".to_string());
        let pass =
            pass.and_then(|cpu| unusable(&client, asked, &phase.client).map_or(Ok(cpu), Err));
        match pass {
            Ok(cpu) => {
                let mut totals = WindowTotals::default();
                totals.add(client.requests, client.elapsed_s, &cpu);
                apply(phase, totals, &hops);
            }
            Err(why) => {
                if let Some(w) = phase.cpu_windows.as_mut() {
                    w.reason
                        .push_str(&format!("; the unprobed pass was not used: {why}"));
                }
            }
        }
    }
}

/// A phase measured in alternate windows whose CPU still came from the probed ones: too short
/// for unprobed windows. `--probes-full-time` and attach without `--duty` keep the probed CPU.
fn needs_pass(schedule: ProbeSchedule, phase: &Phase) -> bool {
    schedule == ProbeSchedule::Alternate
        && phase.client.requests > 0
        && phase.server.cpu.is_some()
        && phase
            .cpu_windows
            .as_ref()
            .is_some_and(|w| w.method == CpuMethod::Probed)
}

/// Requests the pass sends. When something other than the server paced the phase
/// (`paced_secs`: an open-loop rate, slow clients), all of its requests, or as many as fit in
/// [`PASS_BUDGET`] at that pace (at least [`PASS_MIN_REQUESTS`]): decided from the workload, so
/// that a busy machine does not change what is measured. At the server's own pace, all of them
/// as many whole times over as make [`PASS_MIN_SECS`] at the probed phase's pace (`phase_secs`,
/// an overestimate without the probes): the same requests in the same mix, whatever the
/// machine, only measured over more of them.
fn pass_requests(requests: u64, paced_secs: Option<f64>, phase_secs: f64) -> u64 {
    let budget = PASS_BUDGET.as_secs_f64();
    match paced_secs {
        Some(secs) if secs > budget => {
            let part = (requests as f64 * budget / secs).ceil() as u64;
            part.max(PASS_MIN_REQUESTS).min(requests)
        }
        Some(_) => requests,
        None => {
            let times = (PASS_MIN_SECS / phase_secs.max(f64::MIN_POSITIVE)).ceil() as u64;
            requests * times.clamp(1, PASS_MAX_REPEATS)
        }
    }
}

/// Why the pass is not the same work as the phase, if it is not: stopped early, or failing
/// where the phase did not (or the other way round).
fn unusable(pass: &ClientStats, asked: u64, phase: &ClientStats) -> Option<String> {
    if pass.requests < asked {
        return Some(format!(
            "it stopped after {} of {asked} requests",
            pass.requests
        ));
    }
    let failed = |c: &ClientStats| c.ok < c.requests;
    (failed(pass) != failed(phase)).then(|| {
        format!(
            "{} of its {} requests were answered, {} of the phase's {}",
            pass.ok, pass.requests, phase.ok, phase.requests
        )
    })
}

/// The phase's CPU from the pass: its CPU per request times the phase's requests, and so each
/// upstream hop's of `hops`, its tree's CPU over the pass (docs/stack.md); per-request
/// accounting keeps its shares of the new CPU, its counts (exact, from the probed pass) stay.
fn apply(phase: &mut Phase, pass: WindowTotals, hops: &[(u8, CpuTimes)]) {
    let (Some(windows), Some(cpu)) = (phase.cpu_windows.as_mut(), phase.server.cpu.as_ref()) else {
        return;
    };
    let requests = phase.client.requests;
    let per = |ns: u64| (ns as f64 * requests as f64 / pass.requests.max(1) as f64).round() as u64;
    let part = if pass.requests == requests {
        "the same requests".to_string()
    } else if pass.requests > requests && pass.requests.is_multiple_of(requests.max(1)) {
        format!(
            "the same requests {} times over, scaled to its {requests}",
            pass.requests / requests
        )
    } else {
        format!(
            "its first {} requests, scaled to its {requests}",
            pass.requests
        )
    };
    // The pass's CPU per request times the phase's requests, its source and split as measured.
    let scaled = |(total, user, system): (u64, u64, u64), measured: &CpuTimes| CpuTimes {
        total_ns: per(total),
        user_ns: per(user),
        system_ns: per(system),
        source: format!("{}, from an unprobed pass of {part}", measured.source),
        split: measured.split,
    };
    let cpu = scaled((pass.cpu_ns, pass.user_ns, pass.system_ns), cpu);
    for hop in &mut phase.hops {
        let pass_cpu = hops.iter().find(|(h, _)| *h == hop.hop).map(|(_, c)| c);
        if let (Some(c), Some(measured)) = (pass_cpu, hop.cpu.as_ref()) {
            hop.cpu = Some(scaled((c.total_ns, c.user_ns, c.system_ns), measured));
        }
    }
    windows.reason = format!(
        "phase too short for unprobed windows: CPU from an unprobed pass of {part} ({:.2} s), \
         counts from the probed pass",
        pass.elapsed_s
    );
    windows.method = CpuMethod::UnprobedPass;
    windows.unprobed = pass;
    take_cpu(phase, cpu);
}

/// Puts `cpu`, measured without the probes, in the phase: per-request accounting keeps its
/// shares of it (and each upstream hop's of its CPU), its counts (exact, from the probed pass)
/// stay.
pub(super) fn take_cpu(phase: &mut Phase, cpu: CpuTimes) {
    phase.server.cpu = Some(cpu);
    phase.scale_requests_to_cpu(1.0);
    phase.per_request = PerRequest::from_totals(&phase.server, phase.units());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{accepted, accounting, cpu, phase, served, totals, windows, SOURCE};

    fn client(requests: u64, ok: u64, elapsed_s: f64) -> ClientStats {
        ClientStats {
            requests,
            ok,
            elapsed_s,
            ..ClientStats::default()
        }
    }

    /// A phase at the server's pace is repeated whole, as many times as fill the floor's
    /// time (within the cap); a paced one in part, never below the floor nor above the phase.
    #[test]
    fn pass_length_follows_the_budget() {
        assert_eq!(pass_requests(1000, None, 0.03), 9000);
        assert_eq!(pass_requests(1000, None, 0.25), 1000);
        assert_eq!(pass_requests(1000, None, 2.0), 1000);
        assert_eq!(pass_requests(1000, None, 0.001), 20_000);
        assert_eq!(pass_requests(1000, None, 0.0), 20_000);
        assert_eq!(pass_requests(100, Some(0.4), 0.4), 100);
        assert_eq!(pass_requests(200, Some(2.0), 2.0), 50);
        assert_eq!(pass_requests(40, Some(4.0), 4.0), 20);
        assert_eq!(pass_requests(8, Some(2.0), 2.0), 8);
    }

    /// A phase of `requests` whose 3 ms of probed CPU (a third unattributed) came from
    /// probed windows.
    fn probed(requests: u64) -> Phase {
        let measured = cpu(3_000_000, 2_000_000);
        let served = served(requests, 2_000_000, 1_000_000);
        Phase {
            cpu_windows: Some(windows(
                CpuMethod::Probed,
                totals(1, requests, 0.1, &measured),
                WindowTotals::default(),
            )),
            ..phase(requests, measured, 10, Some(served))
        }
    }

    /// The pass's CPU per request, over the phase's requests, in its words.
    fn passed(phase_requests: u64, pass_requests: u64, pass_cpu_ns: u64) -> (Phase, CpuTimes) {
        let mut phase = probed(phase_requests);
        let pass = totals(1, pass_requests, 0.05, &cpu(pass_cpu_ns, pass_cpu_ns / 2));
        apply(&mut phase, pass.clone(), &[]);
        let cpu = phase.server.cpu.clone().unwrap();
        let windows = phase.cpu_windows.as_ref().unwrap();
        assert_eq!(windows.method, CpuMethod::UnprobedPass);
        assert_eq!(windows.unprobed, pass);
        (phase, cpu)
    }

    #[test]
    fn a_pass_of_the_same_requests_gives_its_cpu() {
        let (phase, cpu) = passed(1000, 1000, 2_000_000);
        assert_eq!(
            (cpu.total_ns, cpu.user_ns, cpu.system_ns),
            (2_000_000, 1_000_000, 1_000_000)
        );
        assert_eq!(
            cpu.source,
            format!("{SOURCE}, from an unprobed pass of the same requests")
        );
        assert_eq!(
            phase.cpu_windows.unwrap().reason,
            "phase too short for unprobed windows: CPU from an unprobed pass of the same \
             requests (0.05 s), counts from the probed pass"
        );
    }

    #[test]
    fn a_pass_repeated_or_cut_short_is_scaled_to_the_phase() {
        let (_, cpu) = passed(1000, 3000, 6_000_000);
        assert_eq!(cpu.total_ns, 2_000_000);
        assert!(cpu
            .source
            .ends_with("the same requests 3 times over, scaled to its 1000"));
        let (_, cpu) = passed(200, 50, 500_000);
        assert_eq!(cpu.total_ns, 2_000_000);
        assert!(cpu
            .source
            .ends_with("its first 50 requests, scaled to its 200"));
    }

    /// Per-request accounting keeps its shares of the pass's CPU, and its counts.
    #[test]
    fn the_pass_cpu_keeps_the_accounting_shares_and_counts() {
        let (phase, _) = passed(1000, 1000, 6_000_000);
        assert_eq!(accounting(&phase), (1000, 4_000_000, 2_000_000));
        assert_eq!(accepted(&phase), 10);
        assert_eq!(phase.per_request.cpu_total_us, Some(6.0));
    }

    #[test]
    fn a_phase_without_windows_or_cpu_is_left_alone() {
        let mut phase = probed(1000);
        phase.cpu_windows = None;
        let before = phase.clone();
        apply(&mut phase, totals(1, 1000, 0.05, &cpu(1, 0)), &[]);
        assert_eq!(phase, before);
    }

    #[test]
    fn a_pass_unlike_its_phase_is_not_used() {
        let phase = client(1000, 1000, 0.1);
        assert_eq!(unusable(&client(1000, 1000, 0.1), 1000, &phase), None);
        assert!(unusable(&client(600, 600, 0.1), 1000, &phase)
            .unwrap()
            .contains("600 of 1000"));
        assert!(unusable(&client(1000, 990, 0.1), 1000, &phase).is_some());
    }
}
