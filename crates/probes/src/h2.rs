//! HTTP/2 requests classed by method and path: the header blocks the kernel hands over
//! (src/bpf/h2.bpf.h: each read's part of a HEADERS or CONTINUATION frame, numbered per
//! connection, in the ring buffer before the request event of the part it was read in) are put
//! back together and decoded with HPACK, one dynamic table per connection (RFC 7541). Each
//! stream the kernel counted in an event becomes a request event of its own, named
//! `METHOD /path` (docs/tls.md).
//!
//! A table is only as good as every block before it: once a piece is missing (a gap in the
//! numbers, a frame cut short) or a block does not decode, the connection's table is not trusted
//! any more and its later streams are left unnamed (`(http2)`), never guessed.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

use loona_hpack::Decoder;
use reqcost_record::RequestEvent;

const HEADERS: u8 = 1;
const CONTINUATION: u8 = 9;
/// h2_piece.type of the record that says the kernel lost the frames (H2_SYNC_LOST).
const SYNC_LOST: u8 = 0xff;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// Connections followed at once at most, as the kernel's table (MAX_CONNS): one whose close
/// was never seen is forgotten before memory grows without bound.
const MAX_CONNS: usize = 65536;
/// SETTINGS_HEADER_TABLE_SIZE until a server says otherwise (RFC 9113, 6.5.2).
const TABLE_SIZE: usize = 4096;
/// The largest table a client's size update may ask for: a bound on memory per connection.
const TABLE_SIZE_MAX: usize = 65536;
/// Offset of `data` in struct h2_piece (reqcost.h).
pub(crate) const PIECE_HEADER: usize = 48;

/// One h2_piece record as the ring buffer carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Piece<'a> {
    pub conn_id: u64,
    pub seq: u32,
    pub piece: u32,
    pub stream: u32,
    pub frame_len: u32,
    pub offset: u32,
    pub kind: u8,
    pub flags: u8,
    pub data: &'a [u8],
}

impl Piece<'_> {
    /// The record, when it is a piece (its first 8 bytes are 0, where an event has its
    /// connection id) and whole.
    pub(crate) fn parse(record: &[u8]) -> Option<Piece<'_>> {
        let u32_at = |at: usize| u32::from_ne_bytes(record[at..at + 4].try_into().unwrap());
        if record.len() < PIECE_HEADER || record[..8] != [0; 8] {
            return None;
        }
        let len = u32_at(36) as usize;
        Some(Piece {
            conn_id: u64::from_ne_bytes(record[8..16].try_into().unwrap()),
            seq: u32_at(16),
            piece: u32_at(20),
            stream: u32_at(24),
            frame_len: u32_at(28),
            offset: u32_at(32),
            kind: record[40],
            flags: record[41],
            data: record.get(PIECE_HEADER..PIECE_HEADER + len)?,
        })
    }
}

/// An HPACK decoder that keeps what a request is called: `METHOD /path`.
pub(crate) struct Hpack(Decoder<'static>);

impl Hpack {
    /// A decoder whose dynamic table holds `table_size` bytes (SETTINGS_HEADER_TABLE_SIZE).
    pub(crate) fn new(table_size: usize) -> Hpack {
        let mut decoder = Decoder::new();
        decoder.set_max_allowed_table_size(TABLE_SIZE_MAX);
        decoder.set_max_table_size(table_size);
        Hpack(decoder)
    }

    /// Decodes one whole header block, handing each field to `field`; None when it does not
    /// decode (the table is then unknown).
    pub(crate) fn decode(
        &mut self,
        block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]),
    ) -> Option<()> {
        self.0.decode_with_cb(block, |n, v| field(&n, &v)).ok()
    }

    /// The request a block names: `METHOD /path` (`*` without a path, as CONNECT has none).
    pub(crate) fn request(&mut self, block: &[u8]) -> Option<Vec<u8>> {
        let (mut method, mut path) = (None, None);
        self.decode(block, |name, value| match name {
            b":method" => method = Some(value.to_vec()),
            b":path" => path = Some(value.to_vec()),
            _ => {}
        })?;
        let mut head = method.unwrap_or_else(|| b"?".to_vec());
        head.push(b' ');
        head.extend(path.as_deref().unwrap_or(b"*"));
        Some(head)
    }
}

/// A frame whose payload is coming in pieces.
struct Frame {
    kind: u8,
    flags: u8,
    stream: u32,
    len: usize,
    seq: u32,
    payload: Vec<u8>,
}

/// A header block whose CONTINUATION frames are still to come.
struct Block {
    stream: u32,
    /// The part of the connection its HEADERS frame was read in: where its stream is counted.
    seq: u32,
    /// Whether the HEADERS frame opened a stream (a later one on the stream is trailers).
    opens: bool,
    bytes: Vec<u8>,
}

struct Conn {
    hpack: Hpack,
    next_piece: u32,
    trusted: bool,
    /// The kernel lost the frames and the events have not said so yet.
    sync_lost: bool,
    frame: Option<Frame>,
    block: Option<Block>,
    last_stream: u32,
    /// Streams decoded, with the part they were read in, waiting for its event.
    heads: VecDeque<(u32, Vec<u8>)>,
}

impl Conn {
    fn new() -> Conn {
        Conn {
            hpack: Hpack::new(TABLE_SIZE),
            next_piece: 0,
            trusted: true,
            sync_lost: false,
            frame: None,
            block: None,
            last_stream: 0,
            heads: VecDeque::new(),
        }
    }

    /// The table can no longer be trusted: nothing more is decoded on the connection.
    fn distrust(&mut self) {
        self.trusted = false;
        self.frame = None;
        self.block = None;
    }

    fn piece(&mut self, p: &Piece) {
        if p.piece != self.next_piece {
            self.distrust();
        }
        self.next_piece = p.piece.wrapping_add(1);
        if p.kind == SYNC_LOST {
            self.sync_lost = true;
            self.distrust();
        }
        if !self.trusted {
            return;
        }
        if p.offset == 0 {
            if self.frame.is_some() {
                return self.distrust();
            }
            self.frame = Some(Frame {
                kind: p.kind,
                flags: p.flags,
                stream: p.stream,
                len: p.frame_len as usize,
                seq: p.seq,
                payload: Vec::with_capacity(p.frame_len as usize),
            });
        }
        let Some(f) = self.frame.as_mut() else {
            return self.distrust();
        };
        if f.payload.len() != p.offset as usize
            || (f.kind, f.stream, f.len) != (p.kind, p.stream, p.frame_len as usize)
            || f.payload.len() + p.data.len() > f.len
        {
            return self.distrust();
        }
        f.payload.extend_from_slice(p.data);
        if f.payload.len() == f.len {
            let f = self.frame.take().expect("just seen");
            self.frame_done(f);
        }
    }

    fn frame_done(&mut self, f: Frame) {
        let Some(fragment) = fragment(&f) else {
            return self.distrust();
        };
        match (f.kind, self.block.as_mut()) {
            (HEADERS, None) => {
                let opens = f.stream & 1 == 1 && f.stream > self.last_stream;
                if opens {
                    self.last_stream = f.stream;
                }
                self.block = Some(Block {
                    stream: f.stream,
                    seq: f.seq,
                    opens,
                    bytes: fragment.to_vec(),
                });
            }
            (CONTINUATION, Some(b)) if b.stream == f.stream => b.bytes.extend_from_slice(fragment),
            _ => return self.distrust(),
        }
        if f.flags & END_HEADERS == 0 {
            return;
        }
        let b = self.block.take().expect("just set");
        match self.hpack.request(&b.bytes) {
            Some(head) if b.opens => self.heads.push_back((b.seq, head)),
            Some(_) => {}
            None => self.distrust(),
        }
    }

    /// The heads of the streams read in part `seq`, in order; those of earlier parts, whose
    /// events never came, are dropped.
    fn heads_of(&mut self, seq: u32) -> Vec<Vec<u8>> {
        while self.heads.front().is_some_and(|(s, _)| *s < seq) {
            self.heads.pop_front();
        }
        let mut heads = Vec::new();
        while self.heads.front().is_some_and(|(s, _)| *s == seq) {
            heads.extend(self.heads.pop_front().map(|(_, h)| h));
        }
        heads
    }
}

/// The header block fragment of a whole HEADERS or CONTINUATION frame: its payload without
/// padding and priority. None when the frame contradicts itself.
fn fragment(f: &Frame) -> Option<&[u8]> {
    let mut payload = f.payload.as_slice();
    if f.kind != HEADERS {
        return Some(payload);
    }
    if f.flags & PADDED != 0 {
        let (&pad, rest) = payload.split_first()?;
        payload = rest.get(..rest.len().checked_sub(pad as usize)?)?;
    }
    if f.flags & PRIORITY != 0 {
        payload = payload.get(5..)?;
    }
    Some(payload)
}

/// The HTTP/2 connections being followed, by connection id.
#[derive(Default)]
pub(crate) struct Http2Requests {
    conns: HashMap<u64, Conn>,
}

impl Http2Requests {
    pub(crate) fn piece(&mut self, p: &Piece) {
        if self.conns.len() >= MAX_CONNS && !self.conns.contains_key(&p.conn_id) {
            self.conns.clear();
        }
        self.conns
            .entry(p.conn_id)
            .or_insert_with(Conn::new)
            .piece(p);
    }

    /// Hands `ev` to `out`, or on an HTTP/2 connection one event per stream it holds, each named
    /// by its decoded head. `pieces` is how many pieces the connection had numbered by the
    /// event's end: fewer received means some were lost.
    pub(crate) fn event(
        &mut self,
        ev: RequestEvent,
        pieces: u32,
        out: &mut dyn FnMut(RequestEvent),
    ) {
        if ev.http2_streams.is_none() {
            return out(ev);
        }
        let (heads, lost) = match self.conns.get_mut(&ev.conn_id) {
            Some(conn) => {
                if pieces > conn.next_piece {
                    conn.distrust();
                }
                let heads = if conn.trusted {
                    conn.heads_of(ev.seq)
                } else {
                    Vec::new()
                };
                (heads, std::mem::take(&mut conn.sync_lost))
            }
            None => (Vec::new(), false),
        };
        if ev.closed {
            self.conns.remove(&ev.conn_id);
        }
        streams_apart(ev, heads, lost, out);
    }
}

impl Http2Requests {
    /// A request still open on a connection (in flight), as [`Http2Requests::event`] would hand
    /// it over with the header blocks received so far, leaving the connection's state as it is.
    pub(crate) fn open(&self, ev: RequestEvent, out: &mut dyn FnMut(RequestEvent)) {
        if ev.http2_streams.is_none() {
            return out(ev);
        }
        let heads = match self.conns.get(&ev.conn_id) {
            Some(conn) if conn.trusted => conn
                .heads
                .iter()
                .filter(|(seq, _)| *seq == ev.seq)
                .map(|(_, head)| head.clone())
                .collect(),
            _ => Vec::new(),
        };
        streams_apart(ev, heads, false, out);
    }
}

/// `total` shared out among `k` parts: part `i`'s share, the remainder going to the first.
fn share(total: u64, k: u64, i: u64) -> u64 {
    total / k + u64::from(i < total % k)
}

/// Stream `i` of `k`'s top syscalls: each count's equal share, the remainders dealt in turn
/// from stream 0 across the counts, so that a stream's counts add up to no more than its
/// [`share`] of the syscalls (shared apart, each count's remainder went to the first streams
/// and their sum could pass it); most first.
fn top_share(top: &[(Cow<'static, str>, u32)], k: u64, i: u64) -> Vec<(Cow<'static, str>, u32)> {
    let mut dealt = 0;
    let mut out: Vec<_> = top
        .iter()
        .filter_map(|(name, n)| {
            let n = u64::from(*n);
            let extra = (i + k - dealt % k) % k < n % k;
            dealt += n % k;
            let v = n / k + u64::from(extra);
            (v > 0).then(|| (name.clone(), v as u32))
        })
        .collect();
    out.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    out
}

/// One event per stream of `ev`, with an equal share of its CPU, syscalls and bytes (the streams
/// were read and answered together: docs/tls.md says where that is wrong), each with its head
/// or none. An event without a stream is handed on alone, without a head.
fn streams_apart(
    ev: RequestEvent,
    heads: Vec<Vec<u8>>,
    lost: bool,
    out: &mut dyn FnMut(RequestEvent),
) {
    let k = u64::from(ev.http2_streams.unwrap_or(0));
    if k <= 1 {
        return out(RequestEvent {
            head: heads.into_iter().next().unwrap_or_default(),
            http2_lost: lost,
            ..ev
        });
    }
    let mut heads = heads.into_iter();
    for i in 0..k {
        let part = |v: u64| share(v, k, i);
        let syscalls = part(u64::from(ev.syscalls)) as u32;
        let top_syscalls = top_share(&ev.top_syscalls, k, i);
        let unlisted = syscalls.saturating_sub(top_syscalls.iter().map(|(_, n)| n).sum());
        out(RequestEvent {
            cpu_ns: part(ev.cpu_ns),
            syscalls,
            top_syscalls,
            // Shared as the listed counts are (each at least the floor of its share), and no
            // more than the stream's calls left out.
            unlisted_max: ev.unlisted_max.map(|m| (m / k as u32).min(unlisted)),
            bytes_in: part(ev.bytes_in),
            bytes_out: part(ev.bytes_out),
            unacked_out: part(ev.unacked_out),
            head: heads.next().unwrap_or_default(),
            http2_streams: Some(1),
            http2_lost: lost && i == 0,
            closed: ev.closed && i == k - 1,
            ..ev.clone()
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const END_STREAM: u8 = 0x1;

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|d| u8::from_str_radix(std::str::from_utf8(d).unwrap(), 16).unwrap())
            .collect()
    }

    fn fields(hpack: &mut Hpack, block: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        hpack
            .decode(&hex(block), |n, v| {
                out.push((
                    String::from_utf8_lossy(n).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                ))
            })
            .expect("decodes");
        out
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// RFC 7541 C.3 (requests, no Huffman) and C.4 (the same with Huffman): three requests on
    /// one connection, each referring to the table the previous ones filled.
    #[test]
    fn rfc7541_requests_decode_to_method_and_path() {
        let c3 = [
            "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
            "8286 84be 5808 6e6f 2d63 6163 6865",
            "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
        ];
        let c4 = [
            "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
            "8286 84be 5886 a8eb 1064 9cbf",
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        ];
        for blocks in [c3, c4] {
            let mut hpack = Hpack::new(TABLE_SIZE);
            let heads: Vec<Vec<u8>> = blocks
                .iter()
                .map(|b| hpack.request(&hex(b)).expect("decodes"))
                .collect();
            assert_eq!(heads, [&b"GET /"[..], b"GET /", b"GET /index.html"]);
        }
        let mut hpack = Hpack::new(TABLE_SIZE);
        hpack.request(&hex(c4[0])).unwrap();
        hpack.request(&hex(c4[1])).unwrap();
        assert_eq!(
            fields(&mut hpack, c4[2]),
            pairs(&[
                (":method", "GET"),
                (":scheme", "https"),
                (":path", "/index.html"),
                (":authority", "www.example.com"),
                ("custom-key", "custom-value"),
            ])
        );
    }

    /// RFC 7541 C.5 (responses, no Huffman) and C.6 (with Huffman) with a 256-byte table: the
    /// second and third responses evict entries the first added.
    #[test]
    fn rfc7541_responses_decode_with_evictions() {
        let c5 = [
            "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 \
             2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70 \
             6c65 2e63 6f6d",
            "4803 3330 37c1 c0bf",
            "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d \
             54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049 \
             5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e \
             3d31",
        ];
        let c6 = [
            "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6 \
             2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
            "4883 640e ffc1 c0bf",
            "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab \
             77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f \
             9587 3160 65c0 03ed 4ee5 b106 3d50 07",
        ];
        let date = "Mon, 21 Oct 2013 20:13:21 GMT";
        let location = ("location", "https://www.example.com");
        let expected = [
            pairs(&[
                (":status", "302"),
                ("cache-control", "private"),
                ("date", date),
                location,
            ]),
            pairs(&[
                (":status", "307"),
                ("cache-control", "private"),
                ("date", date),
                location,
            ]),
            pairs(&[
                (":status", "200"),
                ("cache-control", "private"),
                ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
                location,
                ("content-encoding", "gzip"),
                (
                    "set-cookie",
                    "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
                ),
            ]),
        ];
        for blocks in [c5, c6] {
            let mut hpack = Hpack::new(256);
            for (block, want) in blocks.iter().zip(&expected) {
                assert_eq!(&fields(&mut hpack, block), want);
            }
        }
    }

    fn event(conn_id: u64, seq: u32, streams: u32) -> RequestEvent {
        RequestEvent {
            pid: 1,
            conn_id,
            seq,
            peer: "127.0.0.1:1000".parse().unwrap(),
            local_port: 443,
            cpu_ns: 1001,
            syscalls: 7,
            top_syscalls: vec![("recvfrom".into(), 3), ("writev".into(), 4)],
            unlisted_max: None,
            bytes_in: 100,
            bytes_out: 3001,
            first_in_ns: 1,
            last_out_ns: 2,
            end_ns: 3,
            last_ns: 0,
            head: b"\0\0\x06\x04".to_vec(),
            closed: false,
            tls: reqcost_record::TlsPart::Plaintext,
            tls_resumed: None,
            http2_streams: Some(streams),
            http2_lost: false,
            commands: None,
            in_flight: false,
            unacked_out: 0,
            caused_by: None,
            hop: 0,
            upstream_call: false,
        }
    }

    /// A HEADERS frame of `block` on `stream` with END_HEADERS (and END_STREAM), as pieces of at
    /// most `cut` bytes numbered from `first`.
    fn headers<'a>(
        stream: u32,
        block: &'a [u8],
        first: u32,
        seq: u32,
        cut: usize,
    ) -> Vec<Piece<'a>> {
        block
            .chunks(cut)
            .enumerate()
            .map(|(i, data)| Piece {
                conn_id: 9,
                seq,
                piece: first + i as u32,
                stream,
                frame_len: block.len() as u32,
                offset: (i * cut) as u32,
                kind: HEADERS,
                flags: END_HEADERS | END_STREAM,
                data,
            })
            .collect()
    }

    fn run(h2: &mut Http2Requests, ev: RequestEvent, pieces: u32) -> Vec<RequestEvent> {
        let mut out = Vec::new();
        h2.event(ev, pieces, &mut |e| out.push(e));
        out
    }

    fn heads(events: &[RequestEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| String::from_utf8_lossy(&e.head).into_owned())
            .collect()
    }

    /// Two streams read together, one of them in two pieces (its frame spanned two reads):
    /// two events named by their paths, sharing the CPU, syscalls and bytes with nothing lost.
    #[test]
    fn an_event_of_two_streams_becomes_two_named_requests() {
        let (a, b) = (
            hex("8286 84"),
            hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d"),
        );
        let mut h2 = Http2Requests::default();
        for p in headers(1, &a, 0, 0, 16)
            .iter()
            .chain(&headers(3, &b, 1, 0, 10))
        {
            h2.piece(p);
        }
        let out = run(&mut h2, event(9, 0, 2), 3);
        assert_eq!(heads(&out), ["GET /", "GET /"]);
        assert_eq!(out.iter().map(|e| e.cpu_ns).sum::<u64>(), 1001);
        assert_eq!(out.iter().map(|e| e.bytes_out).sum::<u64>(), 3001);
        assert_eq!(out.iter().map(|e| e.syscalls).sum::<u32>(), 7);
        // recvfrom 3 and writev 4 over two streams: the remainder of 3 to the first, of 4
        // none; each stream's within its syscalls (4 and 3).
        assert_eq!(
            out[0].top_syscalls,
            [("recvfrom".into(), 2), ("writev".into(), 2)]
        );
        assert_eq!(
            out[1].top_syscalls,
            [("writev".into(), 2), ("recvfrom".into(), 1)]
        );
        for e in &out {
            let listed: u32 = e.top_syscalls.iter().map(|(_, n)| n).sum();
            assert!(listed <= e.syscalls, "{e:?}");
        }
        assert!(out
            .iter()
            .all(|e| e.http2_streams == Some(1) && !e.http2_lost));
    }

    /// Five syscalls of one call each over three streams: each stream lists its share of the
    /// syscalls (2, 2, 1), not a remainder of every count (which listed 5 on the first).
    #[test]
    fn a_streams_top_syscalls_stay_within_its_syscalls() {
        let top: Vec<(Cow<'static, str>, u32)> = ["a", "b", "c", "d", "e"]
            .map(|n| (Cow::Borrowed(n), 1))
            .to_vec();
        let listed: Vec<u32> = (0..3)
            .map(|i| top_share(&top, 3, i).iter().map(|(_, n)| n).sum())
            .collect();
        assert_eq!(listed, [2, 2, 1]);
        assert_eq!(
            listed,
            (0..3).map(|i| share(5, 3, i) as u32).collect::<Vec<_>>()
        );
    }

    /// A gap in the piece numbers: the table is not trusted from there on, so this stream and
    /// every later one stay unnamed, even when their own blocks arrive whole.
    #[test]
    fn a_missing_piece_leaves_the_connections_later_streams_unnamed() {
        let block = hex("8286 84");
        let mut h2 = Http2Requests::default();
        for p in headers(1, &block, 0, 0, 64) {
            h2.piece(&p);
        }
        assert_eq!(heads(&run(&mut h2, event(9, 0, 1), 1)), ["GET /"]);
        for p in headers(5, &block, 2, 1, 64) {
            h2.piece(&p);
        }
        assert_eq!(heads(&run(&mut h2, event(9, 1, 1), 3)), [""]);
        for p in headers(7, &block, 3, 2, 64) {
            h2.piece(&p);
        }
        assert_eq!(heads(&run(&mut h2, event(9, 2, 1), 4)), [""]);
        // A last piece that never arrived is seen from the event's count.
        let mut h2 = Http2Requests::default();
        for p in headers(1, &block, 0, 0, 64) {
            h2.piece(&p);
        }
        assert_eq!(heads(&run(&mut h2, event(9, 0, 1), 2)), [""]);
    }

    /// The kernel lost the frames: the next event says so once.
    #[test]
    fn lost_sync_is_told_on_the_next_event() {
        let mut h2 = Http2Requests::default();
        h2.piece(&Piece {
            conn_id: 9,
            seq: 0,
            piece: 0,
            stream: 0,
            frame_len: 0,
            offset: 0,
            kind: SYNC_LOST,
            flags: 0,
            data: &[],
        });
        let out = run(&mut h2, event(9, 0, 0), 1);
        assert!(out[0].http2_lost && out[0].head.is_empty());
        assert!(!run(&mut h2, event(9, 1, 0), 1)[0].http2_lost);
    }

    /// A request in flight is named from the blocks received so far, which stay for its event.
    #[test]
    fn an_open_request_is_named_without_taking_its_heads() {
        let block = hex("8286 84");
        let mut h2 = Http2Requests::default();
        for p in headers(1, &block, 0, 0, 64) {
            h2.piece(&p);
        }
        let mut open = Vec::new();
        h2.open(event(9, 0, 1), &mut |e| open.push(e));
        assert_eq!(heads(&open), ["GET /"]);
        assert_eq!(heads(&run(&mut h2, event(9, 0, 1), 1)), ["GET /"]);
    }

    /// Padding and priority are cut from a HEADERS frame before its block is decoded; a
    /// CONTINUATION frame ends the block.
    #[test]
    fn padded_prioritised_and_continued_blocks_decode() {
        let mut payload = vec![2u8];
        payload.extend([0, 0, 0, 0, 16]);
        payload.extend(hex("8286"));
        payload.extend([0, 0]);
        let tail = hex("8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d");
        let mut pieces = vec![Piece {
            conn_id: 9,
            seq: 0,
            piece: 0,
            stream: 1,
            frame_len: payload.len() as u32,
            offset: 0,
            kind: HEADERS,
            flags: PADDED | PRIORITY | END_STREAM,
            data: &payload,
        }];
        pieces.push(Piece {
            piece: 1,
            frame_len: tail.len() as u32,
            kind: CONTINUATION,
            flags: END_HEADERS,
            data: &tail,
            ..pieces[0]
        });
        let mut h2 = Http2Requests::default();
        for p in &pieces {
            h2.piece(p);
        }
        assert_eq!(heads(&run(&mut h2, event(9, 0, 1), 2)), ["GET /"]);
    }

    #[test]
    fn a_piece_record_is_told_from_an_event() {
        let mut record = vec![0u8; PIECE_HEADER + 3];
        record[8] = 9;
        record[36] = 3;
        record[40] = HEADERS;
        record[PIECE_HEADER..].copy_from_slice(b"abc");
        let p = Piece::parse(&record).unwrap();
        assert_eq!((p.conn_id, p.kind, p.data), (9, HEADERS, &b"abc"[..]));
        record[0] = 1;
        assert_eq!(
            Piece::parse(&record),
            None,
            "an event's connection id is never 0"
        );
    }
}
