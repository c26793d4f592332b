//! Requests as a database or cache protocol defines them, read from a turn's first bytes (its
//! `head`, up to 128 of the `bytes_in` the server read in it): PostgreSQL's v3 frontend
//! messages ([`postgres`]), Redis' RESP commands ([`redis`]), MySQL's client packets
//! ([`mysql`]) and memcached's text commands ([`memcached`]). A turn is what the probes
//! count as a request: what the client sent before the server answered.
//!
//! A protocol is recognised by shapes no text or unrelated binary protocol makes (PostgreSQL's
//! 8-byte set-up codes and protocol 3.0 startup, a chain of typed frames that covers exactly
//! the bytes read; RESP's `*N\r\n$`; MySQL's handshake response, and packets of sequence id 0
//! whose lengths cover exactly the bytes read, each a known command; a memcached command's name
//! in lower case); once recognised on a connection it is known there, so that a later turn
//! whose framing is broken is said to be unparsed rather than taken for another protocol's
//! bytes, and Redis' inline commands (plain text lines) are read as commands.

pub mod memcached;
pub mod mysql;
mod open;
pub mod postgres;
pub mod redis;
mod sql;

use std::fmt::Write;

pub use open::{ConnectionKey, OpenConnections};
pub use sql::write_statement_class;

/// A protocol whose requests are read from their messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    Postgres,
    Redis,
    MySql,
    Memcached,
}

impl Protocol {
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Postgres => "postgresql",
            Protocol::Redis => "redis",
            Protocol::MySql => "mysql",
            Protocol::Memcached => "memcached",
        }
    }
}

/// What one turn of a recognised protocol holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Turn<'a> {
    /// The connection's own set-up or tear-down (PostgreSQL's SSLRequest, GSSENCRequest,
    /// CancelRequest, startup packet, authentication and Terminate; MySQL's handshake
    /// response, authentication rounds and COM_QUIT): not a request.
    Setup(Protocol),
    /// A PostgreSQL simple Query or a MySQL COM_QUERY: its SQL text, as far as the head holds
    /// it.
    Query(&'a [u8]),
    /// A PostgreSQL extended-protocol batch on a named prepared statement: its name, and the
    /// text it Parses when this batch prepares it.
    Prepared {
        name: &'a [u8],
        text: Option<&'a [u8]>,
    },
    /// A PostgreSQL extended-protocol batch on the unnamed statement: the text it Parses, when
    /// this batch Parses it.
    Unnamed(Option<&'a [u8]>),
    /// Another PostgreSQL request message (COPY data, a function call), by what it is.
    Message(&'static str),
    /// A MySQL COM_STMT_PREPARE: the text it prepares.
    Prepare(&'a [u8]),
    /// A MySQL COM_STMT_EXECUTE (or FETCH, BULK_EXECUTE) of the statement the server numbered
    /// so on its connection.
    Execute(u32),
    /// A Redis or memcached command: its name as sent.
    Command(&'a [u8]),
    /// Bytes on a connection of this protocol whose framing is broken, or cut before what
    /// names the request: counted, never classed by guess.
    Unparsed(Protocol),
}

/// A turn read as its protocol's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wire<'a> {
    pub protocol: Protocol,
    pub turn: Turn<'a>,
    /// The turn held more than one request (pipelined commands or queries): they are counted
    /// as one, the first's class.
    pub pipelined: bool,
}

impl<'a> Wire<'a> {
    /// Reads `head`, the first bytes of the `bytes_in` a turn read, as a message of a protocol
    /// this module knows; `known` is what the connection was recognised as earlier.
    pub fn parse(head: &'a [u8], bytes_in: u64, known: Option<Protocol>) -> Option<Wire<'a>> {
        // A MySQL packet's length can read as PostgreSQL's type byte: a connection known to
        // speak MySQL is read as it first.
        if known == Some(Protocol::MySql) {
            return mysql::parse(head, bytes_in, true);
        }
        if let Some(wire) = postgres::parse(head, bytes_in, known == Some(Protocol::Postgres)) {
            return Some(wire);
        }
        if let Some(wire) = redis::parse(head, bytes_in, known == Some(Protocol::Redis)) {
            return Some(wire);
        }
        memcached::parse(head, bytes_in, known == Some(Protocol::Memcached))
            .or_else(|| mysql::parse(head, bytes_in, false))
    }

    /// Whether the turn is a request (not the connection's set-up).
    pub fn is_setup(&self) -> bool {
        matches!(self.turn, Turn::Setup(_))
    }

    /// The class it is filed under: `SELECT pgbench_accounts`, a prepared statement's name
    /// (MySQL's number) when the turn does not hold the text it was prepared with, `SET` (Redis'
    /// names in upper case, as its documentation writes them), `get` (memcached's as sent),
    /// `PREPARE SELECT sbtest1`; `(unparsed redis)`
    /// when its framing could not be read. Always printable.
    pub fn write_label(&self, out: &mut String) {
        match self.turn {
            Turn::Setup(p) => {
                let _ = write!(out, "({} set-up)", p.name());
            }
            Turn::Query(sql)
            | Turn::Unnamed(Some(sql))
            | Turn::Prepared {
                text: Some(sql), ..
            } => write_statement_class(sql, out),
            Turn::Prepared { name, text: None } => out.push_str(&reqcost_record::printable(name)),
            Turn::Unnamed(None) => out.push_str("(unnamed statement)"),
            Turn::Prepare(sql) => {
                out.push_str("PREPARE ");
                write_statement_class(sql, out);
            }
            Turn::Execute(id) => {
                let _ = write!(out, "(statement {id})");
            }
            Turn::Message(what) => out.push_str(what),
            Turn::Command(name) if self.protocol == Protocol::Memcached => {
                out.push_str(&reqcost_record::printable(name))
            }
            Turn::Command(name) => {
                out.push_str(&reqcost_record::printable(name).to_ascii_uppercase())
            }
            Turn::Unparsed(p) => {
                let _ = write!(out, "(unparsed {})", p.name());
            }
        }
    }
}
