//! copy-through-user: ≥ 32 KiB per request read from files and written to sockets by write-like
//! calls, the file read in ≥ 4 chunks per request of < 64 KiB; yields to small-writes,
//! kernel-bound yields to it.

use reqcost_analysis::findings::Confidence;
use reqcost_record::{FdKind, IoDirection, Phase, RunRecord};

use crate::util::{
    assert_fires, assert_silent, assert_silent_on, confidences, edited, fired, main, set_cpu,
    set_io, set_syscall, Expected,
};

/// `calls` pread64 from files moving `bytes` in all, 2 µs each.
fn file_reads(p: &mut Phase, calls: u64, bytes: u64) {
    set_io(p, "pread64", IoDirection::Read, FdKind::File, calls, bytes);
    set_syscall(p, "pread64", calls, calls * 2000);
}

/// `calls` writev on sockets moving `bytes` in all, 3 µs each.
fn socket_writes(p: &mut Phase, calls: u64, bytes: u64) {
    set_io(
        p,
        "writev",
        IoDirection::Write,
        FdKind::Socket,
        calls,
        bytes,
    );
    set_syscall(p, "writev", calls, calls * 3000);
}

/// The main phase (100 requests, 100 ms of CPU, `system_ns` of it system time) reading
/// `read_bytes` from files in `reads` calls and writing `write_bytes` to sockets in `writes`.
fn copied(reads: u64, read_bytes: u64, writes: u64, write_bytes: u64, system_ns: u64) -> RunRecord {
    edited(|r| {
        let m = main(r);
        file_reads(m, reads, read_bytes);
        socket_writes(m, writes, write_bytes);
        set_cpu(m, 100_000_000, system_ns);
    })
}

/// `kib` KiB per request copied in chunks of `chunk` bytes, one read and one write each, at 95 %
/// system time.
fn chunked(kib: u64, chunk: u64) -> RunRecord {
    let calls = 100 * kib * 1024 / chunk;
    copied(calls, 100 * kib * 1024, calls, 100 * kib * 1024, 95_000_000)
}

#[test]
fn fires_on_a_mebibyte_file_served_in_8_kib_chunks() {
    let f = fired(&chunked(1024, 8192), "copy-through-user");
    assert_eq!(
        f.title,
        "files copied to sockets through user space: 128 reads and 128 writes of 8 KiB per request"
    );
    assert_eq!(f.confidence, Confidence::High);
    // The file's part (128 of 130.02 reads) of the 257.01 µs in pread64 and read, and the
    // writes beyond the 16 of 64 KiB a MiB needs (112 of 128) of 384 µs, of 1 ms per request.
    let share = (257.01 * 128.0 / 130.02 + 384.0 * 112.0 / 128.0) / 1000.0;
    assert!((f.cpu_share - share).abs() < 1e-9, "{}", f.cpu_share);
}

#[test]
fn fires_just_above_its_thresholds() {
    // 32 KiB per request read in 4 chunks and written in as many, at 75 % system time.
    assert_fires(
        &copied(400, 3_276_800, 400, 3_276_800, 75_000_000),
        "copy-through-user",
        Expected {
            title: "files copied to sockets through user space: 4 reads and 4 writes of 8 KiB per request",
            evidence: &[
                "4.0 file reads per request of 8.0 KiB each: 32 KiB per request read from files",
                "4.0 socket writes per request of 8.0 KiB each: 32 KiB per request written through user space, 0 KiB by sendfile/splice",
                "system time 75 % of CPU",
            ],
            // The file's part (4 of 6.02 reads) of the 9.01 µs in pread64 and read, and the 3
            // writes beyond the one 32 KiB needs of the 12 µs in writev, of 1 ms per request.
            share: (9.01 * 4.0 / 6.02 + 12.0 * 0.75) / 1000.0,
            confidence: Confidence::High,
        },
    );
}

#[test]
fn system_time_under_75_percent_is_medium_confidence() {
    let at = |system_ns| copied(400, 3_276_800, 400, 3_276_800, system_ns);
    assert_eq!(
        confidences("copy-through-user", &[at(75_000_000), at(74_999_999)]),
        [Confidence::High, Confidence::Medium]
    );
}

#[test]
fn is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    assert_silent_on(
        "copy-through-user",
        &[
            (
                "32 767 B per request read",
                copied(400, 3_276_700, 400, 3_276_800, 95_000_000),
            ),
            (
                "32 767 B per request written",
                copied(400, 3_276_800, 400, 3_276_700, 95_000_000),
            ),
            (
                "3.99 reads per request",
                copied(399, 3_276_800, 400, 3_276_800, 95_000_000),
            ),
            (
                "64 KiB chunks",
                copied(400, 26_214_400, 400, 26_214_400, 95_000_000),
            ),
            (
                "a MiB read in one call per request",
                copied(100, 100 << 20, 12_800, 100 << 20, 95_000_000),
            ),
            ("a 31 KiB response in 4 KiB chunks", chunked(31, 4096)),
            (
                "95 % system time alone",
                copied(100, 100_000, 100, 110_000, 95_000_000),
            ),
        ],
    );
}

#[test]
fn is_silent_when_sendfile_sends_the_file() {
    // The file's pages go to the socket by sendfile; only the headers go through user space.
    let rec = edited(|r| {
        let m = main(r);
        set_io(
            m,
            "sendfile",
            IoDirection::Write,
            FdKind::Socket,
            1600,
            100 << 20,
        );
        set_syscall(m, "sendfile", 1600, 1600 * 20_000);
        set_cpu(m, 100_000_000, 95_000_000);
    });
    assert_silent(&rec, "copy-through-user");
}

#[test]
fn a_batch_of_requests_one_in_eight_a_large_file_fires() {
    // 800 requests, 100 of them a MiB file in 8 KiB chunks: 128 KiB per request on average.
    let rec = edited(|r| {
        let m = main(r);
        m.client.requests = 800;
        m.client.ok = 800;
        file_reads(m, 12_800, 100 << 20);
        socket_writes(m, 12_800 + 700, (100 << 20) + 700 * 1100);
        set_cpu(m, 100_000_000, 95_000_000);
    });
    let f = fired(&rec, "copy-through-user");
    assert!(
        f.evidence[0].starts_with("16.0 file reads per request of 8.0 KiB each: 128 KiB"),
        "{:?}",
        f.evidence
    );
}

#[test]
fn chunks_under_1_kib_are_small_writes() {
    let rec = chunked(64, 512);
    fired(&rec, "small-writes");
    assert_silent(&rec, "copy-through-user");
}

#[test]
fn kernel_bound_yields_to_it() {
    // 64 KiB per request in 1.5 KiB chunks: 43 socket writes of under 2 KiB at 95 % system time.
    let rec = chunked(66, 1536);
    fired(&rec, "copy-through-user");
    assert_silent(&rec, "kernel-bound");
}
