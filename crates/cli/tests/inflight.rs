//! Requests still open when a window ends (issue 26): read from the probes' connection state
//! and reported in flight, with what they cost so far, in every table and the costliest list.

use std::io::{Read, Write};
use std::net::Ipv4Addr;

use crate::attach::{attach, end_window, testbed_running};
use crate::util::*;
use reqcost_testkit::TempDir;
use reqcost_workload::background::{self, FAST};

/// Bytes of the 200 KiB file the slow client reads before the window ends: the server has
/// read its request and written to it, and has more to send.
const READ_BEFORE_THE_END: usize = 16 * 1024;

/// Ten fast menu requests from 127.0.0.1, then a download of the 200 KiB file from 127.0.0.2
/// through an 8 KiB receive buffer that stops reading after 16 KiB: the busy-wait server spins
/// on it while `attach` ends its window. The download is in flight in the record, with its CPU
/// so far, in its class, client and speed rows, and first in the costliest list; the ten fast
/// requests are the requests counted.
#[test]
fn a_slow_download_that_outlasts_an_attach_window_is_reported_in_flight() {
    let _alone = machine_alone();
    let server = testbed_running("busy-wait");
    let scratch = TempDir::new("inflight");
    let record_path = scratch.join("live.json");
    let port = server.port.to_string();
    let (mut child, _stderr, _) = attach(&["--port", &port, "-o", record_path.to_str().unwrap()]);
    for _ in 0..10 {
        background::request(server.port, FAST).unwrap();
    }
    let mut slow =
        background::connect_from(Ipv4Addr::new(127, 0, 0, 2), server.port, Some(8192)).unwrap();
    slow.write_all(b"/200k.bin\r\n").unwrap();
    let mut buf = vec![0u8; 4096];
    let mut read = 0;
    while read < READ_BEFORE_THE_END {
        let n = slow.read(&mut buf).unwrap();
        assert!(n > 0, "the server closed after {read} bytes");
        read += n;
    }
    let status = end_window(&mut child);
    drop(slow);
    assert!(status.success(), "reqcost attach failed: {status}");

    let record = load_record(&record_path).unwrap();
    let live = record.main_phase().unwrap();
    let r = live.requests.as_ref().expect("per-request accounting");
    assert_eq!((r.requests, r.in_flight), (10, 1), "{r:#?}");
    let open = &r.costliest[0];
    assert!(
        open.in_flight,
        "the download leads the costliest: {:#?}",
        r.costliest
    );
    assert_eq!(
        (open.request.as_str(), open.client.as_str()),
        ("/200k.bin", "127.0.0.2")
    );
    assert!(
        open.cpu_ns > 0 && open.bytes_out >= READ_BEFORE_THE_END as u64,
        "{open:?}"
    );
    assert_eq!(r.in_flight_cpu_ns, open.cpu_ns);
    assert!(r.costliest[1..].iter().all(|c| !c.in_flight));

    let client = r
        .by_client
        .iter()
        .find(|g| g.name == "127.0.0.2")
        .expect("its client");
    assert_eq!((client.requests, client.in_flight), (0, 1), "{client:?}");
    assert_eq!(client.cpu_ns, open.cpu_ns);
    let speed = r
        .by_speed
        .iter()
        .find(|g| g.in_flight == 1)
        .unwrap_or_else(|| panic!("a speed row holds it: {:#?}", r.by_speed));
    assert_eq!(speed.clients, ["127.0.0.2"]);
    assert!(speed.cpu_ns >= open.cpu_ns, "{speed:?}");
    let class = r
        .by_class
        .iter()
        .find(|g| g.name == "/200k.bin")
        .expect("its class");
    assert_eq!((class.requests, class.in_flight), (0, 1), "{class:?}");

    let summary = reqcost(&["report", record_path.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(
        text.contains("1. ") && text.contains("/200k.bin (in flight) from 127.0.0.2"),
        "{text}"
    );
    assert!(text.contains("in requests still in flight"), "{text}");
}
