//! Attaches the probes to a child process that does a known set of syscalls, and checks the
//! counts and byte histograms exactly. Needs root (or CAP_BPF+CAP_PERFMON), like the probes.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use reqcost_probes::Probes;
use reqcost_record::{FdKind, IoDirection, IoStat, KernelStats, SizeBucket};
use reqcost_testkit::TempDir;

/// Waits for a byte on stdin, does the phase, writes `k` to stdout, waits again. Everything it
/// allocates is allocated before the first wait, so the phase makes only the calls listed.
const CHILD: &str = r#"
import fcntl, mmap, os, select, socket, struct, sys, termios, threading
path = sys.argv[1]
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
a, b = socket.socketpair()
a2, b2 = socket.socketpair()
r, w = os.pipe()
ep = select.epoll()
b100, b3000, b10, b16, b8 = b"x" * 100, b"y" * 3000, b"z" * 10, b"t" * 16, b"c" * 8
outq = bytearray(4)
def in_thread():
    os.write(a.fileno(), b16)
    os.write(a.fileno(), b16)
t = threading.Thread(target=in_thread)
os.read(0, 1)
for _ in range(5):
    os.write(fd, b100)
for _ in range(3):
    a.send(b3000)
os.write(w, b100)
os.write(w, b100)
os.read(r, 200)
os.write(a.fileno(), b10)
t.start()
t.join()
pid = os.fork()
if pid == 0:
    for _ in range(4):
        os.write(fd, b8)
    os._exit(0)
os.waitpid(pid, 0)
b.recv(9042, socket.MSG_WAITALL)
for _ in range(3):
    fcntl.ioctl(a.fileno(), termios.TIOCOUTQ, outq)
fcntl.ioctl(b.fileno(), termios.FIONREAD, outq)
ep.register(b.fileno(), select.EPOLLIN)
ep.poll(0)
ep.modify(b.fileno(), select.EPOLLOUT)
ep.poll(0)
ep.unregister(b.fileno())
for _ in range(3):
    try:
        os.open("/nonexistent/reqcost", os.O_RDONLY)
    except FileNotFoundError:
        pass
a2.close()
b2.close()
os.write(1, b"k")
os.read(0, 1)
"#;

struct Subject {
    child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    _dir: TempDir,
}

impl Subject {
    fn spawn() -> Subject {
        let dir = TempDir::new("probes");
        let mut child = Command::new(reqcost_testkit::PYTHON)
            .args(["-c", CHILD, dir.join("out").to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs (the test's subject)");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let s = Subject {
            child,
            stdin,
            stdout,
            _dir: dir,
        };
        s.wait_blocked_on_stdin();
        s
    }

    /// Until the child sits in read(0, ...): before the phase and after it, so that the two
    /// reads of the probes bracket exactly the phase's calls.
    fn wait_blocked_on_stdin(&self) {
        let path = format!("/proc/{}/syscall", self.child.id());
        loop {
            let now = std::fs::read_to_string(&path).unwrap_or_default();
            // x86_64 read is syscall 0; its first argument is fd 0.
            if now.starts_with("0 0x0 ") {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    fn run_phase(&mut self) {
        self.stdin.write_all(b"g").unwrap();
        let mut k = [0u8; 1];
        self.stdout.read_exact(&mut k).unwrap();
        assert_eq!(&k, b"k");
        self.wait_blocked_on_stdin();
    }
}

impl Drop for Subject {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn io<'a>(k: &'a KernelStats, syscall: &str, kind: FdKind) -> &'a IoStat {
    k.io.iter()
        .find(|s| s.syscall == syscall && s.fd_kind == kind)
        .unwrap_or_else(|| panic!("no {syscall} on {kind:?} in {:#?}", k.io))
}

fn buckets(s: &IoStat) -> Vec<(u64, u64, u64)> {
    s.sizes
        .iter()
        .map(
            |&SizeBucket {
                 min_bytes,
                 max_bytes,
                 count,
             }| (min_bytes, max_bytes, count),
        )
        .collect()
}

#[test]
fn counts_a_known_phase_exactly() {
    let mut subject = Subject::spawn();
    let probes = Probes::attach(subject.child.id()).unwrap_or_else(|e| panic!("{e}"));
    let before = probes.read();
    subject.run_phase();
    let k = probes.read().since(&before);
    assert_known_phase(&k);
}

/// Paused, the probes count none of the phase's calls; resumed, they count the next phase
/// exactly, a thread blocked across the pause included.
#[test]
fn paused_probes_count_nothing_and_resumed_ones_count_exactly() {
    let mut subject = Subject::spawn();
    let probes = Probes::attach(subject.child.id()).unwrap_or_else(|e| panic!("{e}"));
    let before = probes.read();
    probes.pause();
    assert!(probes.paused());
    subject.run_phase();
    let k = probes.read().since(&before);
    assert_eq!(k.syscalls, [], "calls counted while paused");
    assert_eq!((k.io.len(), k.sched.wakeups), (0, 0));
    // The tree is still followed while paused.
    assert_eq!(k.tree.processes_forked, 1);

    let mut subject = Subject::spawn();
    let probes = Probes::attach(subject.child.id()).unwrap_or_else(|e| panic!("{e}"));
    probes.pause();
    probes.resume().unwrap();
    assert!(!probes.paused());
    let before = probes.read();
    subject.run_phase();
    assert_known_phase(&probes.read().since(&before));
}

/// The calls of the child's phase, exactly.
fn assert_known_phase(k: &KernelStats) {
    // The phase's writes: 5 to the file and 4 from the forked grandchild, 2 to the pipe plus the
    // final `k` on stdout, 1 to the socket plus 2 from the thread.
    assert_eq!(k.syscall_count("write"), 15, "{:#?}", k.syscalls);
    assert_eq!(k.syscall_count("sendto"), 3);
    assert_eq!(k.syscall_count("recvfrom"), 1);
    // The pipe read, and the read(0) the child is blocked in (counted when entered).
    assert_eq!(k.syscall_count("read"), 2);
    assert_eq!(k.syscall_count("ioctl"), 4);
    assert_eq!(k.syscall_count("epoll_ctl"), 3);

    let file = io(k, "write", FdKind::File);
    assert_eq!((file.calls, file.bytes), (9, 532));
    assert_eq!(buckets(file), [(8, 15, 4), (64, 127, 5)]);
    let pipe = io(k, "write", FdKind::Pipe);
    assert_eq!((pipe.calls, pipe.bytes), (3, 201));
    assert_eq!(buckets(pipe), [(1, 1, 1), (64, 127, 2)]);
    let sock = io(k, "write", FdKind::Socket);
    assert_eq!((sock.calls, sock.bytes), (3, 42));
    assert_eq!(buckets(sock), [(8, 15, 1), (16, 31, 2)]);
    let send = io(k, "sendto", FdKind::Socket);
    assert_eq!(send.direction, IoDirection::Write);
    assert_eq!((send.calls, send.bytes), (3, 9000));
    assert_eq!(buckets(send), [(2048, 4095, 3)]);
    let recv = io(k, "recvfrom", FdKind::Socket);
    assert_eq!(recv.direction, IoDirection::Read);
    assert_eq!((recv.calls, recv.bytes), (1, 9042));
    assert_eq!(buckets(recv), [(8192, 16383, 1)]);
    let read = io(k, "read", FdKind::Pipe);
    assert_eq!((read.calls, read.bytes), (1, 200));
    assert_eq!(k.io.len(), 6, "{:#?}", k.io);

    let ioctls: Vec<_> = k.ioctls.iter().map(|i| (i.request, i.count)).collect();
    assert_eq!(ioctls, [(0x5411, 3), (0x541B, 1)]);
    assert_eq!(k.ioctls[0].name.as_deref(), Some("SIOCOUTQ/TIOCOUTQ"));
    assert_eq!(
        (k.epoll_ctl.add, k.epoll_ctl.modify, k.epoll_ctl.delete),
        (1, 1, 1)
    );
    let waits: u64 = k.waits.iter().map(|w| w.returns).sum();
    let zero: u64 = k.waits.iter().map(|w| w.zero_ready).sum();
    let ready: u64 = k.waits.iter().map(|w| w.ready).sum();
    assert_eq!((waits, zero, ready), (2, 1, 1), "{:#?}", k.waits);

    let openat = k.syscalls.iter().find(|s| s.name == "openat").unwrap();
    assert_eq!((openat.count, openat.errors), (3, 3));
    assert_eq!(openat.errnos[0].errno, "ENOENT");
    assert_eq!(k.sockets.closed, 2);
    assert_eq!(k.tree.processes_forked, 1);
    assert_eq!(k.tree.threads_created, 1);
    assert_eq!(k.tree.processes_exited, 1);
    assert_eq!(k.lost_events, 0);
    // Woken by the test's "g", blocked again in read(0) at the end.
    assert!(
        k.sched.wakeups >= 1 && k.sched.voluntary_switches >= 1,
        "{:?}",
        k.sched
    );
}

#[test]
fn processes_outside_the_tree_are_not_counted() {
    let mut subject = Subject::spawn();
    let bystander = Subject::spawn();
    let probes = Probes::attach(bystander.child.id()).unwrap_or_else(|e| panic!("{e}"));
    let before = probes.read();
    subject.run_phase();
    let k = probes.read().since(&before);
    assert_eq!(k.syscalls, [], "the bystander made calls it did not make");
    assert_eq!(k.io, []);
}

#[test]
fn a_missing_process_is_unavailable_with_a_reason() {
    let Err(e) = Probes::attach(u32::MAX) else {
        panic!("attached to no process")
    };
    assert!(
        e.to_string()
            .contains(&format!("no process with pid {}", u32::MAX)),
        "{e}"
    );
}
