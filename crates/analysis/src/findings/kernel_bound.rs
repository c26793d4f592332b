//! - signal 1: **system time ≥ 75 % of CPU**;
//! - signal 2: **≥ 30 socket reads/writes per request moving < 2 KiB each** (per-packet work; path
//!   lookups, logging and other syscalls are other rules' business, so fs-storm's 30 syscalls per
//!   request, 2 of them on the socket, do not count);
//! - a third signal when ≥ 30 % of samples are in the network stack (tcp_, ip_, udp_, net_rx...).
//! - Yields to small-writes and copy-through-user, the more specific explanations of the same
//!   kernel time.
//! - Testbed `byte-reads` (one `recv` per request byte): ~70 socket reads/writes per request moving
//!   ~17 B each (75 syscalls),
//!   ~93 % system time; its twin `keepalive` makes 7.
//! - CPU share: the network-stack sample share, else half the system share (also when the profile
//!   has no network-stack frame; the evidence then says the share is estimated and why).

use reqcost_record::{FdKind, IoDirection};

use super::facts::{kernel_split_evidence, profile_share, unsampled, Ctx, Draft};
use super::{copy_through_user, small_writes};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "kernel-bound",
    seed: Some("seeds/004"),
    needs: &[Needs::Kernel],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: system time at least this share of the CPU.
const MIN_SYSTEM: f64 = 0.75;
/// Signal 2: socket reads and writes per request from this many...
const MIN_SOCKET_CALLS: f64 = 30.0;
/// ... moving less than this many bytes each on average.
const PACKET_BYTES: f64 = 2048.0;
/// A third signal: at least this share of the samples in the network stack.
const NET_SHARE: f64 = 0.3;
/// The CPU share when no sample says it: this share of the system time.
const SYSTEM_SHARE_ESTIMATE: f64 = 0.5;

/// seeds/004: system time dominates, spent in per-packet network stack work.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    // Tiny writes, or a file copied through user space, are the more specific explanations of
    // the same kernel time.
    if small_writes::judge(ctx).is_some() || copy_through_user::judge(ctx).is_some() {
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
    if system < MIN_SYSTEM || socket_calls < MIN_SOCKET_CALLS || per_call >= PACKET_BYTES {
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
        cpu_share: net.unwrap_or(system * SYSTEM_SHARE_ESTIMATE),
        phase: f.phase.name.clone(),
        fix: "batch: fewer, larger syscalls (writev, sendmmsg/recvmmsg, GSO/GRO for UDP), or \
              move the data path out of per-packet syscalls (io_uring, sendfile)",
        signals: 2 + usize::from(net.is_some_and(|s| s >= NET_SHARE)),
    })
}
