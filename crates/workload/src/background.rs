//! A background client that is not the load generator: plain threads making blocking gopher
//! requests, fast or paced readers from chosen loopback addresses, as a server's own clients
//! would. What `attach` is shown (the demo) and tested with: traffic from reqcost's load
//! generator would be reqcost measuring itself.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::os::fd::FromRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::pace::Pace;

/// How a client reads its responses, and the loopback address it connects from (which names
/// it in per-client figures).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reader {
    pub source: Ipv4Addr,
    /// None: as fast as it can; else paced at this rate through a small receive buffer, as the
    /// load generator's slow clients read.
    pub bytes_per_s: Option<u64>,
}

/// A reader as fast as loopback allows, from 127.0.0.1.
pub const FAST: Reader = Reader {
    source: Ipv4Addr::LOCALHOST,
    bytes_per_s: None,
};

/// The receive buffer of a paced reader: small, so that the server's send queue fills.
const SLOW_RCVBUF: libc::c_int = 8 * 1024;

/// A TCP connection to `port` on 127.0.0.1 from `source`, with `rcvbuf` set before connecting
/// (it bounds the window the peer announces, which is fixed at connect time).
pub fn connect_from(
    source: Ipv4Addr,
    port: u16,
    rcvbuf: Option<libc::c_int>,
) -> io::Result<TcpStream> {
    let sockaddr = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    let check = |ret: libc::c_int| {
        if ret < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(ret)
        }
    };
    // SAFETY: plain socket calls on a socket this function owns (closed with `stream` on every
    // return); every pointer is to a local of the size given with it.
    unsafe {
        let fd = check(libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
        ))?;
        let stream = TcpStream::from_raw_fd(fd);
        if let Some(size) = rcvbuf {
            check(libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&size as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            ))?;
        }
        let local = sockaddr(source, 0);
        check(libc::bind(
            fd,
            (&local as *const libc::sockaddr_in).cast(),
            len,
        ))?;
        let peer = sockaddr(Ipv4Addr::LOCALHOST, port);
        check(libc::connect(
            fd,
            (&peer as *const libc::sockaddr_in).cast(),
            len,
        ))?;
        Ok(stream)
    }
}

/// One gopher request for the menu of the server on `port`, read as `reader` reads; the bytes
/// received.
pub fn request(port: u16, reader: Reader) -> io::Result<usize> {
    request_for(port, reader, "")
}

/// One gopher request for `selector`, read as `reader` reads; the bytes received.
pub fn request_for(port: u16, reader: Reader, selector: &str) -> io::Result<usize> {
    let rcvbuf = reader.bytes_per_s.map(|_| SLOW_RCVBUF);
    let mut s = connect_from(reader.source, port, rcvbuf)?;
    s.write_all(format!("{selector}\r\n").as_bytes())?;
    // A paced reader reads a twentieth of a second's worth at a time, never ahead of its rate.
    let chunk = reader
        .bytes_per_s
        .map_or(64 * 1024, |rate| (rate / 20).max(512) as usize);
    let mut buf = vec![0u8; chunk];
    let mut pace = reader
        .bytes_per_s
        .map(|rate| Pace::new(rate, chunk, Instant::now()));
    let mut total = 0;
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Ok(total);
        }
        total += n;
        let now = Instant::now();
        if let Some(due) = pace.as_mut().and_then(|p| p.read(n, now)) {
            thread::sleep(due - now);
        }
    }
}

/// Traffic from a client that is not reqcost: one thread per list, each sending its requests
/// in order, until the lists are done or `stop` is set; the requests answered.
pub fn traffic(port: u16, threads: Vec<Vec<Reader>>, stop: &AtomicBool) -> usize {
    traffic_logged(port, threads, stop).len()
}

/// How [`traffic_logged`] writes its log, in nginx's `log_format` syntax (`--log-format` reads
/// it back).
pub const LOG_FORMAT: &str =
    r#"$msec $remote_addr "$request" $status $body_bytes_sent $request_time"#;

/// [`traffic`], and the access log a server would have written of it: one [`LOG_FORMAT`] line
/// per request answered, in the order they ended, its request time from connecting to the
/// last byte read (the testbed's servers write no access log of their own).
pub fn traffic_logged(port: u16, threads: Vec<Vec<Reader>>, stop: &AtomicBool) -> Vec<String> {
    let mut lines: Vec<(SystemTime, String)> = thread::scope(|s| {
        let handles: Vec<_> = threads
            .into_iter()
            .map(|readers| {
                s.spawn(move || {
                    readers
                        .into_iter()
                        .take_while(|_| !stop.load(Ordering::Relaxed))
                        .filter_map(|reader| {
                            let started = Instant::now();
                            let bytes = request(port, reader).ok().filter(|n| *n > 0)?;
                            let end = SystemTime::now();
                            let at = end.duration_since(UNIX_EPOCH).unwrap_or_default();
                            let line = format!(
                                "{:.3} {} \"GET / HTTP/1.0\" 200 {bytes} {:.3}",
                                at.as_secs_f64(),
                                reader.source,
                                started.elapsed().as_secs_f64()
                            );
                            Some((end, line))
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    lines.sort_by_key(|(end, _)| *end);
    lines.into_iter().map(|(_, line)| line).collect()
}
