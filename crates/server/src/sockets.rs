//! Which process listens on a TCP port, or has a UDP port bound: the socket's inode in
//! /proc/net/{tcp,udp}{,6}, then the processes holding an fd on that inode. reqcost drives
//! whatever answers on the port, so it must know that the answer comes from the measured tree.

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::net::{IpAddr, SocketAddr};

use crate::accounting::{all_pids, comm, descends_from};
use crate::TargetError;

/// The TCP state number of a listening socket in /proc/net/tcp.
const TCP_LISTEN: &str = "0A";

/// The process that serves TCP `port`: the one process holding its listening socket, or, when
/// several hold it (a master and the workers it forked), the one they all descend from.
pub fn listener_of(port: u16) -> Result<u32, TargetError> {
    let roots = roots(&listening_processes(port));
    match roots[..] {
        [root] => Ok(root),
        [] => Err(TargetError::NoListener(port)),
        _ => Err(TargetError::SeveralListeners { port, pids: roots }),
    }
}

/// The process that serves the Unix stream socket at `path` (an abstract name starts with
/// `@`), chosen as [`listener_of`] chooses; None when no process the caller can see holds it.
pub fn unix_listener_of(path: &str) -> Option<u32> {
    let inodes: BTreeSet<u64> = fs::read_to_string("/proc/net/unix")
        .map(|table| unix_listening(&table, path))
        .unwrap_or_default();
    topmost(&holders(&inodes))
}

/// Inodes of the listening Unix stream sockets bound to `path` in /proc/net/unix. Columns:
/// `Num RefCount Protocol Flags Type St Inode Path`; a listener has __SO_ACCEPTCON (0x10000)
/// in its flags, and type 1 (SOCK_STREAM).
fn unix_listening(table: &str, path: &str) -> BTreeSet<u64> {
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let flags = u32::from_str_radix(cols.get(3)?, 16).ok()?;
            let listening = flags & 0x10000 != 0 && *cols.get(4)? == "0001";
            (listening && *cols.get(7)? == path).then(|| cols.get(6)?.parse().ok())?
        })
        .collect()
}

/// Of several processes holding one socket (a master and the workers it forked), the one
/// they all descend from.
fn topmost(owners: &BTreeSet<u32>) -> Option<u32> {
    match roots(owners)[..] {
        [root] => Some(root),
        _ => None,
    }
}

/// The processes of `owners` that descend from no other of them.
fn roots(owners: &BTreeSet<u32>) -> Vec<u32> {
    owners
        .iter()
        .copied()
        .filter(|&p| !owners.iter().any(|&o| o != p && descends_from(p, o)))
        .collect()
}

/// The TCP ports `root`'s tree listens on, IPv4 and IPv6.
pub fn tree_listening_ports(root: u32) -> BTreeSet<u16> {
    tree_tcp_sockets(root, |port, cols| {
        (cols.get(3) == Some(&TCP_LISTEN)).then_some(port)
    })
}

/// The loopback peers of the established TCP connections `root`'s tree opened: those whose
/// local port is none the tree listens on. They lead to the local servers it calls.
pub fn tree_loopback_peers(root: u32) -> BTreeSet<SocketAddr> {
    const ESTABLISHED: &str = "01";
    let listening = tree_listening_ports(root);
    tree_tcp_sockets(root, |port, cols| {
        if cols.get(3) != Some(&ESTABLISHED) || listening.contains(&port) {
            return None;
        }
        let (ip, peer_port) = cols.get(2)?.rsplit_once(':')?;
        let ip = table_ip(ip)?.to_canonical();
        let peer = SocketAddr::new(ip, u16::from_str_radix(peer_port, 16).ok()?);
        peer.ip().is_loopback().then_some(peer)
    })
}

/// What `pick` makes of each TCP socket (its local port, its /proc/net/tcp{,6} columns) that
/// `root`'s tree holds, where it makes something.
fn tree_tcp_sockets<T: Copy + Ord>(
    root: u32,
    pick: impl Fn(u16, &[&str]) -> Option<T>,
) -> BTreeSet<T> {
    let mut by_inode = HashMap::new();
    for table in TCP_TABLES.iter().filter_map(|t| fs::read_to_string(t).ok()) {
        for (port, cols) in rows(&table) {
            let inode = cols.get(9).and_then(|i| i.parse::<u64>().ok());
            if let (Some(inode), Some(value)) = (inode, pick(port, &cols)) {
                by_inode.insert(inode, value);
            }
        }
    }
    let inodes: BTreeSet<u64> = by_inode.keys().copied().collect();
    crate::accounting::process_tree(root)
        .into_iter()
        .flat_map(|pid| held_sockets(pid, &inodes))
        .filter_map(|inode| by_inode.get(&inode).copied())
        .collect()
}

/// The sockets of `inodes` that `pid` holds an fd on.
pub(crate) fn held_sockets(pid: u32, inodes: &BTreeSet<u64>) -> Vec<u64> {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return vec![];
    };
    fds.flatten()
        .filter_map(|fd| {
            let link = fs::read_link(fd.path()).ok()?;
            let inode: u64 = link
                .to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()?;
            inodes.contains(&inode).then_some(inode)
        })
        .collect()
}

/// Whether `pid` or one of its descendants holds a socket listening on TCP `port`.
pub fn tree_listens_on(pid: u32, port: u16) -> bool {
    listening_processes(port)
        .into_iter()
        .any(|owner| descends_from(owner, pid))
}

/// The holder of `port`'s listening socket, in words for an error message.
pub(crate) fn describe_holder(port: u16) -> String {
    match listener_of(port) {
        Ok(pid) => format!("process {pid} ({})", comm(pid)),
        Err(TargetError::SeveralListeners { pids, .. }) => format!("processes {pids:?}"),
        Err(_) => "a process reqcost cannot see (run as root to name it)".into(),
    }
}

/// Whether `pid` or one of its descendants serves `port` (any port when None): holds a socket
/// listening on it over TCP, or bound to it over UDP (a UDP server has nothing to accept).
pub fn tree_serves(pid: u32, port: Option<u16>) -> bool {
    let mut inodes = socket_inodes(&TCP_TABLES, |p, st| st == TCP_LISTEN && matches(p, port));
    inodes.extend(socket_inodes(&UDP_TABLES, |p, _| {
        p != 0 && matches(p, port)
    }));
    !inodes.is_empty()
        && all_pids()
            .filter(|&p| descends_from(p, pid))
            .any(|p| holds_any_socket(p, &inodes))
}

fn matches(port: u16, wanted: Option<u16>) -> bool {
    wanted.is_none_or(|w| w == port)
}

const TCP_TABLES: [&str; 2] = ["/proc/net/tcp", "/proc/net/tcp6"];
const UDP_TABLES: [&str; 2] = ["/proc/net/udp", "/proc/net/udp6"];

/// Inodes of the sockets listening on TCP `port`, IPv4 and IPv6.
pub(crate) fn listening_inodes(port: u16) -> BTreeSet<u64> {
    socket_inodes(&TCP_TABLES, |p, st| st == TCP_LISTEN && p == port)
}

/// Inodes of the sockets of `tables` whose (local port, state) `keep` accepts.
fn socket_inodes(tables: &[&str], keep: impl Fn(u16, &str) -> bool) -> BTreeSet<u64> {
    tables
        .iter()
        .filter_map(|table| fs::read_to_string(table).ok())
        .flat_map(|table| inodes_in_table(&table, &keep))
        .collect()
}

/// Every process holding an fd on a socket listening on TCP `port` (IPv4 or IPv6).
fn listening_processes(port: u16) -> BTreeSet<u32> {
    holders(&listening_inodes(port))
}

/// Every process holding an fd on one of the socket `inodes`.
fn holders(inodes: &BTreeSet<u64>) -> BTreeSet<u32> {
    if inodes.is_empty() {
        return BTreeSet::new();
    }
    all_pids()
        .filter(|&pid| holds_any_socket(pid, inodes))
        .collect()
}

/// Inodes of the sockets of one /proc/net/{tcp,udp}{,6} table whose local port and state
/// `keep` accepts. Columns: `sl local_address rem_address st ... uid timeout inode`, the
/// address as `HEXIP:HEXPORT`.
fn inodes_in_table(table: &str, keep: impl Fn(u16, &str) -> bool) -> Vec<u64> {
    rows(table)
        .filter_map(|(local_port, cols)| {
            keep(local_port, cols.get(3)?)
                .then(|| cols.get(9)?.parse().ok())
                .flatten()
        })
        .collect()
}

/// Each socket line of a /proc/net table: its local port, and its columns.
fn rows(table: &str) -> impl Iterator<Item = (u16, Vec<&str>)> {
    table.lines().skip(1).filter_map(|line| {
        let cols: Vec<&str> = line.split_whitespace().collect();
        let local_port = cols.get(1)?.rsplit_once(':')?.1;
        Some((u16::from_str_radix(local_port, 16).ok()?, cols))
    })
}

/// Bytes each TCP connection in `pid`'s network namespace has sent that its peer has not yet
/// acknowledged (the `tx_queue` of /proc/PID/net/tcp{,6}), by local port and peer: what a slow
/// client has still to take of what the server wrote. Empty when the tables cannot be read.
pub fn unacknowledged(pid: u32) -> HashMap<(u16, SocketAddr), u64> {
    ["tcp", "tcp6"]
        .iter()
        .filter_map(|t| fs::read_to_string(format!("/proc/{pid}/net/{t}")).ok())
        .flat_map(|table| tx_queues(&table))
        .collect()
}

/// (local port, peer) and tx_queue of each line of a /proc/net/tcp{,6} table.
fn tx_queues(table: &str) -> Vec<((u16, SocketAddr), u64)> {
    rows(table)
        .filter_map(|(local_port, cols)| {
            let (peer_ip, peer_port) = cols.get(2)?.rsplit_once(':')?;
            let peer = SocketAddr::new(
                table_ip(peer_ip)?.to_canonical(),
                u16::from_str_radix(peer_port, 16).ok()?,
            );
            let tx = u64::from_str_radix(cols.get(4)?.split_once(':')?.0, 16).ok()?;
            Some(((local_port, peer), tx))
        })
        .collect()
}

/// An address as the tables print it: 32-bit words in hex, each in the machine's byte order.
fn table_ip(hex: &str) -> Option<IpAddr> {
    let words: Vec<[u8; 4]> = (0..hex.len() / 8)
        .map(|i| u32::from_str_radix(hex.get(i * 8..i * 8 + 8)?, 16).ok())
        .map(|w| w.map(u32::to_ne_bytes))
        .collect::<Option<_>>()?;
    match words[..] {
        [v4] => Some(IpAddr::from(v4)),
        [a, b, c, d] => Some(IpAddr::from(
            <[u8; 16]>::try_from([a, b, c, d].concat()).ok()?,
        )),
        _ => None,
    }
}

/// Whether one of `pid`'s fds is a socket with one of `inodes` (links read `socket:[INODE]`).
pub(crate) fn holds_any_socket(pid: u32, inodes: &BTreeSet<u64>) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        fs::read_link(fd.path()).is_ok_and(|link| {
            link.to_str()
                .and_then(|l| l.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok())
                .is_some_and(|inode: u64| inodes.contains(&inode))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, UdpSocket};

    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000:07E8 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1605 1 0000000066a4e40c 100 0 0 10 0
   1: 0100007F:07E8 0100007F:DAD0 01 00000000:00000000 03:00000606 00000000     0        0 1777 3 000000002d80614f
   2: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2024 1 0000000066a4e40c 100 0 0 10 0
";

    #[test]
    fn send_queues_by_local_port_and_peer() {
        let table = TABLE.replace("01 00000000:00000000 03", "01 00004000:00000000 03");
        let queues: HashMap<_, _> = tx_queues(&table).into_iter().collect();
        let peer: SocketAddr = "127.0.0.1:56016".parse().unwrap();
        assert_eq!(queues[&(0x07E8, peer)], 0x4000);
        let v6 = "  sl  local_address                         remote_address                        st tx_queue rx_queue
   0: 0000000000000000FFFF00000100007F:1F90 0000000000000000FFFF00000200007F:A000 01 00000010:00000000 00:00000000 00000000     0        0 99 1";
        let queues: HashMap<_, _> = tx_queues(v6).into_iter().collect();
        assert_eq!(queues[&(8080, "127.0.0.2:40960".parse().unwrap())], 16);
    }

    #[test]
    fn only_listening_sockets_on_the_port() {
        let listening = |port| inodes_in_table(TABLE, |p, st| st == TCP_LISTEN && p == port);
        assert_eq!(listening(0x07E8), [1605]);
        assert_eq!(listening(8080), [2024]);
        assert!(listening(81).is_empty());
    }

    #[test]
    fn this_process_is_found_listening() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let me = std::process::id();
        assert_eq!(listener_of(port).unwrap(), me);
        assert!(tree_listens_on(me, port));
        assert!(tree_serves(me, Some(port)) && tree_serves(me, None));
        drop(listener);
        assert!(matches!(
            listener_of(port),
            Err(TargetError::NoListener(p)) if p == port
        ));
        assert!(!tree_serves(me, Some(port)));
    }

    #[test]
    fn a_bound_udp_socket_serves_its_port() {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let port = socket.local_addr().unwrap().port();
        let me = std::process::id();
        assert!(tree_serves(me, Some(port)));
        assert!(!tree_serves(me + 1_000_000, Some(port)));
        drop(socket);
        assert!(!tree_serves(me, Some(port)));
    }
}
