//! The stack's side of the probes (docs/stack.md): where the followed trees' upstream calls
//! lead, as the program noted it from each call's socket, for the loader to find the upstream
//! servers there.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// A destination the followed trees connected to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dest {
    Tcp(SocketAddr),
    /// A Unix socket's path; an abstract name starts with `@`, as /proc/net/unix shows it.
    Unix(String),
}

impl Dest {
    /// How a hop is reached, as `Hop::via` says it: `tcp 127.0.0.1:5432`, `unix /tmp/x.sock`.
    pub fn via(&self) -> String {
        match self {
            Dest::Tcp(addr) => format!("tcp {addr}"),
            Dest::Unix(path) => format!("unix {path}"),
        }
    }

    /// Whether it is on this host: a loopback address, or a Unix socket.
    pub fn is_local(&self) -> bool {
        match self {
            Dest::Tcp(addr) => addr.ip().is_loopback(),
            Dest::Unix(_) => true,
        }
    }
}

const AF_UNIX: u16 = 1;
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// A `struct dest_key` of reqcost.h: family and port at 0 and 2, the address at 8 (16 bytes),
/// the Unix path at 24.
pub(crate) fn decode(raw: &[u8]) -> Option<Dest> {
    let family = u16::from_ne_bytes(raw.get(0..2)?.try_into().ok()?);
    let port = u16::from_ne_bytes(raw.get(2..4)?.try_into().ok()?);
    let addr: [u8; 16] = raw.get(8..24)?.try_into().ok()?;
    match family {
        AF_INET => {
            let ip = Ipv4Addr::new(addr[0], addr[1], addr[2], addr[3]);
            Some(Dest::Tcp(SocketAddr::new(IpAddr::V4(ip), port)))
        }
        AF_INET6 => {
            let ip = Ipv6Addr::from(addr).to_canonical();
            Some(Dest::Tcp(SocketAddr::new(ip, port)))
        }
        AF_UNIX => unix_path(raw.get(24..)?).map(Dest::Unix),
        _ => None,
    }
}

/// The path a Unix socket is bound to: a path up to its NUL; an abstract name (NUL first) up
/// to its trailing NULs, shown with `@` for the NUL, as /proc/net/unix shows it.
fn unix_path(path: &[u8]) -> Option<String> {
    let (abstract_name, rest) = match path.split_first()? {
        (0, rest) => (true, rest),
        _ => (false, path),
    };
    let end = if abstract_name {
        rest.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1)
    } else {
        rest.iter().position(|&b| b == 0).unwrap_or(rest.len())
    };
    if end == 0 {
        return None;
    }
    let name = String::from_utf8_lossy(&rest[..end]);
    Some(if abstract_name {
        format!("@{name}")
    } else {
        name.into_owned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(family: u16, port: u16, addr: &[u8], path: &[u8]) -> Vec<u8> {
        let mut raw = vec![0u8; 24 + 108];
        raw[0..2].copy_from_slice(&family.to_ne_bytes());
        raw[2..4].copy_from_slice(&port.to_ne_bytes());
        raw[8..8 + addr.len()].copy_from_slice(addr);
        raw[24..24 + path.len()].copy_from_slice(path);
        raw
    }

    #[test]
    fn destinations_decode_by_family() {
        assert_eq!(
            decode(&key(AF_INET, 6379, &[127, 0, 0, 1], b"")).map(|d| d.via()),
            Some("tcp 127.0.0.1:6379".into())
        );
        let mapped = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];
        assert_eq!(
            decode(&key(AF_INET6, 80, &mapped, b"")),
            Some(Dest::Tcp("127.0.0.1:80".parse().unwrap()))
        );
        assert_eq!(
            decode(&key(AF_UNIX, 0, &[], b"/tmp/app.sock\0junk")).map(|d| d.via()),
            Some("unix /tmp/app.sock".into())
        );
        assert_eq!(
            decode(&key(AF_UNIX, 0, &[], b"\0hidden")),
            Some(Dest::Unix("@hidden".into()))
        );
        assert_eq!(decode(&key(AF_UNIX, 0, &[], b"")), None);
        assert_eq!(decode(&key(17, 0, &[], b"")), None);
    }

    #[test]
    fn only_loopback_and_unix_are_local() {
        assert!(Dest::Tcp("127.0.0.1:1".parse().unwrap()).is_local());
        assert!(Dest::Tcp("[::1]:1".parse().unwrap()).is_local());
        assert!(!Dest::Tcp("10.0.0.1:1".parse().unwrap()).is_local());
        assert!(Dest::Unix("/x".into()).is_local());
    }
}
