//! perf_event_open: one system-wide sampling event per CPU with its ring buffer, and parsing of
//! the records they carry.
//!
//! System-wide rather than per-task events: a task's events are switched out and in with the
//! task, re-arming the sampling timer on every context switch, which costs a server that
//! sleeps between requests a few percent of its CPU. A CPU's event runs regardless of who is on
//! it; samples of other processes are dropped before they are copied out of the ring.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};

use perf_event_open_sys as sys;
use sys::bindings as b;

use crate::arch;

/// Bytes of user stack copied with each sample: apache2's request chains unwind to the thread's
/// first frame with it (no truncated samples in bench/RESULTS.md); larger copies cost the target
/// time in every sample.
const STACK_COPY: u32 = 16 * 1024;

const SAMPLE_TYPE: u64 = (b::PERF_SAMPLE_IP
    | b::PERF_SAMPLE_TID
    | b::PERF_SAMPLE_TIME
    | b::PERF_SAMPLE_CPU
    | b::PERF_SAMPLE_CALLCHAIN
    | b::PERF_SAMPLE_REGS_USER
    | b::PERF_SAMPLE_STACK_USER) as u64;

/// Which event drives sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    Cycles,
    CpuClock,
}

impl Event {
    pub fn name(self) -> &'static str {
        match self {
            Event::Cycles => "cycles",
            Event::CpuClock => "cpu-clock",
        }
    }
}

fn attr(event: Event, freq_hz: u64, wakeup_bytes: u32) -> b::perf_event_attr {
    let mut a = b::perf_event_attr {
        size: std::mem::size_of::<b::perf_event_attr>() as u32,
        ..Default::default()
    };
    match event {
        Event::Cycles => {
            a.type_ = b::PERF_TYPE_HARDWARE;
            a.config = b::PERF_COUNT_HW_CPU_CYCLES as u64;
        }
        Event::CpuClock => {
            a.type_ = b::PERF_TYPE_SOFTWARE;
            a.config = b::PERF_COUNT_SW_CPU_CLOCK as u64;
        }
    }
    a.__bindgen_anon_1.sample_freq = freq_hz;
    a.set_freq(1);
    a.sample_type = SAMPLE_TYPE;
    a.sample_regs_user = arch::REGS_MASK;
    a.sample_stack_user = STACK_COPY;
    a.set_exclude_hv(1);
    a.set_exclude_idle(1);
    // User chains come from our own unwinding of the stack copy; the kernel's frame-pointer
    // walk of user code is useless on distro binaries.
    a.set_exclude_callchain_user(1);
    a.set_sample_id_all(1);
    a.set_use_clockid(1);
    a.clockid = libc::CLOCK_MONOTONIC;
    // Follow the tree: forks, exits, execs and new executable mappings (of every process: the
    // tracker keeps those of the tree).
    a.set_mmap(1);
    a.set_mmap2(1);
    a.set_comm(1);
    a.set_comm_exec(1);
    a.set_task(1);
    // Wake the reader when part of the buffer is used rather than on every sample.
    a.set_watermark(1);
    a.__bindgen_anon_2.wakeup_watermark = wakeup_bytes;
    a
}

fn perf_event_open(a: &mut b::perf_event_attr, tid: i32, cpu: i32) -> io::Result<OwnedFd> {
    // SAFETY: `a` is a fully initialised attr whose `size` matches its type.
    let fd =
        unsafe { sys::perf_event_open(a, tid, cpu, -1, sys::bindings::PERF_FLAG_FD_CLOEXEC as _) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// One mmap'd ring buffer that every event of one CPU writes into.
pub struct Ring {
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
    fd: OwnedFd,
}

// SAFETY: the mapping is owned by this value and only touched through `&mut self`.
unsafe impl Send for Ring {}

impl Ring {
    fn new(fd: OwnedFd, data_pages: usize) -> io::Result<Ring> {
        let page = page_size();
        let len = page * (1 + data_pages);
        // SAFETY: mapping a perf fd with 1 + 2^n pages is the documented interface.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let meta = base as *mut b::perf_event_mmap_page;
        // SAFETY: the first page is the metadata page, valid for the mapping's life.
        let (data_offset, data_size) = unsafe {
            let off = std::ptr::read_volatile(&(*meta).data_offset) as usize;
            let size = std::ptr::read_volatile(&(*meta).data_size) as usize;
            if size == 0 {
                (page, page * data_pages)
            } else {
                (off, size)
            }
        };
        Ok(Ring {
            base: base as *mut u8,
            len,
            data_offset,
            data_size,
            fd,
        })
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    /// Appends every complete record in the buffer to `out` and frees their space. Samples of
    /// processes for which `wanted(pid)` is false are skipped without being copied.
    pub fn drain(
        &mut self,
        out: &mut Vec<Record>,
        lost: &mut u64,
        wanted: &mut impl FnMut(u32) -> bool,
    ) {
        let meta = self.base as *mut b::perf_event_mmap_page;
        // SAFETY: metadata page fields are read/written as the kernel ABI describes: head with
        // acquire ordering before reading data, tail with release ordering after.
        let head = unsafe { std::ptr::read_volatile(&(*meta).data_head) };
        fence(Ordering::Acquire);
        let mut tail = unsafe { std::ptr::read_volatile(&(*meta).data_tail) };
        let mut buf = Vec::new();
        while tail < head {
            // Header, then for samples the ip and pid.
            let mut hdr = [0u8; 20];
            self.copy_out(tail, &mut hdr);
            let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as u64;
            if size < 8 || tail + size > head {
                break;
            }
            let kind = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
            if kind == b::PERF_RECORD_SAMPLE
                && size >= 20
                && !wanted(u32::from_ne_bytes([hdr[16], hdr[17], hdr[18], hdr[19]]))
            {
                tail += size;
                continue;
            }
            buf.resize(size as usize, 0);
            self.copy_out(tail, &mut buf);
            if let Some(r) = parse(&buf, lost) {
                out.push(r);
            }
            tail += size;
        }
        fence(Ordering::Release);
        unsafe { std::ptr::write_volatile(&mut (*meta).data_tail, tail) };
    }

    fn copy_out(&self, pos: u64, dst: &mut [u8]) {
        let start = (pos % self.data_size as u64) as usize;
        let first = dst.len().min(self.data_size - start);
        // SAFETY: both ranges lie inside the data area of the mapping.
        unsafe {
            let data = self.base.add(self.data_offset);
            std::ptr::copy_nonoverlapping(data.add(start), dst.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(data, dst.as_mut_ptr().add(first), dst.len() - first);
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping our own mapping once.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// One sampling event per online CPU, each with its ring.
pub struct Events {
    pub event: Event,
    pub rings: Vec<Ring>,
}

impl Events {
    /// Opens the per-CPU events (trying `cycles`, then `cpu-clock`).
    pub fn open(freq_hz: u64) -> io::Result<Events> {
        let cpus = online_cpus()?;
        // Bounded memory whatever the CPU count: 4 MiB per CPU on small machines.
        let per_cpu = (64usize << 20) / cpus.len().max(1);
        let data_pages = (per_cpu.clamp(256 << 10, 4 << 20) / page_size()).next_power_of_two();
        let mut last_err = None;
        for event in [Event::Cycles, Event::CpuClock] {
            let rings: io::Result<Vec<Ring>> = cpus
                .iter()
                .map(|&cpu| {
                    let mut a = attr(event, freq_hz, wakeup_bytes(data_pages));
                    Ring::new(perf_event_open(&mut a, -1, cpu)?, data_pages)
                })
                .collect();
            match rings {
                Ok(rings) => return Ok(Events { event, rings }),
                Err(e) => last_err = Some(e),
            }
        }
        Err(last_err.unwrap_or_else(|| io::Error::other("no CPU online")))
    }

    pub fn disable(&self) {
        for r in &self.rings {
            // SAFETY: plain ioctl on our own perf fd; failure leaves nothing to undo.
            unsafe { sys::ioctls::DISABLE(r.fd(), 0) };
        }
    }

    /// Waits until a ring has data or `timeout_ms` passes.
    pub fn wait(&self, timeout_ms: i32) {
        let mut pfds: Vec<libc::pollfd> = self
            .rings
            .iter()
            .map(|r| libc::pollfd {
                fd: r.fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: pfds is a valid array of pollfd for its length.
        unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
    }
}

fn wakeup_bytes(data_pages: usize) -> u32 {
    (data_pages * page_size() / 4) as u32
}

fn online_cpus() -> io::Result<Vec<i32>> {
    let text = std::fs::read_to_string("/sys/devices/system/cpu/online")?;
    let mut cpus = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let bad = || io::Error::other(format!("unexpected CPU list {text:?}"));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (i32, i32) =
                    (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                cpus.extend(a..=b);
            }
            None => cpus.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(cpus)
}

/// A parsed ring-buffer record, reduced to what the profiler uses.
#[derive(Debug)]
pub enum Record {
    Sample(Sample),
    Mmap(Mmap),
    Comm {
        pid: u32,
        tid: u32,
        exec: bool,
        name: String,
        time: u64,
    },
    Fork {
        pid: u32,
        ppid: u32,
        tid: u32,
        ptid: u32,
        time: u64,
    },
    Exit {
        pid: u32,
        tid: u32,
        time: u64,
    },
}

impl Record {
    pub fn time(&self) -> u64 {
        match self {
            Record::Sample(s) => s.time,
            Record::Mmap(m) => m.time,
            Record::Comm { time, .. } | Record::Fork { time, .. } | Record::Exit { time, .. } => {
                *time
            }
        }
    }
}

#[derive(Debug)]
pub struct Sample {
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    /// Kernel return addresses, leaf first (context markers removed).
    pub kernel: Vec<u64>,
    /// Sampled user registers in `arch::REGS_MASK` order, when the thread has a user context.
    pub regs: Option<[u64; arch::NREGS]>,
    /// Copy of the user stack from the sampled stack pointer up.
    pub stack: Vec<u8>,
}

#[derive(Debug)]
pub struct Mmap {
    pub pid: u32,
    pub time: u64,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub exec: bool,
    pub path: String,
}

struct Cursor<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn u64(&mut self) -> Option<u64> {
        let v = self.b.get(self.pos..self.pos + 8)?;
        self.pos += 8;
        Some(u64::from_ne_bytes(v.try_into().ok()?))
    }
    fn u32(&mut self) -> Option<u32> {
        let v = self.b.get(self.pos..self.pos + 4)?;
        self.pos += 4;
        Some(u32::from_ne_bytes(v.try_into().ok()?))
    }
    fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let b: &'a [u8] = self.b;
        let v = b.get(self.pos..self.pos.checked_add(n)?)?;
        self.pos += n;
        Some(v)
    }
    /// A NUL-terminated string padded to 8 bytes.
    fn cstr(&mut self) -> Option<String> {
        let rest = self.b.get(self.pos..)?;
        let nul = rest.iter().position(|&c| c == 0)?;
        let s = String::from_utf8_lossy(&rest[..nul]).into_owned();
        self.pos += (nul + 1).next_multiple_of(8);
        Some(s)
    }
    /// The trailing sample_id of non-sample records: pid/tid, time, cpu.
    fn sample_id_time(&mut self) -> Option<u64> {
        self.u64()?;
        self.u64()
    }
    /// PERF_SAMPLE_CALLCHAIN: the kernel's return addresses, leaf first, without the context
    /// markers (user frames are excluded from the chain at the source).
    fn callchain(&mut self) -> Option<Vec<u64>> {
        let nr = self.u64()? as usize;
        let mut kernel = Vec::with_capacity(nr.min(128));
        for _ in 0..nr {
            let ip = self.u64()?;
            if ip < b::PERF_CONTEXT_MAX {
                kernel.push(ip);
            }
        }
        Some(kernel)
    }

    /// PERF_SAMPLE_REGS_USER: the registers of `arch::REGS_MASK`, when the thread was in a
    /// 64-bit user context.
    fn regs_user(&mut self) -> Option<Option<[u64; arch::NREGS]>> {
        let abi = self.u64()?;
        if abi == b::PERF_SAMPLE_REGS_ABI_64 as u64 {
            let mut r = [0u64; arch::NREGS];
            for v in r.iter_mut() {
                *v = self.u64()?;
            }
            return Some(Some(r));
        }
        if abi != b::PERF_SAMPLE_REGS_ABI_NONE as u64 {
            // 32-bit task: registers are there but our unwinder is 64-bit only.
            for _ in 0..arch::NREGS {
                self.u64()?;
            }
        }
        Some(None)
    }

    /// PERF_SAMPLE_STACK_USER: the copied stack, cut to the part the kernel filled.
    fn stack_user(&mut self) -> Option<Vec<u8>> {
        let size = self.u64()? as usize;
        if size == 0 {
            return Some(Vec::new());
        }
        let data = self.bytes(size)?;
        let dyn_size = (self.u64()? as usize).min(size);
        Some(data[..dyn_size].to_vec())
    }
}

fn parse(rec: &[u8], lost: &mut u64) -> Option<Record> {
    let kind = u32::from_ne_bytes(rec[0..4].try_into().ok()?);
    let misc = u16::from_ne_bytes(rec[4..6].try_into().ok()?) as u32;
    let mut c = Cursor { b: rec, pos: 8 };
    match kind {
        b::PERF_RECORD_SAMPLE => parse_sample(&mut c).map(Record::Sample),
        b::PERF_RECORD_MMAP2 => parse_mmap2(&mut c).map(Record::Mmap),
        b::PERF_RECORD_COMM => parse_comm(&mut c, misc),
        b::PERF_RECORD_FORK | b::PERF_RECORD_EXIT => parse_task(&mut c, kind),
        b::PERF_RECORD_LOST => {
            c.u64()?; // id
            *lost += c.u64()?;
            None
        }
        b::PERF_RECORD_LOST_SAMPLES => {
            *lost += c.u64()?;
            None
        }
        _ => None,
    }
}

/// A sample, its fields in `SAMPLE_TYPE` order.
fn parse_sample(c: &mut Cursor) -> Option<Sample> {
    c.u64()?; // ip: the kernel chain or the unwound user chain starts with it
    let pid = c.u32()?;
    let tid = c.u32()?;
    let time = c.u64()?;
    c.u64()?; // cpu, res
    Some(Sample {
        pid,
        tid,
        time,
        kernel: c.callchain()?,
        regs: c.regs_user()?,
        stack: c.stack_user()?,
    })
}

fn parse_mmap2(c: &mut Cursor) -> Option<Mmap> {
    let pid = c.u32()?;
    c.u32()?;
    let start = c.u64()?;
    let len = c.u64()?;
    let pgoff = c.u64()?;
    c.bytes(24)?; // maj, min, ino, ino_generation (or build id)
    let prot = c.u32()?;
    c.u32()?; // flags
    let path = c.cstr()?;
    let time = c.sample_id_time()?;
    Some(Mmap {
        pid,
        time,
        start,
        len,
        pgoff,
        exec: prot & libc::PROT_EXEC as u32 != 0,
        path,
    })
}

fn parse_comm(c: &mut Cursor, misc: u32) -> Option<Record> {
    let pid = c.u32()?;
    let tid = c.u32()?;
    let name = c.cstr()?;
    let time = c.sample_id_time()?;
    Some(Record::Comm {
        pid,
        tid,
        exec: misc & b::PERF_RECORD_MISC_COMM_EXEC != 0,
        name,
        time,
    })
}

/// PERF_RECORD_FORK and PERF_RECORD_EXIT share their layout.
fn parse_task(c: &mut Cursor, kind: u32) -> Option<Record> {
    let pid = c.u32()?;
    let ppid = c.u32()?;
    let tid = c.u32()?;
    let ptid = c.u32()?;
    let time = c.u64()?;
    Some(if kind == b::PERF_RECORD_FORK {
        Record::Fork {
            pid,
            ppid,
            tid,
            ptid,
            time,
        }
    } else {
        Record::Exit { pid, tid, time }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut r = kind.to_ne_bytes().to_vec();
        r.extend(misc.to_ne_bytes());
        r.extend(((8 + body.len()) as u16).to_ne_bytes());
        r.extend(body);
        r
    }

    fn words(v: &[u64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_ne_bytes()).collect()
    }

    fn pids(a: u32, b: u32) -> Vec<u8> {
        [a.to_ne_bytes(), b.to_ne_bytes()].concat()
    }

    #[test]
    fn sample_keeps_kernel_frames_registers_and_the_filled_stack() {
        let mut body = words(&[0x1234]);
        body.extend(pids(7, 8));
        let kernel = [0xffff_ffff_8100_0010, 0xffff_ffff_8100_0020];
        body.extend(words(&[
            99,
            0,
            3,
            b::PERF_CONTEXT_KERNEL,
            kernel[0],
            kernel[1],
        ]));
        body.extend(words(&[b::PERF_SAMPLE_REGS_ABI_64 as u64]));
        body.extend(words(&(1..=arch::NREGS as u64).collect::<Vec<_>>()));
        body.extend(words(&[16]));
        body.extend([0xab; 16]);
        body.extend(words(&[8]));
        let mut lost = 0;
        let Some(Record::Sample(s)) = parse(&record(b::PERF_RECORD_SAMPLE, 0, &body), &mut lost)
        else {
            panic!("not a sample");
        };
        assert_eq!((s.pid, s.tid, s.time), (7, 8, 99));
        assert_eq!(s.kernel, kernel);
        assert_eq!(s.regs.map(|r| r[arch::NREGS - 1]), Some(arch::NREGS as u64));
        assert_eq!(s.stack, [0xab; 8]);
        assert_eq!(lost, 0);
    }

    #[test]
    fn sample_of_a_thread_in_the_kernel_has_no_user_context() {
        let mut body = words(&[0x1234]);
        body.extend(pids(7, 7));
        body.extend(words(&[5, 0, 0, b::PERF_SAMPLE_REGS_ABI_NONE as u64, 0]));
        let Some(Record::Sample(s)) = parse(&record(b::PERF_RECORD_SAMPLE, 0, &body), &mut 0)
        else {
            panic!("not a sample");
        };
        assert!(s.kernel.is_empty() && s.regs.is_none() && s.stack.is_empty());
    }

    #[test]
    fn task_records_and_losses() {
        let mut body = pids(10, 1);
        body.extend(pids(11, 1));
        body.extend(words(&[42]));
        let fork = parse(&record(b::PERF_RECORD_FORK, 0, &body), &mut 0);
        assert!(
            matches!(
                fork,
                Some(Record::Fork {
                    pid: 10,
                    ppid: 1,
                    tid: 11,
                    ptid: 1,
                    time: 42
                })
            ),
            "{fork:?}"
        );
        let exit = parse(&record(b::PERF_RECORD_EXIT, 0, &body), &mut 0);
        assert!(
            matches!(
                exit,
                Some(Record::Exit {
                    pid: 10,
                    tid: 11,
                    time: 42
                })
            ),
            "{exit:?}"
        );

        let mut body = pids(10, 11);
        body.extend(b"nginx\0\0\0");
        body.extend(words(&[0, 43, 0]));
        let misc = b::PERF_RECORD_MISC_COMM_EXEC as u16;
        let comm = parse(&record(b::PERF_RECORD_COMM, misc, &body), &mut 0);
        assert!(
            matches!(&comm, Some(Record::Comm { pid: 10, tid: 11, exec: true, name, time: 43 }) if name == "nginx"),
            "{comm:?}"
        );

        let mut lost = 1;
        assert!(parse(&record(b::PERF_RECORD_LOST, 0, &words(&[0, 5])), &mut lost).is_none());
        assert!(parse(
            &record(b::PERF_RECORD_LOST_SAMPLES, 0, &words(&[2])),
            &mut lost
        )
        .is_none());
        assert_eq!(lost, 8);
    }

    #[test]
    fn mmap2_says_whether_the_mapping_is_executable() {
        let mut body = pids(10, 10);
        body.extend(words(&[0x40_0000, 0x1000, 0x2000, 0, 0, 0]));
        body.extend(pids(libc::PROT_READ as u32 | libc::PROT_EXEC as u32, 0));
        body.extend(b"/usr/sbin/nginx\0");
        body.extend(words(&[0, 44, 0]));
        let Some(Record::Mmap(m)) = parse(&record(b::PERF_RECORD_MMAP2, 0, &body), &mut 0) else {
            panic!("not a mapping");
        };
        assert_eq!(
            (
                m.pid,
                m.start,
                m.len,
                m.pgoff,
                m.exec,
                m.path.as_str(),
                m.time
            ),
            (10, 0x40_0000, 0x1000, 0x2000, true, "/usr/sbin/nginx", 44)
        );
    }
}
