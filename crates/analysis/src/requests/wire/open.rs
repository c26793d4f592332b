//! What a tally remembers of the open connections of a recognised protocol, in bounded memory:
//! the protocol, so that their later turns are read as it, and their prepared statements'
//! classes, so that a batch that runs one is classed by the text it was prepared with.

use std::collections::HashMap;

use super::{Protocol, Turn, Wire};

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
    /// Prepared statements' classes by name.
    statements: HashMap<Vec<u8>, String>,
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
        });
        conn.protocol = wire.protocol;
        let Turn::Prepared { name, text } = wire.turn else {
            return;
        };
        if text.is_none() {
            if let Some(class) = conn.statements.get(name) {
                label.clone_from(class);
            }
        } else if conn.statements.len() < STATEMENTS_KEPT || conn.statements.contains_key(name) {
            conn.statements.insert(name.to_vec(), label.clone());
        }
    }
}
