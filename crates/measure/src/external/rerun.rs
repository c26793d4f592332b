//! The unprobed pass of a `--load` command: CMD runs a second time, the same way (its own
//! cgroup, the load generator's CPUs), with the probes detached, and the phase's CPU comes from
//! that run, free of the probes' cost. Without the probes reqcost does not count the second
//! run's requests; what it did is measured against the first run by the server tree's
//! read/write-family calls and bytes, which the kernel keeps per process whatever is attached
//! (/proc/PID/io): the second run served about the first run's requests times the ratio.
//! Counts (syscalls, bytes, requests, classes, findings) stay the probed run's, exact
//! (docs/record.md, "How CPU was measured").

use reqcost_probes::Probes;
use reqcost_record::{CpuMethod, CpuTimes, PassWork, Phase, Pinning, ProcIo, Unit, WindowTotals};
use reqcost_server::Server;

use super::{ExternalLoad, Watch, SUCCESS};
use crate::pass::take_cpu;
use crate::{signals, stages};

/// Fewest read/write-family calls of the server's tree in each run for their ratio to measure
/// the second run's work: one call more or less (a log flush, a timer) moves it by 0.5 % at
/// most.
const MIN_CALLS: u64 = 200;
/// Largest difference between the ratio by calls and the ratio by bytes: within it, the two
/// runs' requests were read and written alike, and the ratio is their requests'.
const AGREEMENT: f64 = 0.02;

/// What the second run needs from the first.
pub(super) struct Run<'a> {
    pub probes: &'a Probes,
    pub pinning: &'a Pinning,
    pub run_name: &'a str,
    /// The first run ended with the command's success.
    pub completed: bool,
}

impl ExternalLoad {
    /// Runs the command again without the probes and takes the phase's CPU from that run,
    /// scaled by the work of the two runs; when it cannot be used (or is not run), the phase
    /// keeps its probed CPU and its `cpu_windows` says why.
    pub(super) fn unprobed_pass(&self, run: &Run, phase: &mut Phase, server: &mut Server) {
        if let Some(why) = self.no_pass(run, phase, server) {
            keep_probed(
                phase,
                &format!("the command was not run a second time without them ({why})"),
            );
            return;
        }
        stages::enter("unprobed pass main");
        // The command's first run has exited: nothing of it is in flight to be cut.
        run.probes.pause();
        let before = server.snapshot();
        let mut tree = None;
        let watch = Watch {
            probes: None,
            sampler: None,
        };
        let name = format!("{}-pass", run.run_name);
        let (client, record) =
            self.drive(server, watch, run.pinning, &name, &mut |_, _| {}, &mut tree);
        let (totals, missing) = server.snapshot().since(&before);
        drop(tree);
        // A failure to re-attach leaves the probes off for what follows; the phase's counts
        // are already read.
        let _ = run.probes.resume();
        let used = if record.exit.as_deref() != Some(SUCCESS) {
            Err(format!(
                "it ended with {}",
                record.exit.as_deref().unwrap_or("no exit status")
            ))
        } else if signals::interrupted() || server.exited().is_some() {
            Err("the run was stopped during it".into())
        } else {
            match (totals.cpu, totals.io, phase.server.io.as_ref()) {
                (Some(cpu), Some(io), Some(probed)) => scale(probed, &io).map(|work| (cpu, work)),
                _ => Err(format!(
                    "the server's CPU or /proc/PID/io could not be read: {}",
                    missing.into_values().collect::<Vec<_>>().join("; ")
                )),
            }
        };
        match used {
            Ok((cpu, work)) => apply(phase, cpu, work, client.elapsed_s),
            Err(why) => keep_probed(
                phase,
                &format!("the command's second run, without them, was not used: {why}"),
            ),
        }
    }

    /// Why the command does not run a second time, if it does not.
    fn no_pass(&self, run: &Run, phase: &Phase, server: &mut Server) -> Option<String> {
        let probed = phase
            .cpu_windows
            .as_ref()
            .is_some_and(|w| w.method == CpuMethod::Probed);
        if !probed || phase.server.cpu.is_none() {
            return Some("the probed run's CPU could not be read".into());
        }
        if self.once {
            return Some("--load-once".into());
        }
        if !run.completed || signals::interrupted() || server.exited().is_some() {
            return Some("its first run did not complete".into());
        }
        countable(phase.server.io.as_ref(), phase.units().round() as u64).err()
    }
}

/// Whether the server's reads and writes in the probed run (which served `requests`) are
/// enough to tell a second run's work by; checked before that run, which would be wasted.
fn countable(probed: Option<&ProcIo>, requests: u64) -> Result<(), String> {
    let Some(probed) = probed else {
        return Err("the probed run's /proc/PID/io could not be read".into());
    };
    let made = calls(probed);
    if made < MIN_CALLS.max(requests) {
        return Err(format!(
            "the server's tree made {made} read/write-family calls for {requests} requests, too \
             few to tell a second run's work by: {MIN_CALLS} and one per request are needed, and \
             /proc/PID/io does not count the recv/send/recvmsg/sendmsg calls on sockets that \
             QUIC and many TCP servers use"
        ));
    }
    Ok(())
}

fn calls(io: &ProcIo) -> u64 {
    io.syscr + io.syscw
}

fn bytes(io: &ProcIo) -> u64 {
    io.rchar + io.wchar
}

/// The second run's work against the probed run's, or why it cannot be told.
fn scale(probed: &ProcIo, pass: &ProcIo) -> Result<PassWork, String> {
    let mut work = PassWork {
        probed_calls: calls(probed),
        pass_calls: calls(pass),
        probed_bytes: bytes(probed),
        pass_bytes: bytes(pass),
        factor: 0.0,
    };
    if work.pass_calls < MIN_CALLS {
        return Err(format!(
            "the server's tree made {} read/write-family calls in it, too few to tell its work \
             by ({MIN_CALLS} needed)",
            work.pass_calls
        ));
    }
    work.factor = work.pass_calls as f64 / work.probed_calls as f64;
    let by_bytes = work.bytes_factor();
    if (by_bytes / work.factor - 1.0).abs() > AGREEMENT {
        return Err(format!(
            "its work by calls (x{:.3} the first run's) and by bytes (x{by_bytes:.3}) differ by \
             more than {:.0} %: the two runs did not serve the same kind of requests",
            work.factor,
            AGREEMENT * 100.0
        ));
    }
    Ok(work)
}

/// The phase's CPU from the second run: its CPU over its work relative to the first run's.
fn apply(phase: &mut Phase, pass_cpu: CpuTimes, work: PassWork, elapsed_s: f64) {
    let probed = phase.units_of(Unit::Request).unwrap_or(0.0);
    let requests = (probed * work.factor).round() as u64;
    let (Some(windows), Some(cpu)) = (phase.cpu_windows.as_mut(), phase.server.cpu.as_ref()) else {
        return;
    };
    let per = |ns: u64| (ns as f64 / work.factor).round() as u64;
    let cpu = CpuTimes {
        total_ns: per(pass_cpu.total_ns),
        user_ns: per(pass_cpu.user_ns),
        system_ns: per(pass_cpu.system_ns),
        source: format!(
            "{}, from the command's unprobed second run scaled by its work (x{:.3})",
            cpu.source, work.factor
        ),
        split: cpu.split,
    };
    windows.reason = format!(
        "--load: CPU from the command run a second time without the probes ({elapsed_s:.2} s), \
         about {requests} requests by the server's read/write-family calls (x{:.3} the probed \
         run's, x{:.3} by bytes); counts from the probed run",
        work.factor,
        work.bytes_factor()
    );
    windows.method = CpuMethod::UnprobedPass;
    let mut unprobed = WindowTotals::default();
    unprobed.add(requests, elapsed_s, &pass_cpu);
    windows.unprobed = unprobed;
    // The sampler ran through the second run too: the profile's samples divide by its
    // requests, as its work estimates them.
    windows.pass_requests = requests;
    windows.pass_work = Some(work);
    take_cpu(phase, cpu);
}

/// The phase keeps the probed run's CPU; its windows say why.
fn keep_probed(phase: &mut Phase, why: &str) {
    if let Some(w) = phase.cpu_windows.as_mut() {
        w.reason = format!("--load: CPU from the probed run, with the probes' cost: {why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{accounting, cpu, phase, served, totals, windows, SOURCE};

    fn io(calls: u64, bytes: u64) -> ProcIo {
        ProcIo {
            syscr: calls / 2,
            syscw: calls - calls / 2,
            rchar: bytes / 2,
            wchar: bytes - bytes / 2,
        }
    }

    #[test]
    fn the_same_work_scales_by_one_and_twice_the_work_by_two() {
        let p = io(3000, 3_000_000);
        assert_eq!(scale(&p, &io(3000, 3_000_000)).unwrap().factor, 1.0);
        assert_eq!(scale(&p, &io(6000, 6_000_000)).unwrap().factor, 2.0);
    }

    /// The second run did twice the first's work for 12 ms: the phase's 1000 requests cost
    /// half of it, and per-request accounting keeps its shares and counts.
    #[test]
    fn the_second_run_is_scaled_by_its_work() {
        let measured = cpu(9_000_000, 6_000_000);
        let mut phase = Phase {
            cpu_windows: Some(windows(
                CpuMethod::Probed,
                totals(1, 1000, 1.0, &measured),
                WindowTotals::default(),
            )),
            ..phase(0, measured, 10, Some(served(1000, 6_000_000, 3_000_000)))
        };
        let work = scale(&io(3000, 3_000_000), &io(6000, 6_000_000)).unwrap();
        apply(&mut phase, cpu(12_000_000, 8_000_000), work, 2.0);
        let got = phase.server.cpu.as_ref().unwrap();
        assert_eq!(
            (got.total_ns, got.user_ns, got.system_ns),
            (6_000_000, 4_000_000, 2_000_000)
        );
        assert_eq!(
            got.source,
            format!("{SOURCE}, from the command's unprobed second run scaled by its work (x2.000)")
        );
        let w = phase.cpu_windows.as_ref().unwrap();
        assert_eq!(w.method, CpuMethod::UnprobedPass);
        assert_eq!((w.unprobed.requests, w.unprobed.cpu_ns), (2000, 12_000_000));
        assert_eq!(w.pass_requests, 2000);
        assert!(w.reason.contains("about 2000 requests"), "{}", w.reason);
        assert_eq!(accounting(&phase), (1000, 4_000_000, 2_000_000));
    }

    #[test]
    fn work_that_cannot_be_told_keeps_the_probed_cpu() {
        let p = io(3000, 3_000_000);
        let other_shape = scale(&p, &io(3000, 6_000_000)).unwrap_err();
        assert!(other_shape.contains("by bytes (x2.000)"), "{other_shape}");
        assert!(scale(&p, &io(100, 100_000)).is_err());
        assert_eq!(countable(Some(&p), 3000), Ok(()));
        let few = countable(Some(&io(300, 400)), 1000).unwrap_err();
        assert!(few.contains("recvmsg"), "{few}");
        assert!(countable(None, 1000).is_err());
    }
}
