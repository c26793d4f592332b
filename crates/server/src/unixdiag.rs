//! The Unix stream sockets a tree connected to a listener, as sock_diag (NETLINK_SOCK_DIAG,
//! UNIX_DIAG with the peer and the name) shows them: /proc/net/unix has no peers, and the
//! connecting end of a connection has no name of its own, but its peer, the socket the
//! listener accepted, has the listener's path.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::mem::size_of;
use std::os::fd::AsRawFd;

use crate::accounting::process_tree;
use crate::sockdiag::{attributes, diag_socket, dump_header, receive, send_struct};
use crate::sockets::held_sockets;

const UDIAG_SHOW_NAME: u32 = 0x1;
const UDIAG_SHOW_PEER: u32 = 0x4;
const UNIX_DIAG_NAME: u16 = 0;
const UNIX_DIAG_PEER: u16 = 2;
const TCP_ESTABLISHED: u32 = 1;

#[repr(C)]
struct Request {
    header: libc::nlmsghdr,
    family: u8,
    protocol: u8,
    pad: u16,
    states: u32,
    ino: u32,
    show: u32,
    cookie: [u32; 2],
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DiagMsg {
    family: u8,
    kind: u8,
    state: u8,
    pad: u8,
    ino: u32,
    cookie: [u32; 2],
}

/// One connected Unix socket: its name (empty without one) and its peer's inode.
struct Seen {
    name: String,
    peer: u64,
}

/// The paths of the listeners `root`'s tree is connected to over Unix stream sockets: the
/// names of the peers of its sockets that have none themselves (an abstract name starts with
/// `@`, as /proc/net/unix shows it).
pub fn tree_unix_peers(root: u32) -> BTreeSet<String> {
    let Ok(all) = dump() else {
        return BTreeSet::new();
    };
    let own: BTreeSet<u64> = all
        .iter()
        .filter(|(_, s)| s.name.is_empty())
        .map(|(ino, _)| *ino)
        .collect();
    process_tree(root)
        .into_iter()
        .flat_map(|pid| held_sockets(pid, &own))
        .filter_map(|ino| all.get(&all.get(&ino)?.peer))
        .filter(|peer| !peer.name.is_empty())
        .map(|peer| peer.name.clone())
        .collect()
}

/// Every connected Unix stream socket of the machine, by inode.
fn dump() -> io::Result<HashMap<u64, Seen>> {
    let fd = diag_socket()?;
    let request = Request {
        header: dump_header::<Request>(),
        family: libc::AF_UNIX as u8,
        protocol: 0,
        pad: 0,
        states: 1 << TCP_ESTABLISHED,
        ino: 0,
        show: UDIAG_SHOW_NAME | UDIAG_SHOW_PEER,
        cookie: [!0, !0],
    };
    send_struct(fd.as_raw_fd(), &request)?;
    let mut all = HashMap::new();
    receive(fd.as_raw_fd(), &mut |body| {
        if let Some((ino, seen)) = parse(body) {
            all.insert(ino, seen);
        }
    })?;
    Ok(all)
}

/// One unix_diag message: the socket's inode, its name and its peer's inode.
fn parse(body: &[u8]) -> Option<(u64, Seen)> {
    if body.len() < size_of::<DiagMsg>() {
        return None;
    }
    // SAFETY: length checked; read_unaligned copes with any alignment.
    let msg: DiagMsg = unsafe { std::ptr::read_unaligned(body.as_ptr().cast()) };
    if i32::from(msg.kind) != libc::SOCK_STREAM {
        return None;
    }
    let mut seen = Seen {
        name: String::new(),
        peer: 0,
    };
    for (kind, data) in attributes(body, size_of::<DiagMsg>())? {
        match kind {
            UNIX_DIAG_NAME => seen.name = path_name(data),
            UNIX_DIAG_PEER if data.len() >= 4 => {
                seen.peer = u64::from(u32::from_ne_bytes(data[..4].try_into().ok()?));
            }
            _ => {}
        }
    }
    Some((u64::from(msg.ino), seen))
}

/// A socket's name as UNIX_DIAG_NAME gives it (sun_path's bytes as bound): a path up to its
/// NUL; an abstract one whole, shown with `@` for its leading NUL.
fn path_name(data: &[u8]) -> String {
    match data.split_first() {
        Some((0, rest)) => format!("@{}", String::from_utf8_lossy(rest)),
        _ => {
            let end = data.iter().position(|&b| b == 0).unwrap_or(data.len());
            String::from_utf8_lossy(&data[..end]).into_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixListener, UnixStream};

    /// This process connected to its own listener: the listener's path is what it reaches.
    #[test]
    fn a_connection_of_this_process_leads_to_its_listener() {
        let dir = std::env::temp_dir().join(format!("reqcost-unixdiag-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("listener.sock");
        let _ = std::fs::remove_file(&path);
        let listener = UnixListener::bind(&path).unwrap();
        let _client = UnixStream::connect(&path).unwrap();
        let _accepted = listener.accept().unwrap();
        let peers = tree_unix_peers(std::process::id());
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            peers.contains(path.to_str().unwrap()),
            "{peers:?} should hold {}",
            path.display()
        );
    }

    #[test]
    fn abstract_names_are_shown_with_an_at() {
        assert_eq!(path_name(b"\0hidden"), "@hidden");
        assert_eq!(path_name(b"/run/x.sock"), "/run/x.sock");
        assert_eq!(path_name(b"/run/x.sock\0"), "/run/x.sock");
    }
}
