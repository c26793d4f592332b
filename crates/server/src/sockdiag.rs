//! TCP bytes of the tree's sockets as the kernel keeps them, without eBPF: sock_diag
//! (NETLINK_SOCK_DIAG, INET_DIAG with `tcp_info`) dumps every TCP socket of the machine with its
//! `bytes_acked` and `bytes_received`; the tree's are those whose inode one of its fds holds.
//!
//! A socket is known by its cookie from its first sighting on, so that one the server has
//! already closed, and which lingers orphaned (FIN_WAIT, no inode), still counts; an orphan
//! never sighted counts when its local port is one the tree listens on. What a socket
//! moved after it was last seen comes from the kernel's broadcast of its destruction (the
//! sock_diag multicast groups `ss -E` listens to), which carries its final `tcp_info`: a known
//! socket adds what it moved since its last sighting, and one never seen (opened and closed
//! between two sightings, its inode gone) counts whole when its local port is one the tree
//! listens on. A flood of closes can overflow the broadcasts' queue; what was lost then is
//! missed, and the source says how often it happened.
//!
//! The broadcasts come late on a loaded machine (up to 2 s, from a work queue), so a total that
//! must be of one moment ([`ReceivedBytes`]) takes the closed connections' bytes from the
//! probes instead.

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
/// Every TCP state, as `states` bits (`1 << state`).
const ALL_STATES: u32 = !0;
/// The states of a connection whose socket is open: ESTABLISHED, FIN_WAIT1, FIN_WAIT2,
/// CLOSE_WAIT, LAST_ACK, CLOSING. Not TIME_WAIT, whose socket has closed (and its bytes were
/// summed at that close), nor LISTEN or the handshake's.
const OPEN_STATES: u32 = 1 << 1 | 1 << 4 | 1 << 5 | 1 << 8 | 1 << 9 | 1 << 11;
const FAMILIES: [u8; 2] = [libc::AF_INET as u8, libc::AF_INET6 as u8];

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
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
    family: u8,
    id: SockId,
    cookie: u64,
    inode: u64,
    /// Its local port.
    port: u16,
    listening: bool,
    acked: u64,
    received: u64,
}

/// sock_diag's multicast groups SKNLGRP_INET_TCP_DESTROY (1) and SKNLGRP_INET6_TCP_DESTROY (3)
/// as `nl_groups` bits.
const TCP_DESTROY_GROUPS: u32 = 1 | 1 << 2;
/// The broadcasts' queue, in bytes of the kernel's buffers (about 1 KiB a close): at a
/// thousand closes a ms, the default 208 KiB overflows between two reads.
const CLOSES_QUEUE: i32 = 32 << 20;

/// The kernel's broadcasts of the TCP sockets it destroys, IPv4 and IPv6, each with its final
/// `tcp_info`, queued between two drains.
#[derive(Debug)]
struct Closes {
    fd: OwnedFd,
    /// How many times the queue overflowed: the closes broadcast then were lost.
    overflows: u64,
}

impl Closes {
    /// Listens from now on; binding the groups needs CAP_NET_ADMIN.
    fn open() -> io::Result<Closes> {
        let fd = diag_socket()?;
        let raw = fd.as_raw_fd();
        // SAFETY: a zeroed sockaddr_nl is valid; its fields are set below.
        let mut addr: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        addr.nl_family = libc::AF_NETLINK as u16;
        addr.nl_groups = TCP_DESTROY_GROUPS;
        // SAFETY: `addr` is a sockaddr_nl of the size given.
        let bound = unsafe {
            libc::bind(
                raw,
                (&addr as *const libc::sockaddr_nl).cast(),
                size_of::<libc::sockaddr_nl>() as u32,
            )
        };
        if bound < 0 {
            return Err(io::Error::last_os_error());
        }
        // Beyond rmem_max with CAP_NET_ADMIN; without it the default queue stays, and its
        // overflows are counted all the same.
        let _ = set_option(raw, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &CLOSES_QUEUE);
        // SAFETY: plain fcntl(2) on an fd this function owns.
        if unsafe { libc::fcntl(raw, libc::F_SETFL, libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Closes { fd, overflows: 0 })
    }

    /// The sockets destroyed since the last drain, as they were at the end.
    fn drain(&mut self) -> io::Result<Vec<Seen>> {
        let mut closed = Vec::new();
        loop {
            // Broadcasts have no end of dump: `receive` reads until the queue is empty.
            match receive(self.fd.as_raw_fd(), &mut |body| closed.extend(parse(body))) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(closed),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => self.overflows += 1,
                Err(e) => return Err(e),
                Ok(()) => {}
            }
        }
    }
}

/// The sockets destroyed since the last drain, none when the closes are not heard; a failed
/// drain stops hearing them, and says why.
fn drain(closes: &mut Result<Closes, String>) -> Vec<Seen> {
    let Ok(heard) = closes.as_mut() else {
        return Vec::new();
    };
    heard.drain().unwrap_or_else(|e| {
        *closes = Err(format!("sock_diag's broadcasts failed: {e}"));
        Vec::new()
    })
}

/// Whether the closes are heard, and how well, for a bytes' source.
fn closes_heard(closes: &Result<Closes, String>) -> String {
    match closes {
        Ok(Closes { overflows: 0, .. }) => "and each closed one's final count from the kernel's \
                                            destroy broadcast"
            .into(),
        Ok(Closes { overflows, .. }) => format!(
            "and each closed one's final count from the kernel's destroy broadcast, whose queue \
             overflowed {overflows} times: the closes broadcast then are missed"
        ),
        Err(why) => format!(
            "without the kernel's destroy broadcasts ({why}): what a connection received after \
             the last sighting before its close is missed"
        ),
    }
}

/// The tree's TCP sockets now, and the local ports it listens on. The tree's are those it
/// holds, those of `known` cookies, and the orphans (closed by the server, no inode: FIN_WAIT,
/// LAST_ACK) on a port it listens on: a connection the server closed first lingers so until
/// its client's FIN, which on a loaded machine came hundreds of ms after the request.
fn tree_sockets(root: u32, known: impl Fn(u64) -> bool) -> io::Result<(Vec<Seen>, BTreeSet<u16>)> {
    let inodes = tree_socket_inodes(root);
    let (listening, others) = listeners_and_others(&inodes)?;
    let sockets = others
        .into_iter()
        .filter(|seen| {
            inodes.contains(&seen.inode)
                || known(seen.cookie)
                || (seen.inode == 0 && listening.contains(&seen.port))
        })
        .collect();
    Ok((sockets, listening))
}

/// The TCP bytes of a tree's sockets over a stretch of time, from sightings at its start, while
/// it runs, and at its end.
pub struct SocketBytes {
    root: u32,
    /// Cookie → (bytes acked, bytes received) when first seen: zero for a socket born after the
    /// start, whose counters began within the stretch.
    first: HashMap<u64, (u64, u64)>,
    last: HashMap<u64, (u64, u64)>,
    listening: BTreeSet<u16>,
    closes: Result<Closes, String>,
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
            listening: BTreeSet::new(),
            closes: Closes::open().map_err(|e| format!("sock_diag's broadcasts: {e}")),
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
        self.count_closed();
        let last = &self.last;
        let (sockets, listening) = tree_sockets(self.root, |cookie| last.contains_key(&cookie))?;
        for seen in sockets {
            let now = (seen.acked, seen.received);
            let base = if self.started { (0, 0) } else { now };
            self.first.entry(seen.cookie).or_insert(base);
            self.last.insert(seen.cookie, now);
        }
        self.listening = listening;
        Ok(())
    }

    /// Takes the final counts of the tree's sockets destroyed since the last sighting: a
    /// known one's, and one never seen whole when the tree listened on its port. Before the
    /// start they are the tree's past, left out.
    fn count_closed(&mut self) {
        let closed = drain(&mut self.closes);
        for seen in closed.into_iter().filter(|_| self.started) {
            if self.last.contains_key(&seen.cookie) || self.listening.contains(&seen.port) {
                self.first.entry(seen.cookie).or_insert((0, 0));
                self.last.insert(seen.cookie, (seen.acked, seen.received));
            }
        }
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
            source: format!(
                "sock_diag tcp_info (bytes_acked, bytes_received) of the tree's TCP sockets, \
                 sighted every few ms, {}",
                closes_heard(&self.closes)
            ),
        }))
    }
}

/// What the probes keep of the connections on the ports the tree listens on, read just before
/// a [`ReceivedBytes::read`] (reqcost.bpf.c, `tcp_closed`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ListenerTraffic {
    /// By port, what the connections closed so far received.
    pub closed: HashMap<u16, u64>,
    /// The connections established since the probes loaded and not closed yet; None once
    /// their table overflowed, when some may be missing.
    pub opened: Option<Vec<Connection>>,
}

/// A TCP connection by its addresses, as sock_diag looks one up: the local end is the
/// server's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Connection {
    pub family: u8,
    pub local_port: u16,
    pub remote_port: u16,
    /// The addresses as the kernel keeps them (network order; an IPv4 one in the first word).
    pub local: [u32; 4],
    pub remote: [u32; 4],
}

impl Connection {
    fn of(seen: &Seen) -> Connection {
        Connection {
            family: seen.family,
            local_port: u16::from_be(seen.id.sport),
            remote_port: u16::from_be(seen.id.dport),
            local: seen.id.src,
            remote: seen.id.dst,
        }
    }
}

/// Beyond this many open connections a dump costs less than looking each one up: a dump took
/// 2.2-3.0 ms of CPU here, 64 lookups sent at once 0.68 ms (a Python loop's, its own overhead
/// included: bench/RESULTS.md).
const MOST_LOOKUPS: usize = 256;
/// Lookups sent at once: their replies (about 300 bytes each) stay well within the socket's
/// receive buffer, which drops what does not fit.
const LOOKUPS_AT_ONCE: usize = 64;

/// The bytes the connections on the ports the tree listens on received, as a running total
/// read at chosen moments (`attach --budget` reads it at each window's end): what work the
/// server did while nothing else counts its requests. Each read adds what the open ones hold
/// now to what those closed so far received, summed by an eBPF program at each close and read
/// just before: both are of one moment, so a read counts the bytes received by then, however
/// late the kernel's destroy broadcasts come (2 s on a loaded machine).
///
/// The open ones are those a dump found at the start and those the probes saw established
/// since, each looked up by its addresses: a dump walks the kernel's whole table of
/// connections. It dumps instead when the probes' table of them overflowed, when there are
/// more than [`MOST_LOOKUPS`], or when the kernel refuses a lookup.
#[derive(Debug)]
pub struct ReceivedBytes {
    root: u32,
    /// The ports counted: the tree's listening ones whose closes are summed.
    ports: BTreeSet<u16>,
    /// The address families of those listeners: the connections they accept are theirs.
    families: BTreeSet<u8>,
    /// The open connections on those ports the last dump found: the probes saw only those
    /// established after they loaded.
    dumped: BTreeSet<Connection>,
    /// The reads that dumped, and those that looked the connections up.
    dumps: u64,
    lookups: u64,
    /// The total at the start, left out.
    start: u64,
}

impl ReceivedBytes {
    /// Starts the total at zero; `traffic` as for [`ReceivedBytes::read`].
    pub fn start(root: u32, traffic: &ListenerTraffic) -> io::Result<ReceivedBytes> {
        let mut bytes = ReceivedBytes {
            root,
            ports: BTreeSet::new(),
            families: BTreeSet::new(),
            dumped: BTreeSet::new(),
            dumps: 0,
            lookups: 0,
            start: 0,
        };
        bytes.start = bytes.dump(&traffic.closed)? + bytes.gone(&traffic.closed);
        Ok(bytes)
    }

    /// The bytes received since the start, up to now. `traffic` is what the probes kept, read
    /// just before the call: a connection that closes during the read is then left out of it
    /// (neither open nor closed yet), never counted twice.
    pub fn read(&mut self, traffic: &ListenerTraffic) -> io::Result<u64> {
        // A lookup the kernel refuses leaves the dump, which needs nothing of the probes.
        let looked_up = self.to_look_up(traffic).map(|conns| self.look_up(&conns));
        let open = match looked_up {
            Some(Ok(open)) => open,
            _ => self.dump(&traffic.closed)?,
        };
        Ok((open + self.gone(&traffic.closed)).saturating_sub(self.start))
    }

    /// What the closed connections on the counted ports received.
    fn gone(&self, closed: &HashMap<u16, u64>) -> u64 {
        self.ports.iter().filter_map(|port| closed.get(port)).sum()
    }

    /// The connections to look up, None when a dump is due.
    fn to_look_up(&self, traffic: &ListenerTraffic) -> Option<Vec<Connection>> {
        let opened = traffic.opened.as_ref()?;
        let conns: BTreeSet<Connection> = self
            .dumped
            .iter()
            .chain(opened)
            .filter(|conn| self.ports.contains(&conn.local_port))
            .copied()
            .collect();
        (conns.len() <= MOST_LOOKUPS).then(|| conns.into_iter().collect())
    }

    /// What `conns` received, each looked up; those of the last dump that are gone are
    /// forgotten.
    fn look_up(&mut self, conns: &[Connection]) -> io::Result<u64> {
        let fd = diag_socket()?;
        // A reply the kernel could not queue is dropped: waited for, it would stall the read.
        let timeout = libc::timeval {
            tv_sec: 1,
            tv_usec: 0,
        };
        set_option(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &timeout,
        )?;
        let mut received = 0;
        for chunk in conns.chunks(LOOKUPS_AT_ONCE) {
            for (conn, now) in chunk.iter().zip(look_up(fd.as_raw_fd(), chunk)?) {
                match now {
                    Some(seen) => received += seen.received,
                    None => {
                        self.dumped.remove(conn);
                    }
                }
            }
        }
        self.lookups += 1;
        Ok(received)
    }

    /// Dumps the listeners, then the open connections of their families only: each dump of
    /// connections walks the kernel's whole table of them (262 144 buckets here), 2.2 ms of
    /// reqcost's CPU on a loaded machine, where the listeners' dumps took 70 µs together and
    /// dumping every socket of both families 5.1 ms (`bench/RESULTS.md`). What the open ones
    /// received.
    fn dump(&mut self, closed: &HashMap<u16, u64>) -> io::Result<u64> {
        let inodes = tree_socket_inodes(self.root);
        // A port stays counted once it was: its closes go on being summed, so a read that
        // misses the listener (a process gone) does not take its bytes back.
        for seen in dump(&FAMILIES, 1 << TCP_LISTEN)? {
            if inodes.contains(&seen.inode) && closed.contains_key(&seen.port) {
                self.ports.insert(seen.port);
                self.families.insert(seen.family);
            }
        }
        let families: Vec<u8> = self.families.iter().copied().collect();
        let open: Vec<Seen> = dump(&families, OPEN_STATES)?
            .into_iter()
            .filter(|seen| self.ports.contains(&seen.port))
            .collect();
        self.dumped = open.iter().map(Connection::of).collect();
        self.dumps += 1;
        Ok(open.iter().map(|seen| seen.received).sum())
    }

    /// What the count is made of.
    pub fn source(&self) -> String {
        format!(
            "sock_diag tcp_info bytes_received of the open connections on the tree's listening \
             ports at each read (looked up by their addresses in {} reads, dumped in {}), and \
             the final count of each closed one, summed at its close by an eBPF program on the \
             kernel's TCP state changes",
            self.lookups, self.dumps
        )
    }
}

/// The TCP ports the tree holding `inodes` listens on, and every other TCP socket of the
/// machine.
fn listeners_and_others(inodes: &BTreeSet<u64>) -> io::Result<(BTreeSet<u16>, Vec<Seen>)> {
    let (listeners, others): (Vec<Seen>, Vec<Seen>) = dump(&FAMILIES, ALL_STATES)?
        .into_iter()
        .partition(|seen| seen.listening);
    let listening = listeners
        .iter()
        .filter(|seen| inodes.contains(&seen.inode))
        .map(|seen| seen.port)
        .collect();
    Ok((listening, others))
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

/// The machine's TCP sockets of `families` in `states` (bits `1 << state`).
fn dump(families: &[u8], states: u32) -> io::Result<Vec<Seen>> {
    let fd = diag_socket()?;
    let raw = fd.as_raw_fd();
    let mut all = Vec::new();
    for &family in families {
        send_request(raw, family, states)?;
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

/// Sets socket option `name` of `level` to `value`, a plain repr(C) value.
fn set_option<T>(fd: i32, level: i32, name: i32, value: &T) -> io::Result<()> {
    // SAFETY: `value` is readable for its size, which is what setsockopt reads.
    let set = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as u32,
        )
    };
    if set < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `request`, repr(C) netlink messages of plain integers, as their bytes.
pub(crate) fn send_struct<T: ?Sized>(fd: i32, request: &T) -> io::Result<()> {
    // SAFETY: `request` is plain repr(C) data, readable for its size.
    let sent = unsafe {
        libc::send(
            fd,
            (request as *const T).cast(),
            std::mem::size_of_val(request),
            0,
        )
    };
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

fn send_request(fd: i32, family: u8, states: u32) -> io::Result<()> {
    let request = tcp_request(dump_header::<Request>(), family, states, SockId::default());
    send_struct(fd, &request)
}

/// A request for TCP sockets of `family` in `states` (a dump) or for the one `id` names (a
/// lookup), each with its `tcp_info`.
fn tcp_request(header: libc::nlmsghdr, family: u8, states: u32, id: SockId) -> Request {
    Request {
        header,
        family,
        protocol: libc::IPPROTO_TCP as u8,
        ext: 1 << (INET_DIAG_INFO - 1),
        pad: 0,
        states,
        id,
    }
}

/// Reads the dump's messages until its end, handing each message's body to `each`.
pub(crate) fn receive(fd: i32, each: &mut dyn FnMut(&[u8])) -> io::Result<()> {
    receive_until(fd, &mut |header, body| match header.nlmsg_type as i32 {
        libc::NLMSG_DONE => Ok(true),
        libc::NLMSG_ERROR => Err(io::Error::other("sock_diag: the kernel refused the dump")),
        _ => {
            each(body);
            Ok(false)
        }
    })
}

/// Reads messages, handing each one's header and body to `each` until it says the reply is
/// complete.
fn receive_until(
    fd: i32,
    each: &mut dyn FnMut(&libc::nlmsghdr, &[u8]) -> io::Result<bool>,
) -> io::Result<()> {
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
            if each(&header, &buf[at + size_of::<libc::nlmsghdr>()..at + len])? {
                return Ok(());
            }
            at += (len + 3) & !3;
        }
    }
}

/// Looks `conns` up, a request each in one send (the kernel answers each with its socket or
/// an error): what each one is now, None for one gone or no longer an open connection (a
/// TIME_WAIT, or the listener the kernel finds in its place).
fn look_up(fd: i32, conns: &[Connection]) -> io::Result<Vec<Option<Seen>>> {
    if conns.is_empty() {
        return Ok(Vec::new());
    }
    let requests: Vec<Request> = conns
        .iter()
        .enumerate()
        .map(|(seq, conn)| {
            let header = libc::nlmsghdr {
                nlmsg_len: size_of::<Request>() as u32,
                nlmsg_type: SOCK_DIAG_BY_FAMILY,
                nlmsg_flags: libc::NLM_F_REQUEST as u16,
                nlmsg_seq: seq as u32,
                nlmsg_pid: 0,
            };
            let id = SockId {
                sport: conn.local_port.to_be(),
                dport: conn.remote_port.to_be(),
                src: conn.local,
                dst: conn.remote,
                interface: 0,
                cookie: [!0, !0],
            };
            tcp_request(header, conn.family, ALL_STATES, id)
        })
        .collect();
    send_struct(fd, requests.as_slice())?;
    let mut now = vec![None; conns.len()];
    let mut answered = 0;
    receive_until(fd, &mut |header, body| {
        let at = header.nlmsg_seq as usize;
        if header.nlmsg_type as i32 == libc::NLMSG_ERROR {
            let errno = body
                .get(..4)
                .map_or(0, |e| -i32::from_ne_bytes([e[0], e[1], e[2], e[3]]));
            if errno != libc::ENOENT {
                return Err(io::Error::from_raw_os_error(errno));
            }
        } else if let Some(slot) = now.get_mut(at) {
            *slot = parse(body).filter(|seen| !seen.listening);
        }
        answered += 1;
        Ok(answered == conns.len())
    })?;
    Ok(now)
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
                family: msg.family,
                id: msg.id,
                cookie: u64::from(msg.id.cookie[0]) | (u64::from(msg.id.cookie[1]) << 32),
                inode: u64::from(msg.inode),
                port: u16::from_be(msg.id.sport),
                listening: msg.state == TCP_LISTEN,
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
    use std::net::{Shutdown, TcpListener, TcpStream};
    use std::sync::Mutex;

    /// The tests' counts are of this process's sockets: one test's closes must not land in
    /// another's count.
    static ALONE: Mutex<()> = Mutex::new(());

    /// This process's own connection: what it sends is what the kernel says was acked once the
    /// peer has read it all.
    #[test]
    fn a_connection_of_this_process_counts_its_bytes() {
        let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
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

    /// A client that sends `request` and closes; the server side reads it all, then closes.
    fn send_and_close(client: &mut TcpStream, server: &mut TcpStream, request: &[u8]) {
        client.write_all(request).unwrap();
        client.shutdown(Shutdown::Write).unwrap();
        let mut got = Vec::new();
        server.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), request.len());
    }

    /// A read adds what the open connections on the tree's listening ports received (not their
    /// clients' ends, on other ports) to what the closed ones did on those ports, as the probes
    /// summed it; a port whose closes are not summed is not counted, open or closed, and one
    /// counted stays so.
    #[test]
    fn received_bytes_are_the_open_connections_and_the_closed_sums_of_the_listening_ports() {
        let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let unsummed = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let other = unsummed.local_addr().unwrap().port();
        let closed = |sum: u64| dumped(HashMap::from([(port, sum), (1, 5000)]));
        let mut bytes = ReceivedBytes::start(std::process::id(), &closed(40)).unwrap();
        assert_eq!(bytes.read(&closed(40)).unwrap(), 0);

        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let mut elsewhere = TcpStream::connect(unsummed.local_addr().unwrap()).unwrap();
        let (mut there, _) = unsummed.accept().unwrap();
        for (from, to, n) in [
            (&mut client, &mut server, 300),
            (&mut elsewhere, &mut there, 70),
        ] {
            from.write_all(&vec![1u8; n]).unwrap();
            to.read_exact(&mut vec![0u8; n]).unwrap();
        }
        assert_eq!(bytes.read(&closed(40)).unwrap(), 300);
        assert_eq!(bytes.read(&closed(1040)).unwrap(), 1300);
        assert!(!bytes.ports.contains(&other), "{:?}", bytes.ports);
        drop(listener);
        assert_eq!(bytes.read(&closed(1040)).unwrap(), 1300);
    }

    /// What the probes keep when their table of open connections overflowed: every read dumps.
    fn dumped(closed: HashMap<u16, u64>) -> ListenerTraffic {
        ListenerTraffic {
            closed,
            opened: None,
        }
    }

    /// The server end of a connection accepted by `listener`, as the probes enter it.
    fn server_end(server: &TcpStream) -> Connection {
        let words = |addr: std::net::SocketAddr| match addr.ip() {
            std::net::IpAddr::V4(ip) => [u32::from_ne_bytes(ip.octets()), 0, 0, 0],
            std::net::IpAddr::V6(ip) => {
                let o = ip.octets();
                std::array::from_fn(|i| u32::from_ne_bytes(o[4 * i..4 * i + 4].try_into().unwrap()))
            }
        };
        let (local, remote) = (server.local_addr().unwrap(), server.peer_addr().unwrap());
        Connection {
            family: if local.is_ipv4() {
                libc::AF_INET as u8
            } else {
                libc::AF_INET6 as u8
            },
            local_port: local.port(),
            remote_port: remote.port(),
            local: words(local),
            remote: words(remote),
        }
    }

    /// With the probes' open connections, a read looks up those and the ones the start's
    /// dump found, and counts what a dump would: the one opened before the start and the one
    /// after, each once when both lists hold it; one closed is left to the closed sums and
    /// forgotten; one the probes have not seen established is not counted.
    #[test]
    fn received_bytes_look_up_the_connections_the_probes_saw_open_and_the_start_found() {
        let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let connect = |n: usize| {
            let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            let (mut server, _) = listener.accept().unwrap();
            client.write_all(&vec![1u8; n]).unwrap();
            server.read_exact(&mut vec![0u8; n]).unwrap();
            (client, server)
        };
        let before = connect(10);
        let traffic = |opened: Vec<Connection>, closed: u64| ListenerTraffic {
            closed: HashMap::from([(port, closed)]),
            opened: Some(opened),
        };
        let mut bytes = ReceivedBytes::start(std::process::id(), &traffic(vec![], 0)).unwrap();
        assert_eq!(bytes.dumped.len(), 1, "{:?}", bytes.dumped);

        let after = connect(300);
        let unseen = connect(5000);
        let opened = vec![server_end(&after.1), server_end(&before.1)];
        (&before.0).write_all(&[1u8; 20]).unwrap();
        (&before.1).read_exact(&mut [0u8; 20]).unwrap();
        assert_eq!(bytes.read(&traffic(opened.clone(), 0)).unwrap(), 320);
        assert_eq!((bytes.lookups, bytes.dumps), (1, 1));

        // Reset, the server end is closed at once: its 30 bytes move to the closed sums.
        let gone = server_end(&before.1);
        let reset = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        set_option(
            before.1.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &reset,
        )
        .unwrap();
        drop(before);
        assert_eq!(bytes.read(&traffic(opened, 30)).unwrap(), 320);
        assert!(!bytes.dumped.contains(&gone), "{:?}", bytes.dumped);
        drop(unseen);
    }

    /// A dual-stack listener (`[::]` without IPV6_V6ONLY, as Go's `net.Listen(":80")` binds)
    /// accepts an IPv4 client as an IPv6 socket with IPv4-mapped addresses, which the kernel
    /// looks up in its IPv4 table: its bytes are counted by lookup all the same.
    #[test]
    fn received_bytes_look_up_an_ipv4_client_of_a_dual_stack_listener() {
        let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
        let listener = TcpListener::bind("[::]:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let traffic = |opened: Vec<Connection>| ListenerTraffic {
            closed: HashMap::from([(port, 0)]),
            opened: Some(opened),
        };
        let mut bytes = ReceivedBytes::start(std::process::id(), &traffic(vec![])).unwrap();
        let mut client = TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(&[1u8; 150]).unwrap();
        server.read_exact(&mut [0u8; 150]).unwrap();
        let conn = server_end(&server);
        assert_eq!(conn.family, libc::AF_INET6 as u8, "{conn:?}");
        assert_eq!(bytes.read(&traffic(vec![conn])).unwrap(), 150);
        assert_eq!((bytes.lookups, bytes.dumps), (1, 1));
    }

    /// Only the families the tree listens on are dumped for connections: an IPv6 listener's
    /// are counted once it is seen, and an IPv4 one's beside them.
    #[test]
    fn received_bytes_count_each_listening_familys_connections() {
        let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
        let v6 = TcpListener::bind("[::1]:0").unwrap();
        let v6_port = v6.local_addr().unwrap().port();
        let closed = dumped(HashMap::from([(v6_port, 0)]));
        let mut bytes = ReceivedBytes::start(std::process::id(), &closed).unwrap();
        assert_eq!(bytes.families, BTreeSet::from([libc::AF_INET6 as u8]));
        let mut client = TcpStream::connect(v6.local_addr().unwrap()).unwrap();
        let (mut server, _) = v6.accept().unwrap();
        client.write_all(&[1u8; 200]).unwrap();
        server.read_exact(&mut [0u8; 200]).unwrap();
        assert_eq!(bytes.read(&closed).unwrap(), 200);

        let v4 = TcpListener::bind("127.0.0.1:0").unwrap();
        let closed = dumped(HashMap::from([
            (v6_port, 0),
            (v4.local_addr().unwrap().port(), 0),
        ]));
        let mut client = TcpStream::connect(v4.local_addr().unwrap()).unwrap();
        let (mut server, _) = v4.accept().unwrap();
        client.write_all(&[1u8; 30]).unwrap();
        server.read_exact(&mut [0u8; 30]).unwrap();
        assert_eq!(bytes.read(&closed).unwrap(), 230);
        assert_eq!(bytes.families.len(), 2, "{:?}", bytes.families);
    }

    /// Sightings hear the closes too: a connection opened and closed between two counts what
    /// its server end received; its client end, never sighted, is not the server's.
    #[test]
    fn a_connection_closed_between_sightings_counts_whole() {
        let _alone = ALONE.lock().unwrap_or_else(|e| e.into_inner());
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut bytes = SocketBytes::start(std::process::id()).unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        send_and_close(&mut client, &mut server, &[1u8; 1000]);
        drop((client, server));
        // The kernel broadcasts a close from a work queue: sighted until it is heard.
        let deadline = Instant::now() + Duration::from_secs(60);
        while bytes.last.is_empty() && Instant::now() < deadline {
            bytes.observe().unwrap();
        }
        let counted = bytes.finish().unwrap().expect("the closed connection");
        assert_eq!(
            (counted.received, counted.sockets),
            (1001, 1),
            "{counted:?}"
        );
        assert!(counted.source.ends_with("destroy broadcast"), "{counted:?}");
    }
}
