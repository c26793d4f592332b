//! Follows the sampled tree (processes, threads, executable mappings) and turns each sample into
//! a compact call chain as it arrives, so memory grows with distinct chains, not with samples.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use framehop::{FrameAddress, Unwinder};

use crate::arch;
use crate::elf::{Bytes, ElfInfo};
use crate::interp::lua::{Lua, VmFrame};
use crate::interp::InterpFrame;
use crate::perf::{Mmap, Record, Sample};
use crate::procfs::{self, KernelText};
use crate::{Served, Tagger};

/// How often the requests that ended are folded into their labels ([`Tagger::folded`]):
/// folding rebuilds the stacks, a request's entry costs little while it waits.
const FOLD_EVERY: Duration = Duration::from_secs(1);

/// Deepest user chain kept; deeper ones are cut at the root side.
const MAX_USER_FRAMES: usize = 256;

/// An address in a call chain, before symbolization. Return addresses are stored minus one so
/// that they fall inside the call instruction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RawFrame {
    Kernel(u64),
    /// File offset inside `Tracker::modules[module]`.
    User {
        module: u32,
        offset: u64,
    },
    /// Code in an anonymous mapping (JIT), named only by /tmp/perf-PID.map.
    Anon {
        pid: u32,
        addr: u64,
    },
    /// An interpreted function (src/interp): index into `Aggregate::interp`.
    Interp(u32),
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ModuleKind {
    File(PathBuf),
    /// The kernel's vDSO; the same image is mapped into reqcost itself.
    Vdso,
}

pub struct ModuleEntry {
    pub name: String,
    pub kind: ModuleKind,
    pub info: Option<Arc<ElfInfo>>,
}

#[derive(Clone)]
struct Map {
    end: u64,
    pgoff: u64,
    module: Option<u32>,
}

#[derive(Clone)]
struct Proc {
    maps: BTreeMap<u64, Map>,
    unwinder: arch::Unwinder<Bytes>,
}

impl Proc {
    fn empty() -> Proc {
        Proc {
            maps: BTreeMap::new(),
            unwinder: arch::Unwinder::new(),
        }
    }

    fn lookup(&self, addr: u64) -> Option<(u64, &Map)> {
        let (&start, m) = self.maps.range(..=addr).next_back()?;
        (addr < m.end).then_some((start, m))
    }
}

/// A distinct sampled chain: by thread, served, hop (0: the target's tree) and frames.
pub type StackKey = (u32, u32, u8, Box<[u32]>);

/// Samples aggregated by (thread name, what the thread served, hop, chain).
#[derive(Default)]
pub struct Aggregate {
    pub frames: Vec<RawFrame>,
    frame_ids: HashMap<RawFrame, u32>,
    pub threads: Vec<String>,
    thread_ids: HashMap<String, u32>,
    /// What sampled threads served; `stacks` keys index into it.
    pub served: Vec<Served>,
    served_ids: HashMap<Served, u32>,
    pub stacks: HashMap<StackKey, u64>,
    pub samples: u64,
    pub truncated: u64,
    /// Interpreted functions, already named (the process may be gone when symbolizing).
    pub interp: Vec<InterpFrame>,
    interp_ids: HashMap<InterpFrame, u32>,
    /// Indexes into `served` of held stretches no request has claimed yet.
    held: Vec<u32>,
}

impl Aggregate {
    fn frame_id(&mut self, f: RawFrame) -> u32 {
        intern(&mut self.frames, &mut self.frame_ids, f)
    }

    fn interp_id(&mut self, f: InterpFrame) -> u32 {
        let i = match self.interp_ids.get(&f) {
            Some(&i) => i,
            None => {
                let i = self.interp.len() as u32;
                self.interp.push(f.clone());
                self.interp_ids.insert(f, i);
                i
            }
        };
        self.frame_id(RawFrame::Interp(i))
    }

    fn served_id(&mut self, s: Served) -> u32 {
        let known = self.served.len();
        let id = intern(&mut self.served, &mut self.served_ids, s);
        if matches!(s, Served::Held { .. }) && id as usize == known {
            self.held.push(id);
        }
        id
    }

    /// Names the request each claimed held stretch went to, in place: its samples (and any
    /// later ones of the same stretch, interned to the same entry) become that request's.
    fn claim_held(&mut self, tagger: &mut dyn Tagger) {
        let served = &mut self.served;
        self.held
            .retain(|&i| match tagger.claimed(served[i as usize]) {
                Some(request) => {
                    served[i as usize] = request;
                    false
                }
                None => true,
            });
    }

    /// Moves the samples of the requests the tagger folds to their stand-ins, and forgets
    /// the folded requests' entries.
    fn fold(&mut self, tagger: &mut dyn Tagger) {
        let now: Vec<Served> = self
            .served
            .iter()
            .map(|&s| match s {
                Served::Request { .. } => tagger.folded(s).unwrap_or(s),
                _ => s,
            })
            .collect();
        if now == self.served {
            return;
        }
        self.served.clear();
        self.served_ids.clear();
        let to: Vec<u32> = now
            .into_iter()
            .map(|s| intern(&mut self.served, &mut self.served_ids, s))
            .collect();
        for h in &mut self.held {
            *h = to[*h as usize];
        }
        let stacks = std::mem::take(&mut self.stacks);
        self.stacks.reserve(stacks.len());
        for ((thread, served, hop, chain), n) in stacks {
            *self
                .stacks
                .entry((thread, to[served as usize], hop, chain))
                .or_insert(0) += n;
        }
    }

    /// Interns a sample's kernel frames (leaf first) onto `chain`. Each address goes to the
    /// start of its function where `text` knows it: named the same, and the distinct chains
    /// then grow with the kernel paths sampled, not with every instruction interrupted.
    fn push_kernel(&mut self, text: &KernelText, ips: &[u64], chain: &mut Vec<u32>) {
        for (i, &ip) in ips.iter().enumerate() {
            let addr = if i == 0 { ip } else { ip.wrapping_sub(1) };
            let addr = text.start_of(addr).unwrap_or(addr);
            chain.push(self.frame_id(RawFrame::Kernel(addr)));
        }
    }

    fn thread_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.thread_ids.get(name) {
            return id;
        }
        let id = self.threads.len() as u32;
        self.threads.push(name.to_string());
        self.thread_ids.insert(name.to_string(), id);
        id
    }
}

/// `v`'s index in `list`, appended when new.
fn intern<T: Copy + Eq + std::hash::Hash>(
    list: &mut Vec<T>,
    ids: &mut HashMap<T, u32>,
    v: T,
) -> u32 {
    *ids.entry(v).or_insert_with(|| {
        list.push(v);
        list.len() as u32 - 1
    })
}

pub struct Tracker {
    root: u32,
    /// The upstream hops' trees sampled beside the target's, by root (docs/stack.md).
    hop_roots: Vec<(u32, u8)>,
    /// The hop of each member pid of those trees.
    hop_of: HashMap<u32, u8>,
    /// Whether a pid belongs to the sampled tree, for every pid asked about.
    members: HashMap<u32, bool>,
    procs: HashMap<u32, Proc>,
    comms: HashMap<u32, String>,
    pub modules: Vec<ModuleEntry>,
    module_ids: HashMap<ModuleKind, u32>,
    cache: arch::Cache,
    /// Exits seen in the previous round, applied one round late: samples of the exiting task
    /// may still sit in another CPU's buffer.
    exits: Vec<(u32, u32)>,
    pending_exits: Vec<(u32, u32)>,
    pub agg: Aggregate,
    chain: Vec<u32>,
    /// Tells what each sample's thread served, once the probes are there.
    pub tagger: Option<Box<dyn Tagger>>,
    pub lua: Lua,
    /// The client tree followed beside the sampled one, once its first fork is seen.
    pub client: Option<ClientTree>,
    /// The fork that starts the client tree, once asked for.
    client_fork: Arc<ClientFork>,
    /// When the aggregate's requests were last folded.
    folded: Instant,
    /// Read before sampling starts: read late, in the reader's thread, it stops the draining
    /// meanwhile, and a CPU's buffer (4 MiB here, 16 KiB of stack a sample) holds about 125 ms
    /// of a busy CPU's samples at 1999 Hz.
    pub kernel_text: KernelText,
}

/// The next fork of thread `tid` from `since_ns` on (CLOCK_MONOTONIC, as the records' times)
/// starts the client tree: the time keeps out the thread's earlier forks whose records the
/// reader has not read yet.
#[derive(Default)]
pub struct ClientFork {
    tid: AtomicU32,
    since_ns: AtomicU64,
}

impl ClientFork {
    /// The calling thread's next fork from now on.
    pub fn ask_here(&self) {
        // SAFETY: gettid and clock_gettime have no preconditions; `now` is a valid timespec.
        let (tid, now) = unsafe {
            let mut now = std::mem::zeroed::<libc::timespec>();
            libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now);
            (libc::gettid() as u32, now)
        };
        let since = now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64;
        self.since_ns.store(since, Ordering::SeqCst);
        self.tid.store(tid, Ordering::SeqCst);
    }

    fn asked(&self) -> bool {
        self.tid.load(Ordering::SeqCst) != 0
    }

    /// Whether thread `ptid`'s fork at `time` is the one.
    fn is(&self, ptid: u32, time: u64) -> bool {
        let tid = self.tid.load(Ordering::SeqCst);
        tid != 0 && ptid == tid && time >= self.since_ns.load(Ordering::SeqCst)
    }
}

/// A second tree (the `--load` command's) whose samples keep only their kernel frames: enough
/// for its kernel split, without unwinding or mappings.
pub struct ClientTree {
    root: u32,
    members: HashMap<u32, bool>,
    pub agg: Aggregate,
}

/// The thread name of every client sample: the split needs none finer.
const CLIENT_THREAD: &str = "load command";

impl ClientTree {
    pub fn new(root: u32) -> ClientTree {
        ClientTree {
            root,
            members: HashMap::from([(root, true)]),
            agg: Aggregate::default(),
        }
    }

    fn wanted(&mut self, pid: u32) -> bool {
        let root = self.root;
        *self
            .members
            .entry(pid)
            .or_insert_with(|| reqcost_server::descends_from(pid, root))
    }

    fn sample(&mut self, s: &Sample, text: &KernelText) {
        let agg = &mut self.agg;
        let mut chain = Vec::new();
        agg.push_kernel(text, &s.kernel, &mut chain);
        if chain.is_empty() {
            chain.push(agg.frame_id(RawFrame::Unknown));
        }
        let thread = agg.thread_id(CLIENT_THREAD);
        let served = agg.served_id(Served::Unknown);
        *agg.stacks
            .entry((thread, served, 0, chain.into()))
            .or_insert(0) += 1;
        agg.samples += 1;
    }
}

impl Tracker {
    pub fn new(root: u32, client_fork: Arc<ClientFork>) -> Tracker {
        Tracker {
            root,
            hop_roots: Vec::new(),
            hop_of: HashMap::new(),
            members: HashMap::from([(root, true)]),
            procs: HashMap::new(),
            comms: HashMap::new(),
            modules: Vec::new(),
            module_ids: HashMap::new(),
            cache: arch::Cache::new(),
            exits: Vec::new(),
            pending_exits: Vec::new(),
            agg: Aggregate::default(),
            chain: Vec::new(),
            tagger: None,
            lua: Lua::default(),
            client: None,
            client_fork,
            folded: Instant::now(),
            kernel_text: KernelText::default(),
        }
    }

    /// Whether `pid` is in the sampled tree or the client tree.
    pub fn wanted(&mut self, pid: u32) -> bool {
        if self.server_wanted(pid) {
            return true;
        }
        match self.client.as_mut() {
            Some(c) => c.wanted(pid),
            // The client's fork may be among the records being drained, its first samples
            // too: keep every sample until that fork is read, and sort them then.
            None => self.client_fork.asked(),
        }
    }

    /// Whether `pid` is in the sampled tree. Fork records keep the answer current; a pid met
    /// before its fork record is looked up in /proc.
    fn server_wanted(&mut self, pid: u32) -> bool {
        if let Some(&m) = self.members.get(&pid) {
            return m;
        }
        let hop = self
            .hop_roots
            .iter()
            .find(|(root, _)| reqcost_server::descends_from(pid, *root))
            .map(|&(_, hop)| hop);
        if let Some(hop) = hop {
            self.hop_of.insert(pid, hop);
        }
        let m = hop.is_some() || reqcost_server::descends_from(pid, self.root);
        self.members.insert(pid, m);
        m
    }

    /// Samples upstream hop `hop`'s tree, rooted at `root`, from now on beside the target's.
    pub fn follow_hop(&mut self, root: u32, hop: u8) {
        self.hop_roots.push((root, hop));
        // Its pids met before were answered as strangers.
        self.members.retain(|_, m| *m);
        self.members.insert(root, true);
        self.hop_of.insert(root, hop);
        for pid in reqcost_server::process_tree(root) {
            self.hop_of.insert(pid, hop);
            let tids = reqcost_server::threads(pid);
            if !tids.is_empty() {
                self.add_existing(pid, &tids);
            }
        }
    }

    /// Learns an existing process's mappings and threads from /proc.
    pub fn add_existing(&mut self, pid: u32, tids: &[u32]) {
        self.members.insert(pid, true);
        for &tid in tids {
            if let Some(c) = procfs::comm(pid, tid) {
                self.comms.insert(tid, c);
            }
        }
        if self.procs.contains_key(&pid) {
            return;
        }
        let mut p = Proc::empty();
        for m in procfs::exec_maps(pid) {
            self.map(&mut p, pid, m.start, m.end, m.pgoff, &m.path);
        }
        self.procs.insert(pid, p);
    }

    pub fn handle(&mut self, r: Record) {
        match r {
            Record::Sample(s) => {
                if self.server_wanted(s.pid) {
                    self.sample(s)
                } else if let Some(c) = self.client.as_mut() {
                    if c.wanted(s.pid) {
                        c.sample(&s, &self.kernel_text)
                    }
                }
            }
            Record::Mmap(m) => {
                if self.server_wanted(m.pid) {
                    self.mmap(m)
                }
            }
            Record::Comm {
                pid,
                tid,
                exec,
                name,
                ..
            } => {
                if !self.server_wanted(pid) {
                    return;
                }
                if exec {
                    self.procs.insert(pid, Proc::empty());
                }
                self.comms.insert(tid, name);
            }
            Record::Fork {
                pid,
                ppid,
                tid,
                ptid,
                time,
            } => {
                match self.client.as_mut() {
                    Some(c) => {
                        let member = c.wanted(ppid);
                        c.members.insert(pid, member);
                    }
                    None if pid != ppid && self.client_fork.is(ptid, time) => {
                        self.client = Some(ClientTree::new(pid));
                    }
                    None => {}
                }
                let member = self.server_wanted(ppid);
                self.members.insert(pid, member);
                if !member {
                    return;
                }
                if let Some(&hop) = self.hop_of.get(&ppid) {
                    self.hop_of.insert(pid, hop);
                }
                if let Some(c) = self.comms.get(&ptid).cloned() {
                    self.comms.insert(tid, c);
                }
                if pid != ppid || !self.procs.contains_key(&pid) {
                    let p = match self.procs.get(&ppid) {
                        Some(parent) => parent.clone(),
                        None => Proc::empty(),
                    };
                    self.procs.insert(pid, p);
                }
            }
            Record::Exit { pid, tid, .. } => {
                if self.members.get(&pid) == Some(&true) {
                    self.pending_exits.push((pid, tid));
                } else if pid == tid {
                    // Forget it: the pid may be reused by a process of the tree.
                    self.members.remove(&pid);
                    if let Some(c) = self.client.as_mut() {
                        c.members.remove(&pid);
                    }
                }
            }
        }
    }

    /// Ends one drain of the buffers.
    pub fn end_round(&mut self) {
        if let Some(t) = self.tagger.as_mut() {
            self.agg.claim_held(t.as_mut());
            if self.folded.elapsed() >= FOLD_EVERY {
                self.agg.fold(t.as_mut());
                self.folded = Instant::now();
            }
        }
        for (pid, tid) in std::mem::take(&mut self.exits) {
            self.comms.remove(&tid);
            if pid == tid {
                self.procs.remove(&pid);
                self.members.remove(&pid);
                self.hop_of.remove(&pid);
            }
        }
        self.exits = std::mem::take(&mut self.pending_exits);
    }

    fn mmap(&mut self, m: Mmap) {
        if !m.exec {
            return;
        }
        let mut p = self.procs.remove(&m.pid).unwrap_or_else(Proc::empty);
        self.map(&mut p, m.pid, m.start, m.start + m.len, m.pgoff, &m.path);
        self.procs.insert(m.pid, p);
    }

    fn map(&mut self, p: &mut Proc, pid: u32, start: u64, end: u64, pgoff: u64, path: &str) {
        let overlapping: Vec<u64> = p
            .maps
            .range(..end)
            .filter(|(&s, m)| s < end && m.end > start)
            .map(|(&s, _)| s)
            .collect();
        for s in overlapping {
            if p.maps.remove(&s).is_some_and(|m| m.module.is_some()) {
                p.unwinder.remove_module(s);
            }
        }
        let module = self.module_for(pid, path);
        if let Some(id) = module {
            let e = &self.modules[id as usize];
            if let Some(info) = &e.info {
                p.unwinder
                    .add_module(info.module(&e.name, start..end, pgoff));
            }
        }
        p.maps.insert(start, Map { end, pgoff, module });
    }

    fn module_for(&mut self, pid: u32, path: &str) -> Option<u32> {
        let kind = if path == "[vdso]" {
            ModuleKind::Vdso
        } else if path.starts_with('/')
            // perf's names for anonymous, memfd and deleted mappings: code without a file.
            && !path.starts_with("//anon")
            && !path.starts_with("/memfd:")
            && !path.ends_with(" (deleted)")
        {
            ModuleKind::File(PathBuf::from(path))
        } else {
            return None;
        };
        if let Some(&id) = self.module_ids.get(&kind) {
            return Some(id);
        }
        let (name, info, kind) = match &kind {
            ModuleKind::Vdso => (
                "[vdso]".to_string(),
                procfs::own_vdso().and_then(|(_, b)| ElfInfo::from_bytes(&b)),
                kind.clone(),
            ),
            ModuleKind::File(p) => {
                // A process in another mount namespace sees its own files.
                let in_root = PathBuf::from(format!("/proc/{pid}/root{path}"));
                let real = if p.exists() || !in_root.exists() {
                    p.clone()
                } else {
                    in_root
                };
                let name = p
                    .file_name()
                    .map_or_else(|| path.to_string(), |n| n.to_string_lossy().into_owned());
                (name, ElfInfo::from_path(&real), ModuleKind::File(real))
            }
        };
        let id = self.modules.len() as u32;
        self.modules.push(ModuleEntry {
            name,
            kind: kind.clone(),
            info: info.map(Arc::new),
        });
        self.module_ids.insert(kind, id);
        // Later mappings of the same path find the entry without touching the file system.
        self.module_ids
            .insert(ModuleKind::File(PathBuf::from(path)), id);
        Some(id)
    }

    fn sample(&mut self, s: Sample) {
        let mut chain = std::mem::take(&mut self.chain);
        chain.clear();
        self.agg
            .push_kernel(&self.kernel_text, &s.kernel, &mut chain);
        if let Some(regs) = s.regs {
            if !self.procs.contains_key(&s.pid) {
                let tids = reqcost_server::threads(s.pid);
                self.add_existing(s.pid, &tids);
            }
            let complete = self.unwind(s.pid, &regs, &s.stack, &mut chain);
            if !complete {
                self.agg.truncated += 1;
            }
            self.splice_lua(&s, &mut chain);
        }
        if chain.is_empty() {
            chain.push(self.agg.frame_id(RawFrame::Unknown));
        }
        let thread = match self.comms.get(&s.tid) {
            Some(c) => c.clone(),
            None => {
                let c = procfs::comm(s.pid, s.tid).unwrap_or_else(|| format!("{}", s.pid));
                self.comms.insert(s.tid, c.clone());
                c
            }
        };
        let thread = self.agg.thread_id(&thread);
        let served = match self.tagger.as_mut() {
            Some(t) => t.served(s.pid, s.tid, s.time),
            None => Served::Unknown,
        };
        let served = self.agg.served_id(served);
        let hop = self.hop_of.get(&s.pid).copied().unwrap_or(0);
        *self
            .agg
            .stacks
            .entry((thread, served, hop, chain.as_slice().into()))
            .or_insert(0) += 1;
        self.agg.samples += 1;
        self.chain = chain;
    }

    /// Puts the Lua functions the VM frames of `chain` were running above them, and names the
    /// VM frames (src/interp/lua.rs); a sample in the VM without a walk keeps only its native
    /// frames and is counted.
    fn splice_lua(&mut self, s: &Sample, chain: &mut Vec<u32>) {
        let mut kinds = Vec::new();
        for (pos, &id) in chain.iter().enumerate() {
            if let RawFrame::User { module, offset } = self.agg.frames[id as usize] {
                if let Some(k) = self.lua.classify(&self.modules, module, offset) {
                    kinds.push((pos, k));
                }
            }
        }
        if !kinds.iter().any(|&(_, k)| k == VmFrame::Execute) {
            return;
        }
        let above = match self.tagger.as_mut().and_then(|t| t.lua(s.tid, s.time)) {
            Some(stack) => self.lua.splice(s.pid, &kinds, &stack),
            None => {
                self.lua.counts.missed += 1;
                Vec::new()
            }
        };
        let mut above = above.into_iter().peekable();
        let mut vm = kinds
            .iter()
            .filter(|&&(_, k)| k == VmFrame::Execute)
            .peekable();
        let native = std::mem::take(chain);
        for (pos, mut id) in native.into_iter().enumerate() {
            if let Some((_, frames)) = above.next_if(|(p, _)| *p == pos) {
                for f in frames {
                    let fid = self.agg.interp_id(f);
                    chain.push(fid);
                }
            }
            // The VM's loop is static: a stripped binary's symbols do not name it.
            if vm.next_if(|&&(p, _)| p == pos).is_some() {
                if let RawFrame::User { module, .. } = self.agg.frames[id as usize] {
                    id = self.agg.interp_id(InterpFrame {
                        function: "luaV_execute".into(),
                        module: self.modules[module as usize].name.clone(),
                    });
                }
            }
            chain.push(id);
        }
    }

    /// Appends the user chain, leaf first; returns whether unwinding reached the root frame.
    fn unwind(
        &mut self,
        pid: u32,
        regs: &[u64; arch::NREGS],
        stack: &[u8],
        out: &mut Vec<u32>,
    ) -> bool {
        let Some(p) = self.procs.get(&pid) else {
            return false;
        };
        let (pc, sp, uregs) = arch::regs(regs);
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let off = addr.checked_sub(sp).ok_or(())? as usize;
            let bytes = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(bytes.try_into().map_err(|_| ())?))
        };
        let mut it = p
            .unwinder
            .iter_frames(pc, uregs, &mut self.cache, &mut read_stack);
        let mut complete = false;
        let mut n = 0;
        loop {
            match it.next() {
                Ok(Some(fa)) => {
                    let addr = match fa {
                        FrameAddress::InstructionPointer(a) => a,
                        FrameAddress::ReturnAddress(a) => u64::from(a) - 1,
                    };
                    let raw = match p.lookup(addr) {
                        Some((start, m)) => match m.module {
                            Some(module) => RawFrame::User {
                                module,
                                offset: addr - start + m.pgoff,
                            },
                            None => RawFrame::Anon { pid, addr },
                        },
                        None => RawFrame::Unknown,
                    };
                    let id = self.agg.frame_id(raw);
                    out.push(id);
                    n += 1;
                    if n >= MAX_USER_FRAMES {
                        break;
                    }
                }
                Ok(None) => {
                    complete = true;
                    break;
                }
                Err(_) => break,
            }
        }
        complete
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Above any kernel's pid_max: never a live process to find in /proc.
    const SERVER: u32 = 5_000_001;
    const LAUNCHER: u32 = 5_000_002;
    const CLIENT: u32 = 5_000_003;
    const CLIENT_CHILD: u32 = 5_000_004;
    const STRANGER: u32 = 5_000_005;
    const EARLIER: u32 = 5_000_006;
    const HOP: u32 = 5_000_007;
    const HOP_CHILD: u32 = 5_000_008;

    fn in_kernel(pid: u32, kernel: &[u64]) -> Record {
        Record::Sample(Sample {
            pid,
            tid: pid,
            time: 0,
            kernel: kernel.to_vec(),
            regs: None,
            stack: Vec::new(),
        })
    }

    fn fork(parent: u32, child: u32, time: u64) -> Record {
        Record::Fork {
            pid: child,
            ppid: parent,
            tid: child,
            ptid: parent,
            time,
        }
    }

    #[test]
    fn the_client_tree_keeps_its_kernel_frames_apart_from_the_server() {
        let mut t = Tracker::new(SERVER, Arc::default());
        assert!(t.wanted(SERVER) && !t.wanted(STRANGER));
        t.client_fork.since_ns.store(100, Ordering::SeqCst);
        t.client_fork.tid.store(LAUNCHER, Ordering::SeqCst);
        // Before the client's fork is read, any sample may be the client's.
        assert!(t.wanted(STRANGER));
        // A fork from before it was asked for, read late, is not the client's; nor are the
        // launcher's later forks.
        t.handle(fork(LAUNCHER, EARLIER, 99));
        t.handle(fork(LAUNCHER, CLIENT, 100));
        t.handle(fork(CLIENT, CLIENT_CHILD, 101));
        t.handle(fork(LAUNCHER, STRANGER, 102));
        assert!(!t.wanted(EARLIER));
        assert!(t.wanted(CLIENT) && t.wanted(CLIENT_CHILD) && !t.wanted(STRANGER));
        t.handle(in_kernel(SERVER, &[0x10]));
        t.handle(in_kernel(CLIENT, &[0x20, 0x31]));
        t.handle(in_kernel(CLIENT_CHILD, &[0x20, 0x31]));
        t.handle(in_kernel(CLIENT_CHILD, &[]));
        t.handle(in_kernel(STRANGER, &[0x40]));
        assert_eq!(t.agg.samples, 1);
        let client = t.client.as_ref().unwrap();
        assert_eq!(client.agg.samples, 3);
        // Return addresses above the leaf are stored minus one, as the server's are.
        assert_eq!(
            client.agg.frames,
            [
                RawFrame::Kernel(0x20),
                RawFrame::Kernel(0x30),
                RawFrame::Unknown
            ]
        );
        assert_eq!(client.agg.stacks.len(), 2);
        assert_eq!(client.agg.stacks.values().max(), Some(&2));
    }

    /// Folds every request of connection 1 into its first: the tagger's answer for cheap
    /// requests that ended.
    struct ConnectionOne;

    impl Tagger for ConnectionOne {
        fn served(&mut self, _: u32, _: u32, _: u64) -> Served {
            Served::Unknown
        }

        fn claimed(&mut self, _: Served) -> Option<Served> {
            None
        }

        fn folded(&mut self, request: Served) -> Option<Served> {
            match request {
                Served::Request {
                    pid, conn_id: 1, ..
                } => Some(Served::Request {
                    pid,
                    conn_id: 1,
                    seq: 0,
                }),
                _ => None,
            }
        }
    }

    #[test]
    fn folding_merges_the_folded_requests_stacks_and_forgets_them() {
        let mut agg = Aggregate::default();
        let request = |conn_id, seq| Served::Request {
            pid: SERVER,
            conn_id,
            seq,
        };
        let held = agg.served_id(Served::Held {
            pid: SERVER,
            tid: SERVER,
            stretch: 0,
        });
        for (served, chain) in [
            (request(1, 1), [1]),
            (request(1, 2), [1]),
            (request(1, 3), [2]),
            (request(2, 0), [1]),
        ] {
            let s = agg.served_id(served);
            *agg.stacks.entry((0, s, 0, chain.into())).or_insert(0) += 1;
        }
        *agg.stacks.entry((0, held, 0, [3].into())).or_insert(0) += 1;
        agg.fold(&mut ConnectionOne);
        let held = Served::Held {
            pid: SERVER,
            tid: SERVER,
            stretch: 0,
        };
        assert_eq!(agg.served, [held, request(1, 0), request(2, 0)]);
        assert_eq!(agg.held, [0]);
        let mut stacks: Vec<(Served, u32, u64)> = agg
            .stacks
            .iter()
            .map(|((_, s, _, chain), &n)| (agg.served[*s as usize], chain[0], n))
            .collect();
        stacks.sort_by_key(|&(s, c, _)| (format!("{s:?}"), c));
        assert_eq!(
            stacks,
            [
                (held, 3, 1),
                (request(1, 0), 1, 2),
                (request(1, 0), 2, 1),
                (request(2, 0), 1, 1)
            ]
        );
    }

    #[test]
    fn kernel_frames_of_one_function_make_one_chain() {
        let mut t = Tracker::new(SERVER, Arc::default());
        let kallsyms = "ffffffff81000000 T _stext\nffffffff81000100 t tcp_sendmsg\n\
                        ffffffff81000200 t tcp_recvmsg\nffffffff81000300 T _etext";
        t.kernel_text = KernelText::parse(kallsyms.lines().map(String::from));
        // The leaf as sampled, the callers as return addresses (one past the call).
        t.handle(in_kernel(SERVER, &[0xffffffff81000110, 0xffffffff81000211]));
        t.handle(in_kernel(SERVER, &[0xffffffff81000180, 0xffffffff81000281]));
        t.handle(in_kernel(SERVER, &[0xffffffff81000200, 0xffffffff81000201]));
        t.handle(in_kernel(SERVER, &[0xffffffffc0001000]));
        let mut chains: Vec<(Vec<RawFrame>, u64)> = t
            .agg
            .stacks
            .iter()
            .map(|(key, &n)| (key.3.iter().map(|&f| t.agg.frames[f as usize]).collect(), n))
            .collect();
        chains.sort_by_key(|(c, _)| format!("{c:?}"));
        let k = RawFrame::Kernel;
        assert_eq!(
            chains,
            [
                (vec![k(0xffffffff81000100), k(0xffffffff81000200)], 2),
                (vec![k(0xffffffff81000200), k(0xffffffff81000200)], 1),
                (vec![k(0xffffffffc0001000)], 1),
            ]
        );
    }

    #[test]
    fn an_upstream_hops_tree_is_sampled_apart_once_followed() {
        let mut t = Tracker::new(SERVER, Arc::default());
        assert!(!t.wanted(HOP));
        t.follow_hop(HOP, 2);
        assert!(t.wanted(HOP) && !t.wanted(STRANGER));
        t.handle(fork(HOP, HOP_CHILD, 1));
        t.handle(in_kernel(SERVER, &[0x10]));
        t.handle(in_kernel(HOP, &[0x10]));
        t.handle(in_kernel(HOP_CHILD, &[0x10]));
        t.handle(in_kernel(STRANGER, &[0x10]));
        let mut by_hop = std::collections::BTreeMap::new();
        for (key, n) in &t.agg.stacks {
            *by_hop.entry(key.2).or_insert(0) += n;
        }
        assert_eq!(by_hop, [(0, 1), (2, 2)].into());
    }
}
