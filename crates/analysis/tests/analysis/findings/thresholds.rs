//! Every rule at its thresholds, one table each: just above them the rule fires and says what
//! it found; just below any one of them, or on one signal alone, it stays silent. The records
//! are built by the rule's own module.

use reqcost_analysis::findings::Confidence;

use super::{
    alloc_churn::{churn, maps_0_89, KIB_64},
    busy_wait::{slow_and_wakeful, slow_churn, slow_cpu, waiting, woken},
    client_sensitive::slow_phase,
    conn_per_request::connections,
    copy_heavy::{copies, tiny_profile, without_callers},
    fs_storm::{denied, stats},
    kernel_bound::{byte_reads, moving, per_packet, system_alone},
    log_per_request::{reopened_log, synced_log},
    nagle::{nagled, stalls},
    poll_scaling::{polls, without_profile},
    tls_handshake::handshakes,
};
use crate::util::{assert_fires, assert_silent_on, clean, socket_writes, Expected};

#[test]
fn every_rule_fires_just_above_its_thresholds() {
    let cases = [
        (
            "alloc-churn",
            churn(50, 100 * KIB_64, 10),
            Expected {
                title: "1.0 mmap/munmap/brk and 0 page faults per request",
                evidence: &[
                    "0.5 mmap, 0.5 munmap, 0.0 brk per request",
                    "0 user page faults per request (64 KiB mapped per request)",
                ],
                // 1 µs in mmap or munmap per request, and 0.1 faults at 0.5 µs.
                share: 1050.0 / 20_000.0,
                confidence: Confidence::Medium,
            },
        ),
        (
            "busy-wait",
            slow_churn(30, 30),
            Expected {
                title: "the server spins on the kernel while clients drain their responses",
                evidence: &[
                    "3.0 ioctl calls per request (3.0 of them SIOCOUTQ: polling the send queue)",
                    "3.0 epoll_ctl(MOD) per request: interest bounced",
                ],
                // With a slow phase, the share is what slow clients add: 1 − 20 µs / 22 µs.
                share: 1.0 - 20.0 / 22.0,
                confidence: Confidence::Medium,
            },
        ),
        (
            "client-sensitive",
            slow_phase(300_000, 30),
            Expected {
                title: "CPU per request is 1.5x higher when clients read slowly",
                evidence: &[
                    "CPU per request: 20.0 µs with fast clients, 30.0 µs with slow clients (64KiB/s per connection, 8KiB receive buffer)",
                    "syscalls per request beyond connection set-up and teardown: 10.0 fast, 13.0 slow",
                ],
                share: 1.0 - 20.0 / 30.0,
                confidence: Confidence::Medium,
            },
        ),
        (
            "conn-per-request",
            connections(50, 50),
            Expected {
                title: "0.50 connections per request although the client asked for keep-alive",
                evidence: &[
                    "0.50 accepts and 0.50 socket closes per request",
                    "the client opened 0.50 connections per request with keep-alive on",
                ],
                // accept4 (4 000 ns), close (51 000 ns) and epoll_ctl (2 000 ns) over 100
                // requests.
                share: 570.0 / 20_000.0,
                confidence: Confidence::Medium,
            },
        ),
        (
            "copy-heavy",
            copies(20, 140),
            Expected {
                title: "10 % of CPU copies memory",
                evidence: &[
                    "10.0 % of CPU samples in memcpy/memmove (20 of 200)",
                    "called from ngx_output_chain ← ngx_http_process_request ← main (20 samples)",
                ],
                share: 0.10,
                confidence: Confidence::Medium,
            },
        ),
        (
            "fs-storm",
            stats(500, 200),
            Expected {
                title: "6 path lookups per request, 2 of them for files that do not exist",
                evidence: &[
                    "5.0 stat-family and 1.0 open calls per request",
                    "2.0 ENOENT per request",
                    "7.0 µs per request inside them",
                ],
                share: 7000.0 / 20_000.0,
                confidence: Confidence::Medium,
            },
        ),
        (
            "kernel-bound",
            byte_reads(1_500_000),
            Expected {
                title:
                    "75 % of CPU is in the kernel: 30 socket reads/writes per request moving 52 B each",
                evidence: &[
                    "system time 75 % of CPU",
                    "30.0 socket reads/writes per request moving 52 B each, of 37.1 syscalls",
                    "20 % of CPU samples in the network stack",
                ],
                // The fixture's profile has 40 of 200 samples under tcp_sendmsg.
                share: 0.2,
                confidence: Confidence::Medium,
            },
        ),
        (
            "log-per-request",
            synced_log(90, 50),
            Expected {
                title: "every request writes and syncs a log file",
                evidence: &[
                    "0.9 writes to regular files per request",
                    "0.5 fsync/fdatasync per request (2 µs each, the request waits for the disk)",
                ],
                // The syncs' 1 000 ns per request, and the file's part (0.9 of 1.9 writes) of
                // the 3 900 ns inside write and writev.
                share: (1000.0 + 3900.0 * 0.9 / 1.9) / 20_000.0,
                confidence: Confidence::Medium,
            },
        ),
        (
            "log-per-request",
            reopened_log(100, 180, 180),
            Expected {
                title: "every request opens, writes and closes a log file",
                evidence: &[
                    "1.0 writes to regular files per request",
                    "1.8 opens and 1.8 file closes per request",
                ],
                // Half of 1 write in 2 of the 4 000 ns in write and writev, and half the opens'
                // 3 600 ns and the closes' 910 ns.
                share: (2000.0 + 1800.0 + 455.0) / 20_000.0,
                confidence: Confidence::Medium,
            },
        ),
        (
            "nagle",
            nagled(700, 20),
            Expected {
                title: "20 % of requests stall ~40 ms",
                evidence: &[
                    "20 of 100 requests took 35–60 ms or 190–260 ms (p50 0.2 ms)",
                    "2.0 socket writes of 700 B per request",
                ],
                // It costs latency, not CPU.
                share: 0.0,
                confidence: Confidence::Medium,
            },
        ),
        (
            "poll-scaling",
            without_profile(polls(300, 4800, 1200)),
            Expected {
                title: "poll scans 16 fds per call to find 4.0 ready",
                evidence: &[
                    "3.0 poll calls per request",
                    "16 fds asked per call, 25.0 % ready",
                    "48 fds scanned per request",
                ],
                // Without stacks, 50 ns per fd scanned: 48 × 50 ns of 20 µs.
                share: 2400.0 / 20_000.0,
                confidence: Confidence::Medium,
            },
        ),
        (
            "small-writes",
            socket_writes(800, 800 * 1023),
            Expected {
                title: "8 socket writes per request of 1023 B each",
                evidence: &[
                    "8.0 write-like calls on sockets per request",
                    "1023 B per call on average, 8184 B per request",
                    "8.0 µs per request inside write-like syscalls",
                ],
                // One write per 64 KiB would do: 7 of the 8 µs are waste, of 20 µs of CPU.
                share: 7.0 / 20.0,
                confidence: Confidence::Medium,
            },
        ),
        (
            "tls-handshake",
            handshakes(50, 90),
            Expected {
                title: "25 % of CPU is TLS crypto",
                evidence: &[
                    "25.0 % of CPU samples in crypto code",
                    "0.90 connections accepted per request",
                    "the client did not offer session resumption (--no-tls-resume)",
                ],
                share: 0.25,
                confidence: Confidence::Medium,
            },
        ),
    ];
    for (id, rec, expected) in cases {
        assert_fires(&rec, id, expected);
    }
}

#[test]
fn every_rule_is_silent_just_below_each_threshold_and_on_one_signal_alone() {
    let rules = [
        (
            "alloc-churn",
            vec![
                ("0.89 maps per request", maps_0_89()),
                (
                    "65535 B mapped per request",
                    churn(100, 100 * (KIB_64 - 1), 10),
                ),
                ("7.99 page faults per request", churn(100, 0, 799)),
                ("1000 page faults per request alone", churn(0, 0, 100_000)),
            ],
        ),
        (
            "busy-wait",
            vec![
                ("2.9 ioctls", slow_churn(29, 30)),
                ("2.9 epoll mods", slow_churn(30, 29)),
                ("9.9 wait returns", waiting(99)),
                ("9.9 wakeups", woken(99)),
                ("1.995x the CPU", slow_cpu(399_000)),
                ("100 ioctls", slow_churn(1000, 0)),
                ("100 epoll mods", slow_churn(0, 1000)),
                ("waits, wakeups and 5x the CPU", slow_and_wakeful()),
            ],
        ),
        (
            "client-sensitive",
            vec![
                ("1.495x the CPU", slow_phase(299_000, 100)),
                ("1.29x the syscalls", slow_phase(600_000, 29)),
                ("5x the CPU alone", slow_phase(1_000_000, 0)),
                ("2x the syscalls alone", slow_phase(220_000, 100)),
            ],
        ),
        (
            "conn-per-request",
            vec![
                ("0.49 accepts per request", connections(49, 100)),
                ("0.49 client connections per request", connections(100, 49)),
                ("accepts alone", connections(100, 2)),
            ],
        ),
        (
            "copy-heavy",
            vec![
                ("20 of 201 samples", copies(20, 141)),
                // A tenth, but too few samples to tell from chance.
                ("19 of 190 samples", copies(19, 131)),
                ("10 of 20 samples", tiny_profile()),
                ("100 of 290 samples without callers", without_callers()),
            ],
        ),
        (
            "fs-storm",
            vec![
                ("5.99 lookups, all missing", stats(499, 499)),
                ("31 lookups, 1.99 missing", stats(3000, 199)),
                ("4 lookups, 3 missing", stats(300, 300)),
                ("31 lookups, 10 denied", denied(3000, 1000)),
            ],
        ),
        (
            "kernel-bound",
            vec![
                ("74.99995 % system time", byte_reads(1_499_999)),
                (
                    "29.99 socket calls",
                    per_packet(clean(), 2899, 2899 * 16, 1_900_000),
                ),
                ("2048 B per socket call", moving(3000 * 2048 - 110_000)),
                ("95 % system time alone", system_alone()),
                ("30 socket calls at 50 % system time", byte_reads(1_000_000)),
            ],
        ),
        (
            "log-per-request",
            vec![
                ("0.89 file writes, synced", synced_log(89, 100)),
                ("0.49 syncs", synced_log(100, 49)),
                ("1.79 opens", reopened_log(100, 179, 300)),
                ("1.79 file closes", reopened_log(100, 300, 179)),
                ("5 file writes", synced_log(500, 0)),
                ("1 sync without file writes", synced_log(0, 100)),
                ("3 reopens without file writes", reopened_log(0, 300, 300)),
            ],
        ),
        (
            "nagle",
            vec![
                ("19 % stalled", nagled(700, 19)),
                (
                    "1.99 writes per request",
                    stalls(socket_writes(199, 199 * 100), 40_959, 50),
                ),
                ("writes of one MSS", nagled(1448, 50)),
                // The fixture writes each 1100 B response with one writev.
                ("stalls with one large write", stalls(clean(), 40_959, 80)),
                ("small writes without stalls", socket_writes(200, 200 * 700)),
            ],
        ),
        (
            "poll-scaling",
            vec![
                ("15.99 fds per call, none ready", polls(300, 4797, 0)),
                (
                    "16 fds per call, 25.002 % ready",
                    polls(3000, 48_000, 12_001),
                ),
                (
                    "1000 fds per call, 80 % ready",
                    polls(300, 300_000, 240_000),
                ),
            ],
        ),
        (
            "small-writes",
            vec![
                ("7.99 tiny writes", socket_writes(799, 799 * 100)),
                ("20 writes of 1024 B", socket_writes(2000, 2000 * 1024)),
                ("2 tiny writes", socket_writes(200, 200 * 10)),
            ],
        ),
        (
            "tls-handshake",
            vec![
                ("49 of 200 samples in crypto", handshakes(49, 100)),
                ("0.89 connections per request", handshakes(100, 89)),
                ("crypto over kept-alive connections", handshakes(140, 2)),
                (
                    "a connection per request without crypto",
                    handshakes(0, 100),
                ),
            ],
        ),
    ];
    for (id, cases) in rules {
        assert_silent_on(id, &cases);
    }
}
