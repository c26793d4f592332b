//! The sampled kernel time split by subsystem, from the kernel frames of a profile's samples;
//! the kernel-bound and poll-scaling findings quote it.

use reqcost_analysis::document::Analysis;
use reqcost_analysis::profile::kernel_split;
use reqcost_record::RunRecord;

use crate::findings::kernel_bound::byte_reads;
use crate::util::{add_stack, edit, fired, kernel_frame, set_stack, user_frame};

/// seeds/004's server as samples, 200 in all: 60 sending (18 of them copying the datagram in),
/// 36 scanning in select (6 of them switching away), 12 receiving, 16 elsewhere in the kernel,
/// 76 in user code.
fn udp_select_server(rec: RunRecord) -> RunRecord {
    edit(rec, |r| {
        set_stack(r, "tcp_sendmsg", 0);
        set_stack(r, "memcpy", 0);
        set_stack(r, "ngx_http_parse_request_line", 76);
        let send = |leaf: &str| {
            vec![
                kernel_frame(leaf),
                kernel_frame("ip_make_skb"),
                kernel_frame("udp_sendmsg"),
                kernel_frame("__sys_sendmsg"),
                kernel_frame("do_syscall_64"),
                user_frame("sendmsg", "libc.so.6"),
                user_frame("main", "server"),
            ]
        };
        add_stack(r, &send("_raw_spin_lock"), 22);
        add_stack(r, &send("__dev_queue_xmit"), 20);
        add_stack(r, &send("_copy_from_iter"), 18);
        let select = |leaf: &str| {
            vec![
                kernel_frame(leaf),
                kernel_frame("udp_poll"),
                kernel_frame("sock_poll"),
                kernel_frame("do_select.constprop.0"),
                kernel_frame("core_sys_select"),
                kernel_frame("__x64_sys_select"),
                user_frame("select", "libc.so.6"),
            ]
        };
        add_stack(r, &select("_raw_spin_lock_irqsave"), 30);
        add_stack(
            r,
            &[
                kernel_frame("finish_task_switch.isra.0"),
                kernel_frame("__schedule"),
                kernel_frame("schedule_hrtimeout_range"),
                kernel_frame("do_select.constprop.0"),
                user_frame("select", "libc.so.6"),
            ],
            6,
        );
        add_stack(
            r,
            &[
                kernel_frame("__udp4_lib_rcv"),
                kernel_frame("ip_local_deliver_finish"),
                kernel_frame("__netif_receive_skb_one_core"),
                kernel_frame("process_backlog"),
                kernel_frame("net_rx_action"),
            ],
            12,
        );
        add_stack(
            r,
            &[kernel_frame("do_syscall_64"), user_frame("main", "server")],
            16,
        );
    })
}

#[test]
fn kernel_samples_go_to_the_innermost_subsystem_named() {
    let rec = udp_select_server(byte_reads(1_500_000));
    let split = kernel_split(rec.profile.as_ref().unwrap()).unwrap();
    let parts: Vec<(&str, u64)> = split
        .parts
        .iter()
        .map(|(s, n)| (s.map_or("other", |s| s.id), *n))
        .collect();
    assert_eq!(
        parts,
        [
            ("net_send", 42),
            ("readiness", 30),
            ("copy", 18),
            ("net_receive", 12),
            ("sched", 6),
            ("other", 16)
        ]
    );
    assert_eq!((split.samples, split.kernel_samples), (200, 124));
    assert_eq!(
        split.describe(),
        "kernel 62 %: network send 21 %, readiness scanning 15 %, copies to/from user 9 %, \
         network receive 6 %, scheduling 3 %, other 8 %"
    );
}

#[test]
fn kernel_bound_and_poll_scaling_quote_the_split() {
    let quote = "CPU samples: kernel 62 %: network send 21 %, readiness scanning 15 %, \
                 copies to/from user 9 %, network receive 6 %, scheduling 3 %, other 8 %";
    let rec = udp_select_server(byte_reads(1_500_000));
    let f = fired(&rec, "kernel-bound");
    assert!(f.evidence.iter().any(|e| e == quote), "{:?}", f.evidence);
    let rec = udp_select_server(crate::findings::poll_scaling::polls(300, 4800, 0));
    let f = fired(&rec, "poll-scaling");
    assert!(f.evidence.iter().any(|e| e == quote), "{:?}", f.evidence);
}

#[test]
fn the_analysis_document_carries_the_split() {
    let doc = Analysis::of(&udp_select_server(byte_reads(1_500_000)));
    let split = doc.kernel_split.expect("a profile with kernel samples");
    assert_eq!(split.kernel_samples, 124);
    assert!((split.kernel_share - 0.62).abs() < 1e-9);
    let first = &split.subsystems[0];
    assert_eq!(
        (first.id.as_str(), first.label.as_str(), first.samples),
        ("net_send", "network send", 42)
    );
    let sum: f64 = split.subsystems.iter().map(|s| s.share).sum();
    assert!((sum - split.kernel_share).abs() < 1e-9);
}

#[test]
fn no_kernel_samples_no_split() {
    let rec = edit(byte_reads(1_500_000), |r| set_stack(r, "tcp_sendmsg", 0));
    assert_eq!(kernel_split(rec.profile.as_ref().unwrap()), None);
    assert_eq!(Analysis::of(&rec).kernel_split, None);
}
