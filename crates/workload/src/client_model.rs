//! How a load's clients read: a connection's speed and receive buffer ([`ClientModel`]), the
//! groups sharing a phase ([`ClientMix`]), and a log's clients read at their logged speeds
//! ([`ReplayModel`]).

use std::net::IpAddr;

use crate::replay;
use crate::source::Request;
use crate::units::{format_bandwidth, format_size};

/// How requests of a log are read under `--replay-speeds`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplayModel {
    /// Each logged client connects from its own loopback address (the server is on loopback).
    pub(crate) aliases: bool,
    /// Receive buffer of the requests read at a logged speed.
    pub(crate) rcvbuf: u32,
}

impl ReplayModel {
    /// Bandwidth, receive buffer and local address of a request read from the log.
    pub(crate) fn model(&self, req: &Request) -> (Option<u64>, Option<u32>, Option<IpAddr>) {
        let speed = replay::logged_speed(&req.logged);
        let source = req.client.filter(|_| self.aliases).map(replay::alias);
        (speed, speed.map(|_| self.rcvbuf), source)
    }
}

/// How fast each connection reads, and where it connects from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ClientModel {
    /// Bytes per second per connection; unlimited when None.
    pub bandwidth: Option<u64>,
    /// SO_RCVBUF of each connection; the kernel default when None.
    pub rcvbuf: Option<u32>,
    /// Local address the connections bind to; the kernel's choice when None.
    pub source: Option<IpAddr>,
}

impl ClientModel {
    pub fn describe(&self) -> String {
        let mut s = match self.bandwidth {
            Some(b) => format!("{} per connection", format_bandwidth(b)),
            None => "unlimited".to_string(),
        };
        if let Some(r) = self.rcvbuf {
            s += &format!(", rcvbuf {}", format_size(u64::from(r)));
        }
        if let Some(ip) = self.source {
            s += &format!(" from {ip}");
        }
        s
    }
}

/// The client groups of a phase: each request goes to a group in proportion to its share, so
/// fast and slow clients share the phase as they share a production server.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientMix {
    /// (share of requests in 0..=1, model), shares adding up to 1.
    pub(crate) groups: Vec<(f64, ClientModel)>,
}

impl ClientMix {
    pub(crate) fn single(model: ClientModel) -> ClientMix {
        ClientMix {
            groups: vec![(1.0, model)],
        }
    }

    /// `unlimited` for one group; `80% unlimited from 127.0.0.10 + 20% ...` for a mix.
    pub fn describe(&self) -> String {
        match self.groups.as_slice() {
            [(_, model)] => model.describe(),
            groups => groups
                .iter()
                .map(|(share, model)| format!("{}% {}", share * 100.0, model.describe()))
                .collect::<Vec<_>>()
                .join(" + "),
        }
    }

    /// The receive buffer of the first group that sets one.
    pub(crate) fn rcvbuf(&self) -> Option<u32> {
        self.groups.iter().find_map(|(_, m)| m.rcvbuf)
    }
}
