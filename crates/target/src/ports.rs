//! Who listens on a TCP port: /proc/net/tcp{,6} give the inodes of the listening sockets, and
//! the `socket:[INODE]` links under /proc/PID/fd the processes that hold them. reqcost drives
//! whatever answers on the port, so it must know that the answer comes from the measured tree.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use crate::accounting::{all_pids, comm};

/// The state column's value for a listening socket (TCP_LISTEN).
const LISTEN_STATE: &str = "0A";

/// A process holding a socket listening on TCP `port` (any local address, IPv4 or IPv6), with
/// its command name; `None` when nothing listens there or the holder cannot be seen (another
/// user's process without root).
pub fn listener_owner(port: u16) -> Option<(u32, String)> {
    let inodes = listening_inodes(port);
    if inodes.is_empty() {
        return None;
    }
    all_pids()
        .find(|pid| holds_socket(*pid, &inodes))
        .map(|pid| (pid, comm(pid)))
}

/// The holder of `port`'s listening socket, in words for an error message.
pub(crate) fn describe_holder(port: u16) -> String {
    match listener_owner(port) {
        Some((pid, name)) => format!("process {pid} ({name})"),
        None => "a process reqcost cannot see (run as root to name it)".into(),
    }
}

/// Inodes of the sockets listening on TCP `port`, IPv4 and IPv6.
pub(crate) fn listening_inodes(port: u16) -> HashSet<u64> {
    ["/proc/net/tcp", "/proc/net/tcp6"]
        .iter()
        .filter_map(|table| fs::read_to_string(table).ok())
        .flat_map(|text| {
            text.lines()
                .skip(1)
                .filter_map(|line| listening_inode(line, port))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The inode of a /proc/net/tcp line when it is a socket listening on `port`. Columns:
/// `sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode ...`.
fn listening_inode(line: &str, port: u16) -> Option<u64> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let (_, local_port) = fields.get(1)?.rsplit_once(':')?;
    let listening = *fields.get(3)? == LISTEN_STATE;
    if !listening || u16::from_str_radix(local_port, 16).ok()? != port {
        return None;
    }
    fields.get(9)?.parse().ok()
}

/// Whether process `pid` has an fd on one of the sockets `inodes`.
pub(crate) fn holds_socket(pid: u32, inodes: &HashSet<u64>) -> bool {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|fds| {
            fds.flatten()
                .any(|fd| socket_inode(&fd.path()).is_some_and(|i| inodes.contains(&i)))
        })
        .unwrap_or(false)
}

/// The inode of an fd link `socket:[INODE]`.
fn socket_inode(link: &Path) -> Option<u64> {
    let target = fs::read_link(link).ok()?;
    target
        .to_str()?
        .strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn reads_listening_lines_only() {
        let listen = "   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4242 1 0";
        let established = "   2: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 4343 1 0";
        assert_eq!(listening_inode(listen, 8080), Some(4242));
        assert_eq!(listening_inode(listen, 8081), None);
        assert_eq!(listening_inode(established, 8080), None);
        assert_eq!(listening_inode("garbage", 8080), None);
    }

    #[test]
    fn names_this_process_as_the_owner_of_its_listener() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (pid, name) = listener_owner(port).expect("the listener is found");
        assert_eq!(pid, std::process::id());
        assert_eq!(name, comm(pid));
        drop(listener);
        assert_eq!(listener_owner(port), None);
    }
}
