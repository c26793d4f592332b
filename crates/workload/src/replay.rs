//! Replaying a log as production ran it (`--replay-speeds`): each logged client connects from
//! its own loopback address, so that the per-client figures map back to the log's clients, and
//! each request is read at the speed its log line shows.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

use crate::logformat::Logged;

/// Logged clients given addresses of their own; the ones after share one more. The per-client
/// table shows the top few anyway, and a log with a million clients must not take a million
/// entries.
pub const MAX_CLIENTS: u32 = 256;

/// Shortest logged request time whose speed is told: below it (nginx logs milliseconds), the
/// time is the server's and the network's, not the client's reading. A longer request whose time
/// the server spent computing costs nothing to pace: reads are paced from when the request was
/// sent, so they never finish later than the server's answer allows.
pub const SPEED_MIN_TIME_S: f64 = 0.01;

/// Logged client addresses, numbered in order of first appearance.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Clients {
    index: HashMap<Vec<u8>, u32>,
    /// Addresses by number; the ones past [`MAX_CLIENTS`] are not kept.
    pub order: Vec<Vec<u8>>,
    /// Requests whose client shares the last number.
    pub others: u64,
}

impl Clients {
    /// The number of a logged client: its own under [`MAX_CLIENTS`], then `MAX_CLIENTS` for all.
    pub fn number(&mut self, addr: &[u8]) -> u32 {
        if let Some(n) = self.index.get(addr) {
            return *n;
        }
        let n = self.order.len() as u32;
        if n >= MAX_CLIENTS {
            self.others += 1;
            return MAX_CLIENTS;
        }
        self.index.insert(addr.to_vec(), n);
        self.order.push(addr.to_vec());
        n
    }
}

/// The loopback address client number `n` connects from: 127.1.0.1, 127.1.0.2, ... apart
/// from the addresses `--client-mix` groups use (127.0.0.10, ...).
pub fn alias(n: u32) -> IpAddr {
    let [_, _, hi, lo] = (n + 1).to_be_bytes();
    IpAddr::V4(Ipv4Addr::new(127, 1, hi, lo))
}

/// How a logged address is shown: as logged, or hashed (`--anonymize`) so that a record can be
/// shared without the clients' addresses, while the same client keeps the same name.
pub fn client_name(addr: &[u8], anonymize: bool) -> String {
    if !anonymize {
        return String::from_utf8_lossy(addr).into_owned();
    }
    // FNV-1a: stable across runs and machines, unlike the standard library's hasher.
    let hash = addr.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    format!("client-{:08x}", hash >> 32)
}

/// The speed a log line shows, in bytes per second: bytes sent over request time, when the
/// request was long enough for the client's speed to be told from it.
pub fn logged_speed(l: &Logged) -> Option<u64> {
    let (bytes, time) = (l.bytes?, l.duration?);
    (time >= SPEED_MIN_TIME_S && bytes > 0).then(|| (bytes as f64 / time) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_clients_in_bounded_memory() {
        let mut c = Clients::default();
        assert_eq!((c.number(b"a"), c.number(b"b"), c.number(b"a")), (0, 1, 0));
        for i in 0..1000 {
            c.number(format!("10.0.{}.{}", i / 256, i % 256).as_bytes());
        }
        assert_eq!(c.order.len(), MAX_CLIENTS as usize);
        assert_eq!(c.others, 1000 - u64::from(MAX_CLIENTS) + 2);
        assert_eq!(alias(0), IpAddr::V4(Ipv4Addr::new(127, 1, 0, 1)));
        assert_eq!(alias(MAX_CLIENTS), IpAddr::V4(Ipv4Addr::new(127, 1, 1, 1)));
        assert_eq!(client_name(b"192.0.2.7", false), "192.0.2.7");
        assert_eq!(
            client_name(b"192.0.2.7", true),
            client_name(b"192.0.2.7", true)
        );
        assert_ne!(
            client_name(b"192.0.2.7", true),
            client_name(b"192.0.2.8", true)
        );
    }

    #[test]
    fn tells_a_speed_only_from_long_requests() {
        let logged = |bytes, duration| Logged {
            bytes: Some(bytes),
            duration: Some(duration),
            ..Logged::default()
        };
        assert_eq!(logged_speed(&logged(1 << 20, 16.0)), Some(65536));
        assert_eq!(logged_speed(&logged(1 << 20, 0.009)), None);
        assert_eq!(logged_speed(&logged(1000, 2.0)), Some(500));
        assert_eq!(logged_speed(&logged(0, 2.0)), None);
        assert_eq!(logged_speed(&Logged::default()), None);
    }
}
