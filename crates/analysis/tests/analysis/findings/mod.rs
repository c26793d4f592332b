//! One module per findings rule, named as the rule's file in src/findings/: its table tests
//! (`fires_just_above_its_thresholds`, `is_silent_just_below_each_threshold_and_on_one_signal_alone`)
//! check that it fires just above each threshold, stays silent just below, never fires on one
//! signal alone, and that its evidence names the numbers behind it; the module builds their
//! records and tests what is particular to the rule. `catalog` checks that every rule of the
//! registry has its module here.

mod alloc_churn;
mod busy_wait;
mod catalog;
mod client_sensitive;
mod compress_per_request;
mod conn_per_request;
mod copy_heavy;
mod copy_through_user;
mod datagram_per_send;
pub(crate) mod dominant_code;
mod dominant_syscalls;
mod durable_syncs;
mod fs_storm;
mod hostname_lookup;
pub(crate) mod kernel_bound;
mod log_per_request;
mod nagle;
pub(crate) mod poll_scaling;
pub(crate) mod process_per_request;
mod small_writes;
mod tls_handshake;

use reqcost_analysis::findings::{diagnose, unevaluated, Needs, RULES};

use reqcost_record::RunRecord;

use crate::util::{
    add_stack, clean, edit, edited, fired, kernel_frame, main, set_stack, socket_writes, user_frame,
};

#[test]
fn a_clean_record_gets_no_finding() {
    assert_eq!(diagnose(&clean()), []);
}

#[test]
fn a_record_without_phases_gets_no_finding() {
    assert_eq!(diagnose(&edited(|r| r.phases.clear())), []);
}

#[test]
fn a_phase_without_successful_requests_gets_no_finding() {
    // Every figure per request would divide by zero: the rules must not guess.
    let rec = edit(socket_writes(2000, 2000 * 10), |r| {
        r.phases.retain(|p| p.name == "main");
        main(r).client.ok = 0;
    });
    assert_eq!(diagnose(&rec), []);
}

#[test]
fn rules_without_their_figures_are_named_as_not_evaluated() {
    assert_eq!(unevaluated(&clean()), []);
    let no_probes = edited(|r| {
        for p in &mut r.phases {
            p.server.kernel = None;
            p.missing
                .insert("kernel".into(), "eBPF probes off: --no-probes".into());
        }
        r.profile = None;
    });
    let u = unevaluated(&no_probes);
    assert_eq!(u.len(), 2, "{u:#?}");
    // As each rule declares, in the registry's order.
    let needing = |figures| -> Vec<&str> {
        RULES
            .iter()
            .filter(|r| r.needs.contains(&figures))
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(u[0].rules, needing(Needs::Kernel));
    assert!(u[0].rules.contains(&"busy-wait"));
    assert!(!u[0].rules.contains(&"copy-heavy"));
    assert_eq!(
        u[0].reason,
        "they read the eBPF probes' syscall counts: eBPF probes off: --no-probes"
    );
    // tls-handshake needs both; it is listed once, with the probes.
    assert!(u[1].rules.contains(&"copy-heavy"));
    assert!(!u[1].rules.contains(&"tls-handshake"));
    assert!(
        u[1].reason.contains("no call chains were sampled"),
        "{}",
        u[1].reason
    );

    let thin = edited(|r| {
        r.profile.as_mut().unwrap().stacks.truncate(1);
    });
    let u = unevaluated(&thin);
    assert_eq!(u[0].rules, needing(Needs::Profile));
    assert!(u[0].rules.contains(&"tls-handshake"));
    assert!(
        u[0].reason.contains("10 samples, under the 50"),
        "{}",
        u[0].reason
    );
}

/// Samples in the probes' own frames (their programs, run inside the server's syscalls and on
/// its CPU) are reqcost's cost, stated apart, never the server's: however many a profile holds,
/// every rule that reads the profile judges it as without them (same finding, same share, same
/// evidence), and no evidence names a probe frame.
#[test]
fn the_probes_frames_are_not_the_servers_samples() {
    let probes = |rec: RunRecord, samples: u64| {
        edit(rec, |r| {
            let chain = [
                kernel_frame("bpf_prog_6deef7357e7b4530_sys_exit"),
                kernel_frame("bpf_trace_run2"),
                kernel_frame("tcp_sendmsg"),
                kernel_frame("x64_sys_write"),
                user_frame("memcpy", "libc.so.6"),
                user_frame("libpcre2-8.so.0!0x3a10", "libpcre2-8.so.0.11.2"),
                user_frame("main", "server"),
            ];
            add_stack(r, &chain, samples);
        })
    };
    let pcre = |samples: u64| {
        edited(|r| {
            let chain = [
                user_frame("libpcre2-8.so.0!0x3a10", "libpcre2-8.so.0.11.2"),
                user_frame("pcre2_match_8", "libpcre2-8.so.0.11.2"),
                user_frame("main", "server"),
            ];
            add_stack(r, &chain, samples);
        })
    };
    let copies = edited(|r| {
        set_stack(r, "memcpy", 50);
        set_stack(r, "ngx_http_parse_request_line", 110);
    });
    let network = edit(kernel_bound::byte_reads(1_500_000), |r| {
        set_stack(r, "tcp_sendmsg", 60);
        set_stack(r, "ngx_http_parse_request_line", 130);
    });
    // (rule, a record it fires on, whether it still would with the probes' samples counted as
    // the server's: they would dilute copy-heavy's and dominant-code's shares under their
    // thresholds, and add network frames to kernel-bound's).
    let table = [
        ("copy-heavy", copies),
        ("dominant-code", pcre(67)),
        ("kernel-bound", network),
    ];
    for (id, rec) in table {
        let without = fired(&rec, id);
        for samples in [1, 300, 3000] {
            let with = fired(&probes(rec.clone(), samples), id);
            assert_eq!(
                with.cpu_share, without.cpu_share,
                "{id}, {samples} probe samples"
            );
            assert_eq!(
                with.evidence, without.evidence,
                "{id}, {samples} probe samples"
            );
            assert_eq!(with.confidence, without.confidence, "{id}");
            assert!(
                !with.evidence.iter().any(|e| e.contains("bpf_")),
                "{:?}",
                with.evidence
            );
        }
    }
    // A profile in which the probes hold most samples states no finding of its own.
    let mostly_probes = probes(clean(), 3000);
    assert_eq!(diagnose(&mostly_probes), diagnose(&clean()));
}
