//! PostgreSQL's v3 frontend protocol (the client's messages): the untyped set-up packets a
//! connection opens with, then typed frames (a type byte, a 4-byte big-endian length that
//! counts itself, the body).

use super::{Protocol, Turn, Wire};

/// The codes an untyped 8-byte (16 for a cancel) packet carries instead of a protocol version.
const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;
const CANCEL_REQUEST: u32 = 80_877_102;
const PROTOCOL_3_0: u32 = 3 << 16;
/// Larger than any startup packet a client sends (the server refuses those over 10 000 bytes).
const STARTUP_MAX: u32 = 10_000;

/// Frontend message types: set-up ones and requests. Anything else is not this protocol.
const SETUP_TYPES: &[u8] = b"pX";
const REQUEST_TYPES: &[u8] = b"QPBDESHCFdcf";

/// Reads `head`, the first bytes of the `bytes_in` a turn read, as PostgreSQL frontend
/// messages. `known` says the connection spoke PostgreSQL before, so that broken framing is
/// unparsed PostgreSQL rather than some other protocol.
pub fn parse(head: &[u8], bytes_in: u64, known: bool) -> Option<Wire<'_>> {
    let wire = |turn| Wire {
        protocol: Protocol::Postgres,
        turn,
        pipelined: false,
    };
    if head.is_empty() {
        return None;
    }
    if let Some(setup) = untyped(head, bytes_in) {
        return Some(wire(setup));
    }
    match Frames::read(head, bytes_in) {
        Some(frames) => Some(frames.wire()),
        None => known.then(|| wire(Turn::Unparsed(Protocol::Postgres))),
    }
}

/// The untyped packets a connection opens with (SSLRequest, GSSENCRequest, CancelRequest, the
/// startup packet of protocol 3.0), the turn's only bytes: the connection's set-up.
fn untyped(head: &[u8], bytes_in: u64) -> Option<Turn<'static>> {
    let len = be32(head.get(0..4)?);
    let code = be32(head.get(4..8)?);
    let setup = u64::from(len) == bytes_in
        && matches!(
            (len, code),
            (8, SSL_REQUEST | GSSENC_REQUEST)
                | (16, CANCEL_REQUEST)
                | (9..=STARTUP_MAX, PROTOCOL_3_0)
        );
    setup.then_some(Turn::Setup(Protocol::Postgres))
}

/// A turn's typed frames, as far as its head holds them.
struct Frames<'a> {
    /// The first request message's turn, None while only set-up messages were seen.
    first: Option<Turn<'a>>,
    setup: bool,
    /// Requests the head shows: Queries and Executes, as the probes count them.
    requests: u32,
}

impl<'a> Frames<'a> {
    /// The frames of `head`, when they chain: every frame starts with a frontend type and a
    /// length of at least 4, and none ends past the turn's `bytes_in` (the last may end past
    /// the head). None for anything else.
    fn read(head: &'a [u8], bytes_in: u64) -> Option<Frames<'a>> {
        let mut frames = Frames {
            first: None,
            setup: false,
            requests: 0,
        };
        let cut = (head.len() as u64) < bytes_in;
        let mut at = 0;
        while at < head.len() {
            let kind = head[at];
            if !SETUP_TYPES.contains(&kind) && !REQUEST_TYPES.contains(&kind) {
                return None;
            }
            let Some(len) = head.get(at + 1..at + 5).map(be32) else {
                // A frame header cut by the head's end: the frames so far chain.
                return cut.then_some(frames);
            };
            let end = at as u64 + 1 + u64::from(len);
            if len < 4 || end > bytes_in {
                return None;
            }
            let end = usize::try_from(end).unwrap_or(usize::MAX);
            frames.add(kind, &head[at + 5..end.min(head.len())]);
            at = end;
        }
        Some(frames)
    }

    fn add(&mut self, kind: u8, body: &'a [u8]) {
        if SETUP_TYPES.contains(&kind) {
            self.setup = true;
            return;
        }
        match kind {
            b'Q' => {
                self.requests += 1;
                self.first.get_or_insert(Turn::Query(until_nul(body)));
            }
            b'E' => self.requests += 1,
            b'P' | b'B' => {
                self.first.get_or_insert_with(|| statement_turn(kind, body));
            }
            b'd' | b'c' | b'f' => {
                self.first.get_or_insert(Turn::Message("(copy data)"));
            }
            b'F' => {
                self.first.get_or_insert(Turn::Message("(function call)"));
            }
            _ => {}
        }
    }

    fn wire(self) -> Wire<'a> {
        let turn = match (self.first, self.setup) {
            (Some(turn), _) => turn,
            (None, true) => Turn::Setup(Protocol::Postgres),
            // Describe, Execute, Flush or Close without a statement of this turn named.
            (None, false) => Turn::Unnamed(None),
        };
        Wire {
            protocol: Protocol::Postgres,
            turn,
            pipelined: self.requests > 1,
        }
    }
}

/// The statement a Parse (its name, then its text) or a Bind (a portal's name, then the
/// statement's) names, with the text a Parse gives it.
/// Unparsed when the head ends before the name does.
fn statement_turn(kind: u8, body: &[u8]) -> Turn<'_> {
    let name = match kind {
        b'P' => Some(body),
        _ => body.iter().position(|&b| b == 0).map(|at| &body[at + 1..]),
    };
    let Some((field, name_end)) = name.and_then(|f| Some((f, f.iter().position(|&b| b == 0)?)))
    else {
        return Turn::Unparsed(Protocol::Postgres);
    };
    let text = (kind == b'P')
        .then(|| until_nul(&field[name_end + 1..]))
        .filter(|t| !t.is_empty());
    match name_end {
        0 => Turn::Unnamed(text),
        _ => Turn::Prepared {
            name: &field[..name_end],
            text,
        },
    }
}

fn until_nul(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

fn be32(bytes: &[u8]) -> u32 {
    u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]])
}
