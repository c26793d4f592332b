//! The `reqcost` command end to end: one test binary, so that the helpers are built once and
//! tests that measure can take turns with each other (`util::machine_alone`).

// What every test module uses: the binary, the testbed, turns at measuring.
mod util;

// `reqcost attach`: live traffic counted on the server side, nothing left after SIGKILL.
mod attach;
// Seeded random signals at random moments, hostile servers; nothing left behind.
mod chaos;
// The costliest requests under slow readers: what a server spins on, first and exact.
mod costliest;
// `compare`, `sweep` and `check` against testbed servers.
mod compare;
// Faults: ports held by others, signals, hostile servers, bad inputs; nothing left behind.
mod faults;
// Debian's servers misconfigured: the profile and findings name what nobody here wrote.
mod diagnose;
// The findings catalog: each pathology's finding first, none on the clean twins.
mod findings;
// Requests still open when an attach window ends: in every table, marked in flight.
mod inflight;
// `--load CMD` run a second time without the probes: its CPU scaled by the two runs' work.
mod loadpass;
// Lua frames: Lua 5.4 servers' functions in the profile, per class.
mod lua;
// Event-loop servers: handlers run a loop turn after their read, charged to their request.
mod loops;
// The eBPF probes' syscall counts against strace.
mod probes;
// `attach --metrics`: Prometheus scrapes the live per-class series.
mod metrics;
// Call chains per request class: each class's samples in its own function.
mod perclass;
// Call chains on binaries without frame pointers.
mod profile;
// PostgreSQL's statements and Redis' commands as requests, counted and classed as the
// protocol defines them.
mod protocols;
// Per-request accounting: requests counted on the server side, client groups in one phase.
mod requests;
// `--push-pyroscope`: the ingest request, a failed push, a real Pyroscope when built.
mod pyroscope;
// Replaying an access log as production ran it: each client's speed and address.
mod replay;
// `reqcost run`, and every bad input.
mod run;
// A stack of local servers: nginx, a WSGI application, Redis; each hop's requests linked.
mod stack;
// Requests inside TLS: plaintext through uprobes on the TLS library.
mod tls;
// `--load CMD`: external clients; units of work; UDP servers.
mod transport;
// seeds/004 in the testbed: the UDP bulk pair, select against epoll, per MiB.
mod udppair;
