//! Redis' RESP requests: an array of bulk strings (`*N\r\n$len\r\nNAME\r\n...`) whose first is
//! the command's name, or, on a connection known to speak RESP, an inline command (a text
//! line whose first word is the name).

use super::{Protocol, Turn, Wire};

/// Reads `head`, the first bytes of the `bytes_in` a turn read, as Redis commands. `known`
/// says the connection spoke RESP before: then broken framing is unparsed Redis, and a text
/// line an inline command.
pub fn parse(head: &[u8], bytes_in: u64, known: bool) -> Option<Wire<'_>> {
    let wire = |turn, pipelined| Wire {
        protocol: Protocol::Redis,
        turn,
        pipelined,
    };
    let unparsed = wire(Turn::Unparsed(Protocol::Redis), false);
    if head.first() == Some(&b'*') {
        return match array(head, bytes_in) {
            Array::Command { name, end } => Some(wire(Turn::Command(name), end < bytes_in)),
            Array::Broken => Some(unparsed),
            Array::NotResp => known.then_some(unparsed),
        };
    }
    if !known {
        return None;
    }
    let line_end = head.iter().position(|&b| b == b'\n');
    let line = &head[..line_end.unwrap_or(head.len())];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let name = line.split(|&b| b == b' ').find(|w| !w.is_empty());
    let pipelined = line_end.is_some_and(|at| (at as u64 + 1) < bytes_in);
    Some(match name {
        Some(name) if name.iter().all(u8::is_ascii_graphic) => wire(Turn::Command(name), pipelined),
        _ => unparsed,
    })
}

enum Array<'a> {
    /// A whole command: its name, and the offset its array ends at (past the head's end when
    /// the head is cut in one of its later arguments).
    Command { name: &'a [u8], end: u64 },
    /// Begins as RESP (`*N\r\n$`) and breaks, or is cut before its name ends.
    Broken,
    /// Not RESP.
    NotResp,
}

/// Reads the RESP array `head` opens with.
fn array(head: &[u8], bytes_in: u64) -> Array<'_> {
    let Some((count, mut at)) = number(head, 1) else {
        return Array::NotResp;
    };
    if count < 1 || head.get(at) != Some(&b'$') {
        return Array::NotResp;
    }
    let mut name = None;
    for _ in 0..count {
        let header = head
            .get(at)
            .filter(|&&b| b == b'$')
            .and_then(|_| number(head, at + 1));
        let Some((len, start)) = header else {
            return match name {
                // The head ends in a later argument: where the array ends is not seen.
                Some(name) if cut_in_header(head, at, bytes_in) => Array::Command {
                    name,
                    end: bytes_in,
                },
                _ => Array::Broken,
            };
        };
        let end = start as u64 + len + 2;
        if end > bytes_in {
            return Array::Broken;
        }
        let body = head.get(start..).unwrap_or_default();
        let whole = body.len() as u64 >= len + 2;
        if whole && &body[len as usize..len as usize + 2] != b"\r\n" {
            return Array::Broken;
        }
        if name.is_none() {
            if !whole || len == 0 {
                return Array::Broken;
            }
            name = Some(&body[..len as usize]);
        }
        at = usize::try_from(end).unwrap_or(usize::MAX);
    }
    match name {
        Some(name) => Array::Command {
            name,
            end: at as u64,
        },
        None => Array::Broken,
    }
}

/// The longest bulk-string header: `$`, 18 digits, CRLF.
const HEADER_MAX: usize = 22;

/// Whether a header at `at` may be one the head's end cuts: the turn read more than the head,
/// and fewer bytes than a header's longest are left in it.
fn cut_in_header(head: &[u8], at: usize, bytes_in: u64) -> bool {
    (head.len() as u64) < bytes_in && head.len().saturating_sub(at) < HEADER_MAX
}

/// The decimal number at `head[from..]` ended by CRLF, and the offset past the CRLF. At most
/// 18 digits, so that it fits.
fn number(head: &[u8], from: usize) -> Option<(u64, usize)> {
    let digits = head
        .get(from..)?
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    if digits == 0 || digits > 18 {
        return None;
    }
    let end = from + digits;
    if head.get(end..end + 2)? != b"\r\n" {
        return None;
    }
    let text = std::str::from_utf8(&head[from..end]).ok()?;
    Some((text.parse().ok()?, end + 2))
}
