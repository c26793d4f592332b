//! memcached's text protocol: a command is a line (`get k1 k2\r\n` is one, whatever its keys),
//! and a storage command's line (`set`, `add`, `replace`, `append`, `prepend`, `cas`, the meta
//! `ms`) is followed by a data block of the bytes it names and CRLF, which is not a command.
//! Recognised on a connection by its first word, one of memcached's commands in lower case
//! (HTTP's methods are upper case); the binary protocol (magic 0x80) is not read.

use super::{Protocol, Turn, Wire};

/// The commands a connection is recognised by when its protocol is not known yet.
const COMMANDS: &[&[u8]] = &[
    b"get",
    b"gets",
    b"gat",
    b"gats",
    b"set",
    b"add",
    b"replace",
    b"append",
    b"prepend",
    b"cas",
    b"delete",
    b"incr",
    b"decr",
    b"touch",
    b"mg",
    b"ms",
    b"md",
    b"mn",
    b"ma",
    b"me",
    b"stats",
    b"version",
    b"flush_all",
    b"verbosity",
];

/// Reads `head`, the first bytes of the `bytes_in` a turn read, as memcached commands. `known`
/// says the connection spoke it before: then any lower-case word names a command, and a line
/// that does not begin with one is unparsed.
pub fn parse(head: &[u8], bytes_in: u64, known: bool) -> Option<Wire<'_>> {
    let wire = |turn, pipelined| Wire {
        protocol: Protocol::Memcached,
        turn,
        pipelined,
    };
    let line_end = head.iter().position(|&b| b == b'\n');
    let line = &head[..line_end.unwrap_or(head.len())];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    // The name ends where a space or the line's end says it does, never where the head does.
    let len = head
        .iter()
        .take_while(|&&b| b.is_ascii_lowercase() || b == b'_')
        .count();
    let named = (1..=16).contains(&len) && matches!(head.get(len), Some(b' ' | b'\r' | b'\n'));
    if !named {
        return known.then(|| wire(Turn::Unparsed(Protocol::Memcached), false));
    }
    let name = &head[..len];
    let mut words = line.split(|&b| b == b' ').filter(|w| !w.is_empty()).skip(1);
    if !known {
        let whole_or_cut = line_end.is_some() || (head.len() as u64) < bytes_in;
        if !COMMANDS.contains(&name) || !whole_or_cut || http_version(line) {
            return None;
        }
    }
    let Some(at) = line_end else {
        return Some(wire(Turn::Command(name), false));
    };
    let data = data_index(name)
        .and_then(|i| words.nth(i - 1))
        .and_then(|n| std::str::from_utf8(n).ok()?.parse::<u64>().ok());
    // Where the first command ends: past its line, and its data block when it has one.
    let end = (at as u64 + 1).saturating_add(data.map_or(0, |n| n.saturating_add(2)));
    Some(wire(Turn::Command(name), end < bytes_in))
}

/// The word of a storage command's line that gives its data block's length, counted after
/// the command's name: `set k flags exptime bytes`, `ms k bytes`.
fn data_index(name: &[u8]) -> Option<usize> {
    match name {
        b"set" | b"add" | b"replace" | b"append" | b"prepend" | b"cas" => Some(4),
        b"ms" => Some(2),
        _ => None,
    }
}

/// Whether the line ends as an HTTP/1 request line does.
fn http_version(line: &[u8]) -> bool {
    line.windows(7).any(|w| w == b" HTTP/1")
}
