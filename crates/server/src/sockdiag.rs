//! TCP bytes of the tree's sockets as the kernel keeps them, without eBPF: sock_diag
//! (NETLINK_SOCK_DIAG, INET_DIAG with `tcp_info`) dumps every TCP socket of the machine with its
//! `bytes_acked` and `bytes_received`; the tree's are those whose inode one of its fds holds.
//!
//! A socket is known by its cookie from its first sighting on, so that one the server has
//! already closed, and which lingers orphaned (FIN_WAIT, no inode), still counts. What a socket
//! moved after it was last seen and before it was gone is missed: a tree whose connections end
//! between two sightings is undercounted by their last bytes (entirely, for a connection opened
//! and closed between two).

use std::collections::{BTreeSet, HashMap};
use std::fs;
use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use reqcost_record::TcpBytes;

use crate::accounting::process_tree;

const SOCK_DIAG_BY_FAMILY: u16 = 20;
const INET_DIAG_INFO: u16 = 2;
/// Offsets of `tcpi_bytes_acked` and `tcpi_bytes_received` in `struct tcp_info` (linux/tcp.h).
const BYTES_ACKED_AT: usize = 120;
const BYTES_RECEIVED_AT: usize = 128;
const TCP_LISTEN: u8 = 10;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SockId {
    sport: u16,
    dport: u16,
    src: [u32; 4],
    dst: [u32; 4],
    interface: u32,
    cookie: [u32; 2],
}

#[repr(C)]
struct Request {
    header: libc::nlmsghdr,
    family: u8,
    protocol: u8,
    ext: u8,
    pad: u8,
    states: u32,
    id: SockId,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct DiagMsg {
    family: u8,
    state: u8,
    timer: u8,
    retrans: u8,
    id: SockId,
    expires: u32,
    rqueue: u32,
    wqueue: u32,
    uid: u32,
    inode: u32,
}

/// One TCP socket as sock_diag shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    cookie: u64,
    inode: u64,
    acked: u64,
    received: u64,
}

/// The TCP bytes of a tree's sockets over a stretch of time, from sightings at its start, while
/// it runs, and at its end.
pub struct SocketBytes {
    root: u32,
    /// Cookie → (bytes acked, bytes received) when first seen: zero for a socket born after the
    /// start, whose counters began within the stretch.
    first: HashMap<u64, (u64, u64)>,
    last: HashMap<u64, (u64, u64)>,
    started: bool,
    sighted: Instant,
}

/// The least time between two sightings while the tree runs: each walks the tree's fds and
/// dumps the machine's TCP sockets, on reqcost's CPU.
const SIGHTING_EVERY: Duration = Duration::from_millis(10);

impl SocketBytes {
    /// Starts counting for `root`'s tree; an error says why sock_diag cannot be read.
    pub fn start(root: u32) -> io::Result<SocketBytes> {
        let mut bytes = SocketBytes {
            root,
            first: HashMap::new(),
            last: HashMap::new(),
            started: false,
            sighted: Instant::now(),
        };
        bytes.observe()?;
        bytes.started = true;
        Ok(bytes)
    }

    /// Takes a sighting of the tree's TCP sockets unless the last one is recent; a sighting
    /// that fails is skipped (the one [`SocketBytes::finish`] takes says why).
    pub fn tick(&mut self) {
        if self.sighted.elapsed() >= SIGHTING_EVERY {
            let _ = self.observe();
        }
    }

    /// Takes a sighting of the tree's TCP sockets.
    fn observe(&mut self) -> io::Result<()> {
        self.sighted = Instant::now();
        let inodes = tree_socket_inodes(self.root);
        for seen in dump()? {
            let known = self.last.contains_key(&seen.cookie);
            if !known && !inodes.contains(&seen.inode) {
                continue;
            }
            let now = (seen.acked, seen.received);
            let base = if self.started { (0, 0) } else { now };
            self.first.entry(seen.cookie).or_insert(base);
            self.last.insert(seen.cookie, now);
        }
        Ok(())
    }

    /// The bytes moved since the start, with a last sighting now; None when the tree had no
    /// TCP connection.
    pub fn finish(mut self) -> io::Result<Option<TcpBytes>> {
        self.observe()?;
        if self.last.is_empty() {
            return Ok(None);
        }
        let (mut sent, mut received) = (0, 0);
        for (cookie, (acked, got)) in &self.last {
            let (a0, r0) = self.first.get(cookie).copied().unwrap_or_default();
            sent += acked.saturating_sub(a0);
            received += got.saturating_sub(r0);
        }
        Ok(Some(TcpBytes {
            sent,
            received,
            sockets: self.last.len() as u64,
            source: "sock_diag tcp_info (bytes_acked, bytes_received) of the tree's TCP sockets, \
                     sighted every few ms: bytes a connection moved after its last sighting are \
                     missed"
                .into(),
        }))
    }
}

/// The bytes the tree's TCP sockets received, as a running total read at chosen moments
/// (`attach --budget` reads it at each window's end): what work the server did while nothing
/// else counts its requests. Each read keeps only the sockets the tree holds then, so memory
/// stays bounded over a long attach; what a socket received after the read before its close is
/// missed, alike in every window.
#[derive(Debug, Default)]
pub struct ReceivedBytes {
    root: u32,
    last: HashMap<u64, u64>,
    total: u64,
}

impl ReceivedBytes {
    /// Starts the total at zero, with the bytes the tree's sockets received so far left out.
    pub fn start(root: u32) -> io::Result<ReceivedBytes> {
        let mut bytes = ReceivedBytes {
            root,
            ..ReceivedBytes::default()
        };
        bytes.read()?;
        bytes.total = 0;
        Ok(bytes)
    }

    /// The bytes received since the start, up to now.
    pub fn read(&mut self) -> io::Result<u64> {
        let inodes = tree_socket_inodes(self.root);
        let mut now = HashMap::with_capacity(self.last.len());
        for seen in dump()? {
            if !inodes.contains(&seen.inode) {
                continue;
            }
            // A socket first seen now received its bytes since the previous read, or since
            // its start within that time.
            let before = self.last.get(&seen.cookie).copied().unwrap_or(0);
            self.total += seen.received.saturating_sub(before);
            now.insert(seen.cookie, seen.received);
        }
        self.last = now;
        Ok(self.total)
    }
}

/// Inodes of the sockets the tree's processes hold.
fn tree_socket_inodes(root: u32) -> BTreeSet<u64> {
    process_tree(root)
        .into_iter()
        .filter_map(|pid| fs::read_dir(format!("/proc/{pid}/fd")).ok())
        .flat_map(|fds| fds.flatten())
        .filter_map(|fd| {
            let link = fs::read_link(fd.path()).ok()?;
            link.to_str()?
                .strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// Every TCP socket of the machine but listening ones, IPv4 and IPv6.
fn dump() -> io::Result<Vec<Seen>> {
    let fd = diag_socket()?;
    let raw = fd.as_raw_fd();
    let mut all = Vec::new();
    for family in [libc::AF_INET, libc::AF_INET6] {
        send_request(raw, family as u8)?;
        receive(raw, &mut |body| all.extend(parse(body)))?;
    }
    Ok(all)
}

/// A NETLINK_SOCK_DIAG socket.
pub(crate) fn diag_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned below.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_SOCK_DIAG,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh socket nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sends `request`, a repr(C) netlink message of plain integers, as its bytes.
pub(crate) fn send_struct<T>(fd: i32, request: &T) -> io::Result<()> {
    // SAFETY: `request` is a plain repr(C) struct, readable for its size.
    let sent = unsafe { libc::send(fd, (request as *const T).cast(), size_of::<T>(), 0) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The netlink header of a dump request whose whole message is a `T`.
pub(crate) fn dump_header<T>() -> libc::nlmsghdr {
    libc::nlmsghdr {
        nlmsg_len: size_of::<T>() as u32,
        nlmsg_type: SOCK_DIAG_BY_FAMILY,
        nlmsg_flags: (libc::NLM_F_REQUEST | libc::NLM_F_DUMP) as u16,
        nlmsg_seq: 1,
        nlmsg_pid: 0,
    }
}

fn send_request(fd: i32, family: u8) -> io::Result<()> {
    let request = Request {
        header: dump_header::<Request>(),
        family,
        protocol: libc::IPPROTO_TCP as u8,
        ext: 1 << (INET_DIAG_INFO - 1),
        pad: 0,
        states: !(1 << TCP_LISTEN),
        id: SockId::default(),
    };
    send_struct(fd, &request)
}

/// Reads the dump's messages until its end, handing each message's body to `each`.
pub(crate) fn receive(fd: i32, each: &mut dyn FnMut(&[u8])) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        // SAFETY: `buf` is writable for its length.
        let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut at = 0;
        let n = n as usize;
        while at + size_of::<libc::nlmsghdr>() <= n {
            // SAFETY: bounds checked; read_unaligned copes with any alignment.
            let header: libc::nlmsghdr =
                unsafe { std::ptr::read_unaligned(buf[at..].as_ptr().cast()) };
            let len = header.nlmsg_len as usize;
            if len < size_of::<libc::nlmsghdr>() || at + len > n {
                return Err(io::Error::other("sock_diag: a truncated netlink message"));
            }
            match header.nlmsg_type as i32 {
                libc::NLMSG_DONE => return Ok(()),
                libc::NLMSG_ERROR => {
                    return Err(io::Error::other("sock_diag: the kernel refused the dump"))
                }
                _ => each(&buf[at + size_of::<libc::nlmsghdr>()..at + len]),
            }
            at += (len + 3) & !3;
        }
    }
}

/// One inet_diag message: the socket and its `tcp_info` counters.
fn parse(body: &[u8]) -> Option<Seen> {
    if body.len() < size_of::<DiagMsg>() {
        return None;
    }
    // SAFETY: length checked; read_unaligned copes with any alignment.
    let msg: DiagMsg = unsafe { std::ptr::read_unaligned(body.as_ptr().cast()) };
    for (kind, info) in attributes(body, size_of::<DiagMsg>())? {
        if kind == INET_DIAG_INFO && info.len() >= BYTES_RECEIVED_AT + 8 {
            let u64_at =
                |i: usize| u64::from_ne_bytes(info[i..i + 8].try_into().unwrap_or_default());
            return Some(Seen {
                cookie: u64::from(msg.id.cookie[0]) | (u64::from(msg.id.cookie[1]) << 32),
                inode: u64::from(msg.inode),
                acked: u64_at(BYTES_ACKED_AT),
                received: u64_at(BYTES_RECEIVED_AT),
            });
        }
    }
    None
}

/// The attributes (kind, data) of a sock_diag message `body` after its fixed part of
/// `fixed` bytes; None when one overruns the message.
pub(crate) fn attributes(body: &[u8], fixed: usize) -> Option<Vec<(u16, &[u8])>> {
    let mut all = Vec::new();
    let mut at = (fixed + 3) & !3;
    while at + 4 <= body.len() {
        let len = u16::from_ne_bytes([body[at], body[at + 1]]) as usize;
        let kind = u16::from_ne_bytes([body[at + 2], body[at + 3]]);
        if len < 4 || at + len > body.len() {
            return None;
        }
        all.push((kind, &body[at + 4..at + len]));
        at += (len + 3) & !3;
    }
    Some(all)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    /// This process's own connection: what it sends is what the kernel says was acked once the
    /// peer has read it all.
    #[test]
    fn a_connection_of_this_process_counts_its_bytes() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let bytes = SocketBytes::start(std::process::id()).unwrap();
        server.write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        client.read_exact(&mut got).unwrap();
        client.write_all(b"bye").unwrap();
        let mut bye = [0u8; 3];
        server.read_exact(&mut bye).unwrap();
        let counted = bytes.finish().unwrap().expect("sockets seen");
        // Both ends are this process's: each direction counts once received, and once sent
        // when acknowledged ("bye" acknowledged all 100 000; its own ACK may be delayed).
        assert_eq!(counted.received, 100_003);
        assert!(
            (100_000..=100_003).contains(&counted.sent),
            "{}",
            counted.sent
        );
        assert_eq!(counted.sockets, 2);
    }
}
