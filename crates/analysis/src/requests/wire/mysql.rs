//! The MySQL client/server protocol as MariaDB and MySQL speak it (the client's packets): each
//! packet is a 3-byte little-endian payload length, a sequence id, the payload. The server
//! writes first (its greeting); the client answers with its handshake response (or an SSL
//! request first), sequence id 1, and further authentication rounds continue that sequence.
//! Every command starts a new sequence at 0 with its command byte.

use super::{Protocol, Turn, Wire};

/// A payload this long is continued by the next packet (a command over 16 MiB).
const CONTINUED: usize = 0xff_ffff;
/// The handshake response's capability flags: CLIENT_PROTOCOL_41, which every client since
/// MySQL 4.1 sets (and MariaDB's server requires), and CLIENT_SSL.
const PROTOCOL_41: u32 = 0x200;
const CLIENT_SSL: u32 = 0x800;
/// An SSL request is the handshake response's fixed part alone: capabilities, maximum packet
/// size, character set, 23 reserved bytes.
const SSL_REQUEST_LEN: usize = 32;
/// The reserved bytes of the fixed part (after capabilities, maximum packet size and character
/// set) that are zero in MySQL's and MariaDB's: the 23 but the last 4, MariaDB's extended
/// capabilities.
const RESERVED: std::ops::Range<usize> = 9..28;

const COM_QUIT: u8 = 0x01;
const COM_QUERY: u8 = 0x03;
const COM_STMT_PREPARE: u8 = 0x16;
const COM_STMT_EXECUTE: u8 = 0x17;
const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
const COM_STMT_CLOSE: u8 = 0x19;
const COM_STMT_FETCH: u8 = 0x1c;
const COM_STMT_BULK_EXECUTE: u8 = 0xfa;

/// The commands a client sends, by the name their class takes when nothing better names them.
/// Anything else is not this protocol.
fn command_name(command: u8) -> Option<&'static str> {
    Some(match command {
        COM_QUIT => "COM_QUIT",
        0x02 => "COM_INIT_DB",
        COM_QUERY => "COM_QUERY",
        0x04 => "COM_FIELD_LIST",
        0x05 => "COM_CREATE_DB",
        0x06 => "COM_DROP_DB",
        0x07 => "COM_REFRESH",
        0x08 => "COM_SHUTDOWN",
        0x09 => "COM_STATISTICS",
        0x0a => "COM_PROCESS_INFO",
        0x0c => "COM_PROCESS_KILL",
        0x0d => "COM_DEBUG",
        0x0e => "COM_PING",
        0x11 => "COM_CHANGE_USER",
        0x12 => "COM_BINLOG_DUMP",
        COM_STMT_PREPARE => "COM_STMT_PREPARE",
        COM_STMT_EXECUTE => "COM_STMT_EXECUTE",
        COM_STMT_SEND_LONG_DATA => "COM_STMT_SEND_LONG_DATA",
        COM_STMT_CLOSE => "COM_STMT_CLOSE",
        0x1a => "COM_STMT_RESET",
        0x1b => "COM_SET_OPTION",
        COM_STMT_FETCH => "COM_STMT_FETCH",
        0x1f => "COM_RESET_CONNECTION",
        COM_STMT_BULK_EXECUTE => "COM_STMT_BULK_EXECUTE",
        _ => return None,
    })
}

/// Whether `turn` forgets the connection's prepared statements (whether the server numbers
/// later ones afresh is not known): COM_CHANGE_USER and COM_RESET_CONNECTION.
pub fn forgets_statements(turn: &Turn<'_>) -> bool {
    matches!(
        turn,
        Turn::Message("COM_CHANGE_USER" | "COM_RESET_CONNECTION")
    )
}

/// Reads `head`, the first bytes of the `bytes_in` a turn read, as MySQL client packets.
/// `known` says the connection spoke MySQL before, so that broken framing is unparsed MySQL
/// and a packet that continues a sequence (an authentication round) is its set-up.
pub fn parse(head: &[u8], bytes_in: u64, known: bool) -> Option<Wire<'_>> {
    let wire = |turn, pipelined| Wire {
        protocol: Protocol::MySql,
        turn,
        pipelined,
    };
    let Some(header) = header(head, 0) else {
        return known.then(|| wire(Turn::Unparsed(Protocol::MySql), false));
    };
    if header.seq != 0 {
        let setup = known || handshake_response(head, bytes_in);
        return setup.then(|| wire(Turn::Setup(Protocol::MySql), false));
    }
    match Commands::read(head, bytes_in) {
        Some(commands) => Some(wire(commands.turn(), commands.requests > 1)),
        None => known.then(|| wire(Turn::Unparsed(Protocol::MySql), false)),
    }
}

struct Header {
    len: usize,
    seq: u8,
}

fn header(head: &[u8], at: usize) -> Option<Header> {
    let h = head.get(at..at + 4)?;
    Some(Header {
        len: usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16,
        seq: h[3],
    })
}

/// A handshake response or SSL request (sequence id 1), the turn's only packet: protocol 4.1
/// capabilities and the reserved bytes zero.
fn handshake_response(head: &[u8], bytes_in: u64) -> bool {
    let Some(h) = header(head, 0) else {
        return false;
    };
    let Some(fixed) = head.get(4..4 + SSL_REQUEST_LEN) else {
        return false;
    };
    let caps = u32::from_le_bytes([fixed[0], fixed[1], fixed[2], fixed[3]]);
    h.seq == 1
        && h.len as u64 + 4 == bytes_in
        && caps & PROTOCOL_41 != 0
        && (h.len > SSL_REQUEST_LEN || (h.len == SSL_REQUEST_LEN && caps & CLIENT_SSL != 0))
        && fixed[RESERVED].iter().all(|&b| b == 0)
}

/// A turn's command packets, as far as its head holds them.
struct Commands<'a> {
    /// The first command that is answered: the turn's request.
    first: Option<Turn<'a>>,
    /// Commands the server answers (COM_STMT_CLOSE and COM_STMT_SEND_LONG_DATA are not, and
    /// COM_QUIT ends the connection).
    requests: u32,
    /// COM_STMT_SEND_LONG_DATA was sent: an execute follows in the same turn.
    long_data: bool,
}

impl<'a> Commands<'a> {
    /// The packets of `head`, when they chain: each a command with sequence id 0 (or the
    /// continuation of one over 16 MiB), none ending past the turn's `bytes_in` and the last
    /// ending at it (or past the head). None for anything else.
    fn read(head: &'a [u8], bytes_in: u64) -> Option<Commands<'a>> {
        let mut commands = Commands {
            first: None,
            requests: 0,
            long_data: false,
        };
        let whole = head.len() as u64 == bytes_in;
        let mut at = 0;
        let mut continued = None;
        while at < head.len() {
            let Some(h) = header(head, at) else {
                // A header cut by the head's end: the packets so far chain.
                return (!whole).then_some(commands);
            };
            let end = at as u64 + 4 + h.len as u64;
            if end > bytes_in {
                return None;
            }
            match continued {
                Some(seq) if h.seq != seq => return None,
                Some(_) => {}
                None => {
                    if h.seq != 0 || h.len == 0 {
                        return None;
                    }
                    match head.get(at + 4) {
                        Some(&command) => {
                            let end = usize::try_from(end).unwrap_or(usize::MAX);
                            commands.add(command, &head[at + 5..end.min(head.len())])?;
                        }
                        None => return (!whole).then_some(commands),
                    }
                }
            }
            continued = (h.len == CONTINUED).then(|| h.seq.wrapping_add(1));
            at = usize::try_from(end).unwrap_or(usize::MAX);
        }
        Some(commands)
    }

    fn add(&mut self, command: u8, body: &'a [u8]) -> Option<()> {
        let name = command_name(command)?;
        let turn = match command {
            COM_STMT_CLOSE | COM_QUIT => return Some(()),
            COM_STMT_SEND_LONG_DATA => {
                self.long_data = true;
                return Some(());
            }
            COM_QUERY => Turn::Query(body),
            COM_STMT_PREPARE => Turn::Prepare(body),
            COM_STMT_EXECUTE | COM_STMT_FETCH | COM_STMT_BULK_EXECUTE => match body.get(..4) {
                Some(id) => Turn::Execute(u32::from_le_bytes([id[0], id[1], id[2], id[3]])),
                None => Turn::Unparsed(Protocol::MySql),
            },
            _ => Turn::Message(name),
        };
        self.requests += 1;
        self.first.get_or_insert(turn);
        Some(())
    }

    /// The turn's first answered command. A turn of none is the connection's own: statements
    /// closed, then COM_QUIT or the connection's close; also one whose head holds only closes
    /// of more statements than it has room for, whose next command is then counted with the
    /// set-up. Long data sent for an execute past the head: the execute is counted, unparsed.
    fn turn(&self) -> Turn<'a> {
        match self.first {
            Some(turn) => turn,
            None if self.long_data => Turn::Unparsed(Protocol::MySql),
            None => Turn::Setup(Protocol::MySql),
        }
    }
}
