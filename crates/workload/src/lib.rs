//! The workload stage: what requests to send, how, and what the client saw.
//!
//! A [`Plan`] is validated from [`WorkloadOptions`] before any server starts (URL, requests file,
//! classes, limits), then run phase by phase on the calling thread: a warm-up phase that is
//! not measured, `main`, then one `class:NAME` phase per `--class` replaying only the requests of
//! that class (so that per-class server CPU is exact), and optionally `slow-clients`.
//!
//! - Protocols, picked by the `--url` scheme: `gopher` (RFC 4266 paths: `/TYPE/SELECTOR`; one
//!   connection per request, selector + CRLF, response read to close), `gemini` (TLS with rustls;
//!   any certificate accepted, as with trust on first use; SNI from the host; the status line is
//!   parsed and counted), `http`/`https` (HTTP/1.1 GET or HEAD, keep-alive by default,
//!   Content-Length, chunked and close-delimited bodies), `tcp` (the path without its leading `/`,
//!   or each line of the file, + CRLF; response read to close), `quic` (quinn; one QUIC
//!   connection per slot reused for every request, a stream per request; `hq-interop` or HTTP/3,
//!   whichever ALPN the server picks; see `quic.rs`).
//! - Requests: the `--url` alone, or `--requests FILE`: a list of selectors, paths or URLs, or an
//!   access log in Common/Combined Log Format (detected from the first non-blank line; GET and
//!   HEAD replayed in order with their method, other methods skipped and counted). The file is
//!   read as a stream, cycled until the phase has sent its requests; `plan()` reads it once to
//!   check every line (malformed lines fail with FILE:LINE unless `--skip-bad`).
//! - `--class NAME=REGEX` matches the request as sent (selector, origin-form path, Gemini URL).
//!   Each class phase sends `-n` requests (or runs `--duration`) of that class alone.
//! - Load: closed loop (`-c` slots, `-n` requests or `--duration`), or open loop (`--rate`):
//!   requests are scheduled at fixed intervals and latency counts from the scheduled time.
//! - Threads: `--threads N` load threads (default: the CPUs the calling thread may run on),
//!   each with its own runtime and share of the connections; thread `t` sends requests
//!   `t, t + N, ...` of the phase (see `engine.rs`), so counts equal a one-thread run's.
//! - Slow clients: `--client-bandwidth` paces reads per connection (small reads, sleeps so that
//!   bytes read never run ahead of the rate, nor catch up in a burst after the client ran
//!   late: see `pace.rs`) through a small SO_RCVBUF (`--client-rcvbuf`).
//! - Limits: `--connect-timeout`, `--request-timeout`, `--max-response`; errors are counted as
//!   refused, reset, timeout, connect-timeout, tls, protocol, too-large or other. A response
//!   saying the server failed is not a success either: HTTP 5xx (`http-5xx`, also counted by
//!   status) and a gopher response starting with an error item, type 3 (`gopher-error`). HTTP
//!   4xx and Gemini non-2x statuses are complete exchanges: counted as ok, and by status.

pub mod background;
mod client;
mod client_model;
mod endpoint;
mod engine;
#[doc(hidden)]
pub mod fuzzing;
mod logformat;
mod options;
mod pace;
mod plan;
mod quic;
mod replay;
mod source;
mod tally;
mod tls;
pub mod units;

pub use client_model::{ClientMix, ClientModel, ReplayModel};
pub use options::{WorkloadError, WorkloadOptions, SLOW_CLIENT_RCVBUF};
pub use plan::{PhaseSpec, Plan};
pub use source::{Format, LogSummary, Method, Sample};
