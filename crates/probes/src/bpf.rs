//! Loading, attaching and reading the BPF object through its libbpf-rs skeleton.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::mem::{ManuallyDrop, MaybeUninit};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use libbpf_rs::libbpf_sys;
use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{
    Link, MapCore, MapFlags, MapHandle, MapMut, OpenObject, PrintLevel, ProgramMut, RingBuffer,
    RingBufferBuilder, UprobeOpts,
};
use reqcost_record::{ProbeCost, ProgramCost, RequestEvent};
use reqcost_server::{Connection, ListenerTraffic};

use crate::counters::Raw;
use crate::h2::{Http2Requests, Piece};
use crate::layout::{
    misc_slot, own_field, own_tree, req_counter, IO_HIST_LEN, IO_TOT_LEN, MAX_SYSCALLS,
    OPEN_PATH_LEN, OWN_LEN, OWN_PROGRAMS, PID_LIMIT, SYS_COUNT, SYS_FIELDS, SYS_LEN, TLS_LIBS,
};
use crate::lua::{LuaFrames, LuaWalks};
use crate::monotonic_ns;
use crate::requests::{self, RequestCounters};
use crate::stack::Dest;
use crate::tags::SampleTags;
use crate::{ProbeOptions, TlsHooks};
use tls_links::{Called, TlsPrograms, TlsWorker};

mod tls_links;

mod skel {
    include!(concat!(env!("OUT_DIR"), "/reqcost.skel.rs"));
}
pub(crate) use skel::types;
use skel::{ReqcostSkel, ReqcostSkelBuilder};

/// libbpf's recent warnings, so that a load failure can say what libbpf complained about
/// instead of printing its multi-line log on stderr.
static LIBBPF_LOG: Mutex<Vec<String>> = Mutex::new(Vec::new());
const LIBBPF_LOG_LINES: usize = 32;

fn keep_libbpf_warning(_level: PrintLevel, msg: String) {
    let mut log = LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner());
    if log.len() == LIBBPF_LOG_LINES {
        log.remove(0);
    }
    log.push(msg.trim().to_string());
}

/// The most telling libbpf line: the first one that names a failure.
fn libbpf_complaint() -> Option<String> {
    let log = LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner());
    log.iter()
        .find(|l| l.contains("failed") || l.contains("error") || l.contains("Error"))
        .or(log.last())
        .cloned()
}

pub struct Loaded {
    /// Borrows `object`; dropped first (see `Drop`).
    skel: ManuallyDrop<ReqcostSkel<'static>>,
    /// Storage of the libbpf object, owned here and freed after `skel`.
    object: NonNull<MaybeUninit<OpenObject>>,
    /// Reader of the `requests` ring buffer (it maps the buffer and no longer needs the map);
    /// its callback decodes each event into `drained`.
    ring: RingBuffer<'static>,
    drained: Arc<Mutex<Vec<RequestEvent>>>,
    /// The HTTP/2 connections' header blocks, decoded by that callback (src/h2.rs).
    http2: Arc<Mutex<Http2Requests>>,
    /// Keeps the kernel's BPF run-time statistics on while the probes live (the kernel turns
    /// them off when the last such fd closes, whatever way this process ends); why not, when
    /// they could not be turned on.
    stats: Result<OwnedFd, String>,
    /// The links of the programs that run on every syscall, switch, wakeup and fault of the
    /// machine; None while paused (detached: they cost nothing then).
    hot: RefCell<Option<Vec<Link>>>,
    /// The links of `tag_sample` to the call-chain sampler's events.
    tag_links: RefCell<Vec<Link>>,
    /// The thread owning the uprobes on the tree's TLS libraries, per process; None without
    /// attribution or TLS. Detached while paused too (a trap costs microseconds,
    /// bench/RESULTS.md), so that unprobed windows are, unless the tree called none of them
    /// since the last pause.
    tls: Option<TlsWorker>,
    /// The tree's TLS calls counted at the last pause, in all and per library: a library's
    /// uprobes are detached at a pause only when the tree called it since.
    tls_calls: RefCell<(u64, Vec<u64>)>,
    /// The uprobes on the tree's Lua cores (src/lua.rs), and the files they are on: detached
    /// while paused, as the TLS ones are.
    lua_links: RefCell<Vec<Link>>,
    lua_files: RefCell<Vec<PathBuf>>,
    /// The uprobes counting HTTP/3 responses in the tree's libnghttp3: never detached, so that
    /// the count is exact across windows (one trap per response).
    http3_links: Vec<Link>,
    /// The libnghttp3 files whose uprobe could not be attached, told with the TLS libraries.
    http3_unhooked: Vec<String>,
}

// SAFETY: `object` is owned by this value alone and only reached through `skel`, which is Send;
// `ring` is owned by this value alone and used only through `&self`, and Loaded is not Sync, so
// one thread at a time.
unsafe impl Send for Loaded {}

impl Drop for Loaded {
    fn drop(&mut self) {
        // The links first: they belong to programs of the object freed below.
        self.hot.get_mut().take();
        self.tag_links.get_mut().clear();
        self.tls.take();
        self.lua_links.get_mut().clear();
        self.http3_links.clear();
        // SAFETY: `skel` is dropped once, here, before the storage it borrows is freed;
        // `object` came from `Box::leak` in `attach` and is not used afterwards.
        unsafe {
            ManuallyDrop::drop(&mut self.skel);
            drop(Box::from_raw(self.object.as_ptr()));
        }
    }
}

impl Loaded {
    pub fn attach(root: u32, options: &ProbeOptions) -> Result<Loaded, String> {
        libbpf_rs::set_print(Some((PrintLevel::Warn, keep_libbpf_warning)));
        LIBBPF_LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
        let stats = if options.run_time_stats {
            enable_run_time_stats()
        } else {
            Err(STATS_OFF.to_string())
        };
        let storage = NonNull::from(Box::leak(Box::new(MaybeUninit::<OpenObject>::uninit())));
        // SAFETY: `storage` is a fresh allocation freed only after everything borrowing it.
        let object: &'static mut MaybeUninit<OpenObject> = unsafe { &mut *storage.as_ptr() };
        let loaded = load(object, options);
        let mut skel = match loaded {
            Ok(skel) => skel,
            Err(e) => {
                // SAFETY: whatever the skeleton built in the storage was dropped with it.
                drop(unsafe { Box::from_raw(storage.as_ptr()) });
                return Err(e);
            }
        };
        let drained = Arc::new(Mutex::new(Vec::new()));
        let http2 = Arc::new(Mutex::new(Http2Requests::default()));
        let ring = match requests_reader(&skel, Arc::clone(&drained), Arc::clone(&http2)) {
            Ok(ring) => ring,
            Err(e) => {
                drop(skel);
                // SAFETY: as above, after the skeleton that borrowed the storage is gone.
                drop(unsafe { Box::from_raw(storage.as_ptr()) });
                return Err(e);
            }
        };
        let hot = RefCell::new(Some(hot_links(&mut skel)));
        let mut loaded = Loaded {
            skel: ManuallyDrop::new(skel),
            object: storage,
            ring,
            drained,
            http2,
            stats,
            hot,
            tag_links: RefCell::new(Vec::new()),
            tls: None,
            tls_calls: RefCell::new((0, vec![0; TLS_LIBS])),
            lua_links: RefCell::new(Vec::new()),
            lua_files: RefCell::new(Vec::new()),
            http3_links: Vec::new(),
            http3_unhooked: Vec::new(),
        };
        loaded.follow(root)?;
        loaded.note_listeners(root)?;
        if options.attribute && options.tls {
            loaded.tls = Some(TlsWorker::start(root, TlsPrograms::of(&loaded.skel)));
        }
        if options.attribute {
            loaded.hook_http3(root);
        }
        Ok(loaded)
    }

    /// The TLS libraries hooked (called by the tree so far, or not) and not hooked (none
    /// without attribution or TLS), and the nghttp3 files that could not be hooked.
    pub fn tls(&self) -> TlsHooks {
        let calls = self.tls_lib_calls();
        let mut hooks = self
            .tls
            .as_ref()
            .map(|tls| tls.hooks(&calls))
            .unwrap_or_default();
        hooks.unhooked.extend(self.http3_unhooked.iter().cloned());
        hooks
    }

    /// The tree's calls into each TLS library so far, by the library's number.
    fn tls_lib_calls(&self) -> Vec<u64> {
        (0..TLS_LIBS)
            .map(|n| {
                self.bss_u64(|b| std::ptr::addr_of!(b.tls_lib_entries[n]))
                    .load(Ordering::SeqCst)
            })
            .collect()
    }

    /// Has the TLS libraries of the processes the tree forked since the last look probed,
    /// without waiting for it.
    fn follow_forks(&self) {
        if let Some(tls) = &self.tls {
            if !self.paused() {
                let forks = percpu_sum(&self.skel.maps.misc, misc_slot::MISC_LEN.at())
                    [misc_slot::CTR_FORKS.at()];
                tls.forked(forks);
            }
        }
    }

    /// Counts the HTTP/3 responses of the libnghttp3 files the tree maps; a file that cannot be
    /// hooked is told as a library whose requests are not visible.
    fn hook_http3(&mut self, root: u32) {
        let prog = &self.skel.progs.http3_response;
        for (file, path) in crate::http3::find(&reqcost_server::process_tree(root)) {
            let opts = UprobeOpts {
                func_name: Some(crate::http3::RESPONSE_FUNCTION.to_string()),
                ..UprobeOpts::default()
            };
            match prog.attach_uprobe_with_opts(-1, &file, 0, opts) {
                Ok(link) => self.http3_links.push(link),
                Err(e) => self
                    .http3_unhooked
                    .push(format!("nghttp3 ({path}): attaching a uprobe failed: {e}")),
            }
        }
    }

    /// Seeds the tree. The fork tracepoint is already attached, so a child forked after its
    /// parent is seeded is added by the kernel; a second walk catches children forked between
    /// the first walk and their parent's seeding.
    fn follow(&mut self, root: u32) -> Result<(), String> {
        let bits = self
            .skel
            .maps
            .bss_data
            .as_deref_mut()
            .expect("the program has a .bss (the tracked bitmap)")
            .tracked
            .as_mut_ptr();
        for _ in 0..2 {
            for pid in reqcost_server::process_tree(root) {
                if pid >= PID_LIMIT {
                    return Err(format!(
                        "pid {pid} is above the probes' limit of {PID_LIMIT}: cannot follow it"
                    ));
                }
                // SAFETY: `bits` points into the memory-mapped .bss, which lives as long as the
                // skeleton; the program updates the same words with atomic instructions, so
                // this side must use atomics too.
                let word = unsafe { AtomicU64::from_ptr(bits.add(pid as usize / 64)) };
                word.fetch_or(1 << (pid % 64), Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// Follows `root`'s tree as hop `hop` of the stack (docs/stack.md): its requests and CPU
    /// per hop, none of its events in the target's aggregates. Its children join it as the
    /// target's do; a child forked before its parent is marked is caught by the second walk.
    pub fn follow_hop(&self, root: u32, hop: u8) -> Result<(), String> {
        // Its listeners first: its connections seen once it is marked must find them.
        self.note_listeners(root)?;
        let map = &self.skel.maps.tgid_hops;
        for _ in 0..2 {
            for pid in reqcost_server::process_tree(root) {
                if pid >= PID_LIMIT {
                    return Err(format!(
                        "pid {pid} is above the probes' limit of {PID_LIMIT}: cannot follow it"
                    ));
                }
                map.update(&pid.to_ne_bytes(), &[hop], MapFlags::ANY)
                    .map_err(|e| format!("marking pid {pid} as hop {hop} failed: {e}"))?;
                let (word, bit) = (pid as usize / 64, 1u64 << (pid % 64));
                // The upstream bit first: a tracked task without it counts as the target's.
                self.bss_u64(|b| std::ptr::addr_of!(b.upstream[word]))
                    .fetch_or(bit, Ordering::SeqCst);
                self.bss_u64(|b| std::ptr::addr_of!(b.tracked[word]))
                    .fetch_or(bit, Ordering::SeqCst);
            }
        }
        Ok(())
    }

    /// Puts the TCP ports `root`'s tree listens on among the followed trees' (stack.bpf.h):
    /// a connection seen first on a port none of them listens on is one a tree opened. From
    /// then on the bytes its connections received are summed as they close.
    fn note_listeners(&self, root: u32) -> Result<(), String> {
        let maps = &self.skel.maps;
        for port in reqcost_server::tree_listening_ports(root) {
            let key = port.to_ne_bytes();
            let failed = |e| format!("noting listening port {port} failed: {e}");
            maps.listen_ports
                .update(&key, &[1], MapFlags::ANY)
                .map_err(failed)?;
            // A port noted again keeps what its closes summed so far.
            match maps
                .closed_received
                .update(&key, &0u64.to_ne_bytes(), MapFlags::NO_EXIST)
            {
                Err(e) if e.kind() != libbpf_rs::ErrorKind::AlreadyExists => return Err(failed(e)),
                _ => {}
            }
        }
        self.bss_u64(|b| std::ptr::addr_of!(b.listen_known))
            .store(1, Ordering::SeqCst);
        Ok(())
    }

    /// What the probes keep of the connections on the followed trees' listening ports
    /// (reqcost.bpf.c, tcp_closed): by port, what those closed since the probes loaded
    /// received, and those established since and still open.
    pub fn listener_traffic(&self) -> ListenerTraffic {
        let maps = &self.skel.maps;
        let closed = maps
            .closed_received
            .keys()
            .filter_map(|key| {
                let sum = maps.closed_received.lookup(&key, MapFlags::ANY).ok()??;
                Some((
                    u16::from_ne_bytes(key.try_into().ok()?),
                    u64::from_ne_bytes(sum.try_into().ok()?),
                ))
            })
            .collect();
        let full = self
            .bss_u64(|b| std::ptr::addr_of!(b.open_conns_full))
            .load(Ordering::SeqCst);
        let opened = (full == 0).then(|| {
            maps.open_conns
                .keys()
                .filter_map(|key| {
                    let addr = maps.open_conns.lookup(&key, MapFlags::ANY).ok()??;
                    connection(&addr)
                })
                .collect()
        });
        ListenerTraffic { closed, opened }
    }

    /// Where the followed trees connected to so far, with the hop that connected.
    pub fn dests(&self) -> Vec<(Dest, u8)> {
        let map = &self.skel.maps.dests;
        map.keys()
            .filter_map(|key| {
                let hop = map.lookup(&key, MapFlags::ANY).ok()??;
                Some((crate::stack::decode(&key)?, *hop.first()?))
            })
            .collect()
    }

    /// The per-request counters of hop `hop` (0: the target's).
    pub fn hop_counters(&self, hop: u8) -> RequestCounters {
        requests::counters(&percpu_sum_at(
            &self.skel.maps.req_ctr,
            u32::from(hop),
            req_counter::RCTR_LEN.at(),
        ))
    }

    /// Hop `hop`'s sets of `sys` and `misc` ([`Raw::decode_hop`]); the other maps are the
    /// target's alone, and left empty.
    pub fn read_hop(&self, hop: u8) -> Raw {
        let maps = &self.skel.maps;
        Raw {
            sys: percpu_sum_at(&maps.sys, u32::from(hop), SYS_LEN),
            misc: percpu_sum_at(&maps.misc, u32::from(hop), misc_slot::MISC_LEN.at()),
            io_tot: vec![0; IO_TOT_LEN],
            io_hist: vec![0; IO_HIST_LEN],
            errnos: Vec::new(),
            ioctls: Vec::new(),
            opens: Vec::new(),
        }
    }

    pub fn read(&self) -> Raw {
        let maps = &self.skel.maps;
        Raw {
            sys: percpu_sum(&maps.sys, SYS_LEN),
            misc: percpu_sum(&maps.misc, misc_slot::MISC_LEN.at()),
            io_tot: percpu_sum(&maps.io_tot, IO_TOT_LEN),
            io_hist: percpu_sum(&maps.io_hist, IO_HIST_LEN),
            errnos: percpu_hash(&maps.errnos)
                .into_iter()
                .map(|(k, n)| ((u32_at(&k, 0), u32_at(&k, 4)), n))
                .collect(),
            ioctls: percpu_hash(&maps.ioctls)
                .into_iter()
                .map(|(k, n)| (u32_at(&k, 0), n))
                .collect(),
            opens: percpu_hash(&maps.opens)
                .into_iter()
                .map(|(k, n)| {
                    let path = &k[..OPEN_PATH_LEN.min(k.len())];
                    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
                    (String::from_utf8_lossy(&path[..end]).into_owned(), n)
                })
                .collect(),
        }
    }
}

impl Loaded {
    pub fn request_counters(&self) -> RequestCounters {
        RequestCounters {
            http3_responses: self
                .bss_u64(|b| std::ptr::addr_of!(b.http3_responses))
                .load(Ordering::SeqCst),
            ..requests::counters(&percpu_sum(
                &self.skel.maps.req_ctr,
                req_counter::RCTR_LEN.at(),
            ))
        }
    }

    /// Hands every finished request waiting in the ring buffer to `f`; returns how many.
    pub fn drain_requests(&self, f: &mut dyn FnMut(RequestEvent)) -> Result<u64, String> {
        self.follow_forks();
        self.ring
            .consume()
            .map_err(|e| format!("reading the requests ring buffer failed: {e}"))?;
        let events = std::mem::take(&mut *self.drained.lock().unwrap_or_else(|e| e.into_inner()));
        let n = events.len() as u64;
        events.into_iter().for_each(f);
        Ok(n)
    }
}

impl Loaded {
    /// The request each followed connection has open, as its state holds it now: what it cost
    /// so far, `end_ns` the moment of the reading, marked in flight, with what its client has
    /// not acknowledged yet of its output; the counters read last, and when (CLOCK_MONOTONIC
    /// ns, as events' `end_ns`).
    pub fn open_requests(&self) -> (Vec<RequestEvent>, RequestCounters, u64) {
        let map = &self.skel.maps.conns;
        let now = monotonic_ns();
        let mut open: Vec<RequestEvent> = map
            .keys()
            .filter_map(|key| {
                // A connection that closed since its key was read is reported by its close.
                let value = map.lookup(&key, MapFlags::ANY).ok()??;
                let mut conn = raw_conn(&value)?;
                self.rank_spilled(&mut conn);
                Some(requests::open_request(&conn.ev, now))
            })
            .collect();
        let http2 = self.http2.lock().unwrap_or_else(|e| e.into_inner());
        let mut queues: HashMap<u32, HashMap<(u16, SocketAddr), u64>> = HashMap::new();
        for ev in &mut open {
            let queue = queues
                .entry(ev.pid)
                .or_insert_with(|| reqcost_server::unacknowledged(ev.pid));
            let unacked = queue.get(&(ev.local_port, ev.peer)).copied();
            ev.unacked_out = unacked.unwrap_or(0).min(ev.bytes_out);
        }
        // One per HTTP/2 stream, named from the header blocks drained so far.
        let mut streams = Vec::with_capacity(open.len());
        for ev in open {
            http2.open(ev, &mut |e| streams.push(e));
        }
        // Last, so that the caller reads the server's CPU right after them: the events' CPU
        // so far is within the counters, and a server spinning while the send queues are read
        // is in neither the counters nor its CPU.
        let counters = self.request_counters();
        let read_ns = monotonic_ns();
        (streams, counters, read_ns)
    }
}

impl Loaded {
    /// As the request's end ranks them in the kernel (attribution.bpf.h, `rank_spilled`), an
    /// open request's syscalls beyond its slots are read from `spilled`, left there for its
    /// end: its slots then hold its most made, and `unlisted_max` bounds the rest.
    fn rank_spilled(&self, conn: &mut types::conn) {
        let r = &mut conn.ev.req;
        let mut unlisted_max = 0;
        for (word, bits) in conn.spilled_ids.iter().enumerate() {
            for bit in (0..64).filter(|b| bits & (1u64 << b) != 0) {
                let id = (word * 64 + bit) as u32;
                let mut key = conn.ev.conn_id.to_ne_bytes().to_vec();
                key.extend(id.to_ne_bytes());
                key.extend(0u32.to_ne_bytes());
                let Ok(Some(value)) = self.skel.maps.spilled.lookup(&key, MapFlags::ANY) else {
                    continue;
                };
                let mut count = u32::from_ne_bytes(value[..4].try_into().unwrap_or([0; 4]));
                let least = r.top.iter_mut().min_by_key(|s| s.count);
                if let Some(least) = least.filter(|s| s.count < count) {
                    count = std::mem::replace(&mut least.count, count);
                    least.id_plus_one = id + 1;
                }
                unlisted_max = unlisted_max.max(count);
            }
        }
        r.unlisted_max = unlisted_max + conn.unranked;
    }
}

/// A connection's state as the map holds it, when the value is whole.
fn raw_conn(data: &[u8]) -> Option<types::conn> {
    // SAFETY: as in raw_event: length checked, a repr(C) struct of integers, unaligned read.
    (data.len() >= std::mem::size_of::<types::conn>())
        .then(|| unsafe { std::ptr::read_unaligned(data.as_ptr().cast()) })
}

impl Loaded {
    /// Attaches `tag_sample` to each sampling event in `perf_fds`; returns the reader of the
    /// tags it writes.
    pub fn tag_samples(&self, perf_fds: &[i32]) -> Result<SampleTags, String> {
        let fail = |e: libbpf_rs::Error| format!("tagging call-chain samples failed: {e}");
        let mut links = Vec::with_capacity(perf_fds.len());
        for &fd in perf_fds {
            links.push(
                self.skel
                    .progs
                    .tag_sample
                    .attach_perf_event(fd)
                    .map_err(fail)?,
            );
        }
        self.tag_links.borrow_mut().extend(links);
        let map = MapHandle::try_from(&self.skel.maps.sample_tags).map_err(fail)?;
        let claims = MapHandle::try_from(&self.skel.maps.held_claims).map_err(fail)?;
        Ok(SampleTags { map, claims })
    }
}

impl Loaded {
    /// Hooks the Lua cores the tree maps and has `tag_sample` walk their stacks: no walks
    /// when the tree runs no Lua reqcost can walk, and what the others are (see
    /// [`LuaFrames`]); an error when hooking one failed.
    pub fn lua_frames(&self, root: u32) -> Result<LuaFrames, String> {
        let found = crate::lua::find(&reqcost_server::process_tree(root));
        if found.known.is_empty() {
            return Ok(LuaFrames {
                walks: None,
                unwalked: found.unknown,
            });
        }
        let map = MapHandle::try_from(&self.skel.maps.lua_walks)
            .map_err(|e| format!("reading the Lua walks: {e}"))?;
        // While paused, resume attaches them.
        let paused = self.paused();
        let mut links = Vec::new();
        for (file, path) in &found.known {
            if !paused {
                links.extend(
                    lua_links(&self.skel, file)
                        .map_err(|e| format!("{path}: attaching its uprobes failed: {e}"))?,
                );
            }
            self.lua_files.borrow_mut().push(file.clone());
        }
        self.lua_links.borrow_mut().extend(links);
        if !paused {
            self.bss_u64(|b| std::ptr::addr_of!(b.lua_on))
                .store(1, Ordering::SeqCst);
        }
        Ok(LuaFrames {
            walks: Some(LuaWalks { map }),
            unwalked: found.unknown,
        })
    }
}

impl Loaded {
    /// Detaches the hot programs (the fork and exit tracepoints stay, so the tree stays
    /// followed), then forgets the connections whose ends will not be seen (run-queue waits
    /// are forgotten by the next window). Returns how many connections were forgotten: the
    /// request each had in flight is not reported.
    pub fn pause(&self) -> u64 {
        let Some(links) = self.hot.borrow_mut().take() else {
            return 0;
        };
        self.bss_u64(|b| std::ptr::addr_of!(b.paused))
            .store(1, Ordering::SeqCst);
        drop(links);
        if let Some(tls) = &self.tls {
            if let Some(called) = self.tls_called_since_pause() {
                tls.detach(called);
            }
        }
        // The walk stays on: it finds the running coroutine without the uprobes
        // (lua.bpf.h, lua_descend), and its cost is the sampler's, not the probes'.
        self.lua_links.borrow_mut().clear();
        let forgotten = clear(&self.skel.maps.conns);
        // The forgotten requests' syscalls beyond their slots, which no end will take out.
        clear(&self.skel.maps.spilled);
        forgotten
    }

    /// The TLS libraries the tree called since the last pause, None when it called none:
    /// uprobes nothing called stay attached (see `tls_entries`).
    fn tls_called_since_pause(&self) -> Option<Called> {
        let total = self
            .bss_u64(|b| std::ptr::addr_of!(b.tls_entries))
            .load(Ordering::SeqCst);
        let libs = self.tls_lib_calls();
        let (last_total, last) = self.tls_calls.replace((total, libs.clone()));
        if total == last_total {
            return None;
        }
        let moved: Vec<u64> = libs.iter().zip(&last).map(|(n, was)| n - was).collect();
        Some(Called {
            libs: moved.iter().map(|&n| n > 0).collect(),
            // Calls into libraries past the counters move the total alone.
            unnumbered: total - last_total > moved.iter().sum::<u64>(),
        })
    }

    /// Re-attaches the hot programs, in a new window: task state from before it is ignored.
    pub fn resume(&self) -> Result<(), String> {
        let mut hot = self.hot.borrow_mut();
        if hot.is_some() {
            return Ok(());
        }
        // Before the hot programs: waiting for the uprobes while paused loses no event.
        if let Some(tls) = &self.tls {
            tls.follow();
        }
        self.bss_u64(|b| std::ptr::addr_of!(b.window))
            .fetch_add(1, Ordering::SeqCst);
        let links = hot_programs(&self.skel)
            .iter()
            .map(|p| p.attach())
            .collect::<Result<Vec<Link>, _>>()
            .map_err(|e| format!("re-attaching the eBPF probes failed: {e}"))?;
        *hot = Some(links);
        self.bss_u64(|b| std::ptr::addr_of!(b.paused))
            .store(0, Ordering::SeqCst);
        drop(hot);
        self.resume_lua()
    }

    /// Re-attaches the Lua uprobes. The states threads ran before are kept: the walk goes
    /// from them to the coroutine that runs now (lua.bpf.h, lua_descend).
    fn resume_lua(&self) -> Result<(), String> {
        let files = self.lua_files.borrow();
        if files.is_empty() {
            return Ok(());
        }
        let mut links = self.lua_links.borrow_mut();
        for file in files.iter() {
            links.extend(
                lua_links(&self.skel, file)
                    .map_err(|e| format!("re-attaching the Lua uprobes failed: {e}"))?,
            );
        }
        self.bss_u64(|b| std::ptr::addr_of!(b.lua_on))
            .store(1, Ordering::SeqCst);
        Ok(())
    }

    pub fn paused(&self) -> bool {
        self.hot.borrow().is_none()
    }

    /// Runs `spawn` with this thread named as the client's spawner: the process it forks, and
    /// that process's descendants, are the client tree.
    pub fn spawn_client<R>(&self, spawn: impl FnOnce() -> R) -> R {
        let parent = self.bss_u64(|b| std::ptr::addr_of!(b.client_parent));
        // SAFETY: gettid has no preconditions.
        parent.store(unsafe { libc::gettid() } as u64, Ordering::SeqCst);
        let spawned = spawn();
        parent.store(0, Ordering::SeqCst);
        spawned
    }

    /// The client tree's calls per syscall number since the probes loaded.
    pub fn client_syscalls(&self) -> Vec<u64> {
        percpu_sum(&self.skel.maps.client_sys, MAX_SYSCALLS)
    }

    /// A u64 of the memory-mapped .bss, for the loader's side of the programs' flags.
    fn bss_u64(&self, field: impl FnOnce(&types::bss) -> *const u64) -> &AtomicU64 {
        let bss = self
            .skel
            .maps
            .bss_data
            .as_deref()
            .expect("the program has a .bss");
        // SAFETY: the field lives in the memory-mapped .bss as long as the skeleton, aligned;
        // the programs only read it, with plain aligned 8-byte loads.
        unsafe { AtomicU64::from_ptr(field(bss).cast_mut()) }
    }
}

/// The programs that run on every event of their kind on the machine, tracked or not: what
/// pausing detaches.
fn hot_programs<'a>(skel: &'a ReqcostSkel<'static>) -> [&'a ProgramMut<'static>; 7] {
    let p = &skel.progs;
    [
        &p.sys_enter,
        &p.sys_exit,
        &p.sched_switch,
        &p.sched_wakeup,
        &p.sched_wakeup_new,
        &p.page_fault_user,
        &p.page_fault_kernel,
    ]
}

/// Takes the hot programs' links out of the skeleton, so that pausing can drop them.
fn hot_links(skel: &mut ReqcostSkel<'static>) -> Vec<Link> {
    let l = &mut skel.links;
    [
        l.sys_enter.take(),
        l.sys_exit.take(),
        l.sched_switch.take(),
        l.sched_wakeup.take(),
        l.sched_wakeup_new.take(),
        l.page_fault_user.take(),
        l.page_fault_kernel.take(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The Lua C API entries that start running a state. Not lua_callk: C library functions call
/// it once per callback (table.sort's comparator, gsub's replacement function), a trap each,
/// and the state it runs is the one already running.
fn lua_links(skel: &ReqcostSkel<'static>, file: &Path) -> Result<Vec<Link>, libbpf_rs::Error> {
    let p = &skel.progs;
    let hooks: [(&ProgramMut<'static>, &str); 2] = [
        (&p.lua_resume_enter, "lua_resume"),
        (&p.lua_run_enter, "lua_pcallk"),
    ];
    hooks
        .into_iter()
        .map(|(prog, func)| {
            let opts = UprobeOpts {
                func_name: Some(func.to_string()),
                ..UprobeOpts::default()
            };
            // pid -1: processes the tree starts later run the same file.
            prog.attach_uprobe_with_opts(-1, file, 0, opts)
        })
        .collect()
}

/// Detaches `links` at once, and returns when all are gone. Closing an uprobe-multi link waits
/// for a grace period of its own: closed one after another, the libssl links of nginx's two
/// processes made a pause take 210-740 ms (median; up to 960), together 1-130 ms
/// (bench/RESULTS.md).
fn detach_together(links: Vec<Link>) {
    if links.len() < 2 {
        return;
    }
    std::thread::scope(|s| {
        for link in links {
            s.spawn(move || drop(link));
        }
    });
}

/// Deletes every entry of a hash map; returns how many there were.
fn clear(map: &MapMut) -> u64 {
    let keys: Vec<Vec<u8>> = map.keys().collect();
    for key in &keys {
        // An entry deleted meanwhile (a process exit) is gone as wanted.
        let _ = map.delete(key);
    }
    keys.len() as u64
}

impl Loaded {
    /// The probes' run time and runs since they were loaded: on the tree's events from their
    /// own `own` map, on the whole machine from the kernel's BPF statistics when they are on.
    pub fn own_cost(&self) -> Result<ProbeCost, String> {
        let own = percpu_sum_at(
            &self.skel.maps.own,
            own_tree::OWN_FRONT.at() as u32,
            OWN_LEN,
        );
        let upstream = percpu_sum_at(
            &self.skel.maps.own,
            own_tree::OWN_UPSTREAM.at() as u32,
            OWN_LEN,
        );
        // The syscall programs' runs on tracked calls are the calls' counts (tree.bpf.h,
        // own_sys_end): `own` holds only their other runs.
        let calls: u64 = percpu_sum(&self.skel.maps.sys, SYS_LEN)
            .chunks(SYS_FIELDS)
            .map(|f| f[SYS_COUNT])
            .sum();
        let misc = percpu_sum(&self.skel.maps.misc, misc_slot::MISC_LEN.at());
        let mut cost = ProbeCost {
            machine_measured: self.stats.is_ok(),
            uretprobe_calls: misc[misc_slot::CTR_URETPROBE_CALLS.at()],
            uretprobe_ns: misc[misc_slot::CTR_URETPROBE_NS.at()],
            ..ProbeCost::default()
        };
        for prog in self.skel.object().progs() {
            let name = prog.name().to_string_lossy().into_owned();
            let mut p = ProgramCost {
                name,
                ..ProgramCost::default()
            };
            if let Some((prog, _)) = OWN_PROGRAMS.iter().find(|(_, n)| *n == p.name) {
                let field = |f: own_field| own[prog.at() * own_field::OWN_FIELDS.at() + f.at()];
                p.tree_runs = field(own_field::OWN_RUNS);
                if matches!(p.name.as_str(), "sys_enter" | "sys_exit") {
                    p.tree_runs += calls;
                }
                p.tree_ns = field(own_field::OWN_NS);
                let at = |f: own_field| prog.at() * own_field::OWN_FIELDS.at() + f.at();
                cost.upstream_runs += upstream[at(own_field::OWN_RUNS)];
                cost.upstream_ns += upstream[at(own_field::OWN_NS)];
            }
            if self.stats.is_ok() {
                let (run_ns, runs) = run_time(&prog)?;
                p.run_ns = run_ns;
                p.runs = runs;
                // The tree's part is timed on a sample: never more than the whole.
                p.tree_ns = p.tree_ns.min(run_ns);
            }
            cost.run_ns += p.run_ns;
            cost.runs += p.runs;
            cost.tree_ns += p.tree_ns;
            cost.tree_runs += p.tree_runs;
            cost.programs.push(p);
        }
        cost.programs
            .sort_by_key(|p| std::cmp::Reverse(p.run_ns.max(p.tree_ns)));
        Ok(cost)
    }
}

/// A program's run time and run count as the kernel's BPF statistics have them.
fn run_time(prog: &libbpf_rs::Program) -> Result<(u64, u64), String> {
    let mut info = libbpf_sys::bpf_prog_info::default();
    let mut len = std::mem::size_of_val(&info) as u32;
    // SAFETY: `info` is a bpf_prog_info of `len` bytes, and its pointer fields are null, so the
    // kernel writes nothing beyond it.
    let ret = unsafe {
        libbpf_sys::bpf_prog_get_info_by_fd(prog.as_fd().as_raw_fd(), &mut info, &mut len)
    };
    if ret < 0 {
        return Err(format!(
            "reading the run time of probe {:?} failed: {}",
            prog.name(),
            io::Error::from_raw_os_error(-ret)
        ));
    }
    Ok((info.run_time_ns, info.run_cnt))
}

/// Why the probes' cost on the whole machine is not measured by default.
const STATS_OFF: &str =
    "not measured: the kernel's BPF run-time statistics are off (--probe-stats \
    turns them on, at a cost on every event of the machine)";

/// Turns on the kernel's per-program run time and run count (what `kernel.bpf_stats_enabled`
/// does) for as long as the returned fd is open: unlike the sysctl, nothing is left on if
/// reqcost is killed, and runs measured together do not turn it off under each other.
fn enable_run_time_stats() -> Result<OwnedFd, String> {
    // SAFETY: a plain syscall wrapper; it returns a new fd or a negative errno.
    let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
    if fd < 0 {
        return Err(format!(
            "turning on BPF run-time statistics failed: {}",
            io::Error::from_raw_os_error(-fd)
        ));
    }
    // SAFETY: the fd is new and owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A reader of the `requests` ring buffer that decodes into `into`, the HTTP/2 header blocks
/// into `http2`.
fn requests_reader(
    skel: &ReqcostSkel<'static>,
    into: Arc<Mutex<Vec<RequestEvent>>>,
    http2: Arc<Mutex<Http2Requests>>,
) -> Result<RingBuffer<'static>, String> {
    // A record shorter than an event would mean the program and this loader disagree.
    const EINVAL: i32 = 22;
    let fail = |e: libbpf_rs::Error| format!("reading the requests ring buffer failed: {e}");
    let mut builder = RingBufferBuilder::new();
    // HTTP/2 header pieces come in the same buffer as the events, before the event of the part
    // they were read in: one reader sees them in order.
    builder
        .add(&skel.maps.requests, move |data: &[u8]| {
            let mut http2 = http2.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(piece) = Piece::parse(data) {
                http2.piece(&piece);
                return 0;
            }
            match raw_event(data) {
                Some(e) => {
                    let mut events = into.lock().unwrap_or_else(|e| e.into_inner());
                    http2.event(requests::event(&e), e.req.h2_pieces, &mut |ev| {
                        events.push(ev)
                    });
                    0
                }
                None => -EINVAL,
            }
        })
        .map_err(fail)?;
    builder.build().map_err(fail)
}

fn load(
    object: &'static mut MaybeUninit<OpenObject>,
    options: &ProbeOptions,
) -> Result<ReqcostSkel<'static>, String> {
    let fail = |what: &str, e: libbpf_rs::Error| {
        let detail = libbpf_complaint()
            .map(|c| format!(" ({c})"))
            .unwrap_or_default();
        format!("{what} the eBPF probes failed: {e}{detail}")
    };
    let mut open = ReqcostSkelBuilder::default()
        .open(object)
        .map_err(|e| fail("opening", e))?;
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .expect("the program has read-only data (sys_class)");
    rodata.sys_class = crate::layout::sys_classes();
    rodata.attribute = options.attribute;
    rodata.count_client = options.client;
    let mut skel = open.load().map_err(|e| fail("loading", e))?;
    skel.attach().map_err(|e| fail("attaching", e))?;
    Ok(skel)
}

/// One event as the program wrote it, when the record is whole.
fn raw_event(data: &[u8]) -> Option<types::req_event> {
    // SAFETY: the length is checked, req_event is a repr(C) struct of integers (any bit pattern
    // is a value), and the read makes no alignment assumption.
    (data.len() >= std::mem::size_of::<types::req_event>())
        .then(|| unsafe { std::ptr::read_unaligned(data.as_ptr().cast()) })
}

/// An `open_conns` value (reqcost.bpf.c, struct conn_addr).
fn connection(addr: &[u8]) -> Option<Connection> {
    let words = |at: usize| -> Option<[u32; 4]> {
        let mut w = [0u32; 4];
        for (i, word) in w.iter_mut().enumerate() {
            let b = addr.get(at + 4 * i..at + 4 * i + 4)?;
            *word = u32::from_ne_bytes(b.try_into().ok()?);
        }
        Some(w)
    };
    Some(Connection {
        family: *addr.first()?,
        remote_port: u16::from_be_bytes(addr.get(2..4)?.try_into().ok()?),
        local_port: u16::from_ne_bytes(addr.get(4..6)?.try_into().ok()?),
        local: words(8)?,
        remote: words(24)?,
    })
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn u64s(bytes: &[u8]) -> impl Iterator<Item = u64> + '_ {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
}

/// The single entry of a per-CPU array of `len` u64, summed over CPUs.
fn percpu_sum(map: &MapMut, len: usize) -> Vec<u64> {
    percpu_sum_at(map, 0, len)
}

/// Entry `key` of a per-CPU array whose value is `len` u64s, summed over CPUs.
fn percpu_sum_at(map: &MapMut, key: u32, len: usize) -> Vec<u64> {
    let mut sum = vec![0u64; len];
    let cpus = map
        .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
        .expect("reading a per-CPU array this process loaded")
        .unwrap_or_default();
    // A level kept per CPU (the time held) goes below zero on a CPU that released what
    // another held: it wraps there, and its sum wraps back.
    for cpu in cpus {
        for (s, v) in sum.iter_mut().zip(u64s(&cpu)) {
            *s = s.wrapping_add(v);
        }
    }
    sum
}

/// Every entry of a per-CPU hash with u64 values, summed over CPUs.
fn percpu_hash(map: &MapMut) -> Vec<(Vec<u8>, u64)> {
    map.keys()
        .filter_map(|key| {
            // An entry can only appear, never vanish, so a miss is a key read mid-insert.
            let cpus = map.lookup_percpu(&key, MapFlags::ANY).ok()??;
            Some((key, cpus.iter().flat_map(|c| u64s(c)).sum()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The object's maps must have the sizes the loader decodes (reqcost.h vs layout.rs); the
    /// object can be opened without privileges.
    #[test]
    fn map_value_sizes_match_the_layout() {
        let mut object = MaybeUninit::uninit();
        let open = ReqcostSkelBuilder::default().open(&mut object).unwrap();
        let size = |m: &libbpf_rs::OpenMapMut| m.value_size() as usize;
        assert_eq!(size(&open.maps.sys), SYS_LEN * 8);
        assert_eq!(size(&open.maps.misc), misc_slot::MISC_LEN.at() * 8);
        assert_eq!(size(&open.maps.io_tot), IO_TOT_LEN * 8);
        assert_eq!(size(&open.maps.io_hist), IO_HIST_LEN * 8);
        assert_eq!(size(&open.maps.errnos), 8);
        assert_eq!(size(&open.maps.req_ctr), req_counter::RCTR_LEN.at() * 8);
        assert_eq!(size(&open.maps.own), OWN_LEN * 8);
        assert_eq!(
            open.maps.own.max_entries() as usize,
            own_tree::OWN_TREES.at()
        );
        assert_eq!(
            std::mem::offset_of!(types::h2_piece, data),
            crate::h2::PIECE_HEADER
        );
        assert_eq!(open.maps.errnos.key_size(), 8);
        assert_eq!(open.maps.opens.key_size() as usize, OPEN_PATH_LEN);
        assert_eq!(
            open.maps.rodata_data.as_deref().unwrap().sys_class.len(),
            crate::layout::MAX_SYSCALLS
        );
        assert_eq!(
            open.maps.bss_data.as_deref().unwrap().tracked.len() * 64,
            PID_LIMIT as usize
        );
    }

    /// The one table the Rust side keeps of the kernel contract's slots pairs `own_prog` with
    /// the programs' names: each PROG_* must name its program, or the own cost of one program
    /// would be read under another's name.
    #[test]
    fn own_programs_are_named_by_their_enum() {
        use libbpf_rs::btf::{types::Enum, Btf};
        use libbpf_rs::AsRawLibbpf;

        let mut object = MaybeUninit::uninit();
        let open = ReqcostSkelBuilder::default().open(&mut object).unwrap();
        let obj = open.open_object();
        // SAFETY: the object outlives `btf`, which only borrows it.
        let raw = unsafe { obj.as_libbpf_object().as_ref() };
        let btf = Btf::from_bpf_object(raw)
            .unwrap()
            .expect("the object has BTF");
        let own_prog = btf
            .type_by_name::<Enum>("own_prog")
            .expect("own_prog is in the object's BTF");
        let enumerators: HashMap<i64, String> = own_prog
            .iter()
            .map(|m| (m.value, m.name.unwrap().to_string_lossy().into_owned()))
            .collect();
        let programs: Vec<String> = obj
            .progs()
            .map(|p| p.name().to_string_lossy().into_owned())
            .collect();
        for (prog, name) in OWN_PROGRAMS {
            assert_eq!(
                enumerators[&i64::from(prog.0)],
                format!("PROG_{}", name.to_uppercase()),
            );
            assert!(programs.iter().any(|p| p == name), "no program {name}");
        }
        let distinct: std::collections::HashSet<_> =
            OWN_PROGRAMS.iter().map(|p| p.0.at()).collect();
        assert_eq!(distinct.len(), own_prog.len() - 1, "one entry per PROG_*");
    }
}
