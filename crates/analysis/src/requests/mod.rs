//! Per-request accounting in user space: what each request was, read from the first bytes the
//! server read on it (`head`), and a bounded tally of the kernel's request events into the
//! distributions a phase keeps (`tally`, by client speed too: `speed`), with the notes every
//! output shows beside them (`notes`); PostgreSQL and Redis requests read from their messages
//! (`wire`). Here: the row names and bound every per-request table
//! shares. See docs/record.md (`requests`) for what the figures mean.

mod head;
mod notes;
mod speed;
pub mod stack;
mod tally;
pub mod wire;

pub use head::{write_request_label, RequestHead};
pub use notes::{
    group_cpu_share, group_requests, in_flight_note, not_visible_over_quic, protocol_note,
    unattributed_made_of, unreliable_note, UNRELIABLE_UNATTRIBUTED_SHARE,
};
pub use speed::{speed_label, SpeedBucket, SPEED_BUCKETS, SPEED_UNKNOWN};
pub use tally::{RequestTally, StackStats, TallyCounters, TallyOptions};

/// The row that takes what is not kept apart: requests of no `--class`, classes and clients
/// beyond the table's top N or beyond the key cap.
pub const OTHER: &str = "(other)";
/// Requests whose bytes in were not captured (e.g. read with an iovec the probes do not copy).
pub const UNREAD: &str = "(unread)";
/// The class of HTTP/2 streams whose header block could not be decoded (docs/tls.md).
pub const HTTP2: &str = "(http2)";
/// What a TLS handshake is filed under where a class name is needed (live metrics); the
/// phase's class rows never show it.
pub const TLS_HANDSHAKE: &str = "(tls handshake)";
/// What a protocol's connection set-up (PostgreSQL's startup, authentication, Terminate) is
/// filed under where a class name is needed; like a TLS handshake, it is no request.
pub const CONNECTION_SETUP: &str = "(connection set-up)";

/// What a turn on a connection the server opened to call an upstream is filed under where a
/// class name is needed: a call made for the request being served, no request (docs/stack.md).
pub const UPSTREAM_CALL: &str = "(upstream call)";

/// Whether the tally counted `ev`, filed under `class`, as a request of the front (the
/// measured server): HTTP/2 connection frames, TLS handshakes, a protocol's connection set-up
/// and a call to an upstream are none, and an upstream hop's request is its hop's
/// (docs/stack.md).
pub fn counts_as_request(ev: &reqcost_record::RequestEvent, class: &str) -> bool {
    ev.hop == 0 && ev.is_request() && class != CONNECTION_SETUP && class != UPSTREAM_CALL
}

/// Distinct classes (and clients) any per-request table tracks before filing the rest under
/// `(other)`: bounded memory for any duration.
pub const KEY_CAP: usize = 1024;
