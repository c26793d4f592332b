//! The costliest requests under slow readers (issue 40), through `run` and `attach`: the
//! requests a server spins on lead the costliest list, with what they spin on first in their
//! top syscalls, counted exactly (the record's invariants check the list, `util::load_record`).

use std::net::Ipv4Addr;

use crate::attach::{attach_live, attached_over, end_window, testbed_running};
use crate::lua::{lua_run, PATTERN};
use crate::util::*;
use reqcost_record::{CostlyRequest, RunRecord};
use reqcost_testkit::{command, free_port, Server, TempDir};
use reqcost_workload::background::{self, Reader, FAST};

fn costliest(record: &RunRecord) -> &[CostlyRequest] {
    let main = record.main_phase().expect("a main phase");
    &main
        .requests
        .as_ref()
        .unwrap_or_else(|| panic!("no per-request figures: {:?}", main.missing))
        .costliest
}

/// The busy-wait's slow requests: from `slow_client`, each spinning on the send queue
/// (testbed/servers/busy-wait.c). Each of its N looks makes two ioctl(SIOCOUTQ); interest goes
/// to EPOLLOUT after every look that finds bytes unsent and back to EPOLLIN on every wakeup,
/// N - 1 of each, and the accepted socket's EPOLL_CTL_ADD makes one more (the menu fits the
/// send buffer: no write waits): 2N ioctl, one more than the epoll_ctl. N is the server's CPU
/// while the reader lets the bytes wait, which a loaded machine moves (634 ioctl in one run
/// with two busy loops beside, thousands alone): not asserted. So is whether it spins on each
/// slow request at all: with a release build on both cores, it did not get the CPU while one
/// of ten readers held its bytes, and that request cost less than a fast one. The list leads
/// with requests it spun on, all of them the slow client's, most of the `slow_requests`.
fn assert_spins_on_ioctl(list: &[CostlyRequest], slow_client: &str, slow_requests: usize) {
    let spun = |c: &CostlyRequest| c.top_syscalls.first().is_some_and(|(n, _)| n == "ioctl");
    let leading = list.iter().take_while(|c| spun(c)).count();
    assert!(
        leading * 2 > slow_requests && leading <= slow_requests,
        "{leading} spun requests lead: {list:#?}"
    );
    for c in &list[..leading] {
        assert_eq!(c.client, slow_client, "slow requests first: {list:#?}");
        let [(first, ioctl), (second, epoll_ctl), ..] = &c.top_syscalls[..] else {
            panic!("two top syscalls at least: {c:?}")
        };
        assert_eq!(
            (first.as_str(), second.as_str()),
            ("ioctl", "epoll_ctl"),
            "{c:?}"
        );
        assert!(ioctl % 2 == 0 && *ioctl > 2, "{c:?}");
        assert_eq!(*epoll_ctl + 1, *ioctl, "{c:?}");
    }
}

/// seeds/002 through `run`: a fifth of the clients read at 64 KiB/s through an 8 KiB receive
/// buffer; their requests lead the costliest list, ioctl first.
#[test]
fn busy_wait_run_lists_the_slow_readers_first_with_ioctl_first() {
    let _alone = machine_alone();
    let (scratch, port) = scratch_and_port("costliest-busy");
    let url = format!("gopher://127.0.0.1:{port}/");
    let args = [
        "--url",
        &url,
        "-n",
        "50",
        "-c",
        "2",
        "--client-mix",
        "80%:unlimited,20%:64KiB/s",
        "--no-slow-phase",
    ];
    let (out, record) = run_saved(&scratch, &args, &testbed_server("busy-wait", port));
    assert!(out.status.success(), "{}", stderr(&out));
    let record = record.expect("a record");
    assert_spins_on_ioctl(costliest(&record), "127.0.0.11", 10);
}

/// seeds/002 live: `attach` over the busy-wait server while 8 slow readers from 127.0.0.2 and
/// 40 fast ones from 127.0.0.1 ask for its menu; the slow requests lead, ioctl first.
#[test]
fn busy_wait_attach_lists_the_slow_readers_first_with_ioctl_first() {
    let _alone = machine_alone();
    let server = testbed_running("busy-wait");
    let slow = Reader {
        source: Ipv4Addr::new(127, 0, 0, 2),
        bytes_per_s: Some(64 * 1024),
    };
    let mut traffic = vec![vec![FAST; 20]; 2];
    traffic.extend(vec![vec![slow; 4]; 2]);
    let (record, answered) = attached_over(&server, traffic);
    assert_eq!(answered, 48);
    assert_spins_on_ioctl(costliest(&record), "127.0.0.2", 8);
}

/// testbed/lua/server.lua does not busy-wait: its answers are one line, which no reader is
/// too slow for, and its dear requests spin in the Lua VM (wrap_text, five times the loop of
/// links) without a syscall. Their costliest requests are `wrap`, whoever reads, each with
/// its selector's read (again after EAGAIN), its answer's send and its close: no ioctl, no
/// epoll_ctl (luasocket waits in poll, which serves no connection).
fn assert_spins_in_the_vm(list: &[CostlyRequest], wraps: usize) {
    assert!(list.len() >= wraps, "{list:#?}");
    for c in &list[..wraps] {
        assert_eq!(c.class, "wrap", "wrap requests first: {list:#?}");
        let names: Vec<&str> = c.top_syscalls.iter().map(|(n, _)| n.as_str()).collect();
        assert!(
            names
                .iter()
                .all(|n| ["recvfrom", "sendto", "close"].contains(n)),
            "{c:?}"
        );
        let calls = |name| {
            c.top_syscalls
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, k)| *k)
        };
        assert_eq!(
            (calls("sendto"), calls("close")),
            (Some(1), Some(1)),
            "{c:?}"
        );
    }
}

#[test]
fn lua_server_run_under_slow_readers_lists_its_wrap_requests_first() {
    let _alone = machine_alone();
    let scratch = TempDir::new("costliest-lua");
    let extra = [
        "--no-slow-phase",
        "--client-mix",
        "80%:unlimited,20%:64KiB/s",
    ];
    lua_run(&scratch, "lua5.4", 50, &extra);
    let record = load_record(&scratch.join("run.json")).expect("a record");
    // 50 requests of PATTERN: 20 wrap.
    assert_spins_in_the_vm(costliest(&record), 10);
}

#[test]
fn lua_server_attach_under_slow_readers_lists_its_wrap_requests_first() {
    let _alone = machine_alone();
    let port = free_port();
    let script = testbed().join("lua/server.lua").display().to_string();
    let lua = ["lua5.4".to_string(), script, port.to_string()];
    let server = Server::start(command(&lua), port, TempDir::new("costliest-lua-attach"));
    let slow = Reader {
        source: Ipv4Addr::new(127, 0, 0, 2),
        bytes_per_s: Some(64 * 1024),
    };
    let mut attached = attach_live(&server, &[]);
    // server.lua serves one connection at a time: one client, each request in turn, every
    // other one read slowly.
    let answered = (0..30)
        .filter(|i| {
            let reader = if i % 2 == 1 { slow } else { FAST };
            background::request_for(port, reader, PATTERN[i % PATTERN.len()]).is_ok()
        })
        .count();
    let status = end_window(&mut attached.child);
    assert!(status.success(), "reqcost attach failed: {status}");
    assert_eq!(answered, 30);
    let record = load_record(&attached.record).expect("a record");
    // 30 requests of PATTERN: 12 wrap.
    assert_spins_in_the_vm(costliest(&record), 10);
}
