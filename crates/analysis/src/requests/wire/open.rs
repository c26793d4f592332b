//! What a tally remembers of the open connections of a recognised protocol, in bounded memory:
//! the protocol, so that their later turns are read as it, and their prepared statements'
//! classes, so that a batch that runs one is classed by the text it was prepared with.
//!
//! MySQL's client never names a statement: the server numbers them per connection in the
//! order they are prepared, from 1 (MariaDB 10.11's `statement_id_counter`, checked against its
//! prepare responses), so a connection's prepares are counted to know each one's number; only
//! on a connection seen from its handshake, and until a COM_CHANGE_USER or
//! COM_RESET_CONNECTION, after which its executes are classed by number.

use std::collections::HashMap;

use super::{mysql, Protocol, Turn, Wire};

/// Open connections remembered at once: the turns of further ones are read alone, as after
/// an attach.
const CONNECTIONS_KEPT: usize = 16_384;
/// Prepared statements remembered per connection: later ones are classed by their name.
const STATEMENTS_KEPT: usize = 32;

/// A connection: its process and its number there.
pub type ConnectionKey = (u32, u64);

#[derive(Default)]
pub struct OpenConnections {
    open: HashMap<ConnectionKey, Connection>,
}

struct Connection {
    protocol: Protocol,
    /// Prepared statements' classes by name (MySQL's: by number, little-endian).
    statements: HashMap<Vec<u8>, String>,
    /// MySQL: the statements prepared on the connection so far, when they are all known.
    prepared: Option<u32>,
}

impl OpenConnections {
    /// The protocol an earlier turn of `key` was recognised as.
    pub fn protocol(&self, key: ConnectionKey) -> Option<Protocol> {
        self.open.get(&key).map(|c| c.protocol)
    }

    /// Takes in a turn of `key`, read as `wire` and labelled `label`, the connection's last
    /// when `closed`. A batch that prepares a statement keeps its class (its label) under the
    /// statement's name; one that runs a statement prepared earlier is given its class.
    pub fn turn(
        &mut self,
        key: ConnectionKey,
        closed: bool,
        wire: Option<&Wire<'_>>,
        label: &mut String,
    ) {
        if closed {
            self.open.remove(&key);
            return;
        }
        let Some(wire) = wire else {
            return;
        };
        if !self.open.contains_key(&key) && self.open.len() >= CONNECTIONS_KEPT {
            return;
        }
        let conn = self.open.entry(key).or_insert_with(|| Connection {
            protocol: wire.protocol,
            statements: HashMap::new(),
            prepared: wire.is_setup().then_some(0),
        });
        conn.protocol = wire.protocol;
        match wire.turn {
            Turn::Prepared { name, text: None } => conn.named(name, label),
            Turn::Prepared { name, .. } => conn.keep(name, label),
            Turn::Prepare(_) => {
                if let Some(n) = conn.prepared.as_mut() {
                    *n += 1;
                    let id = n.to_le_bytes();
                    let class = label.strip_prefix("PREPARE ").unwrap_or(label).to_owned();
                    conn.keep(&id, &class);
                }
            }
            Turn::Execute(id) => conn.named(&id.to_le_bytes(), label),
            ref turn if mysql::forgets_statements(turn) => {
                conn.prepared = None;
                conn.statements.clear();
            }
            _ => {}
        }
    }
}

impl Connection {
    /// Gives `label` the class of the statement `name` when it is known.
    fn named(&self, name: &[u8], label: &mut String) {
        if let Some(class) = self.statements.get(name) {
            label.clone_from(class);
        }
    }

    fn keep(&mut self, name: &[u8], class: &str) {
        if self.statements.len() < STATEMENTS_KEPT || self.statements.contains_key(name) {
            self.statements.insert(name.to_vec(), class.to_owned());
        }
    }
}
