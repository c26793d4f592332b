//! Lua 5.4 frames (docs/interpreters.md): which native code is the VM, what the probes' walk
//! of a sample's Lua stack names, and where its frames go in the native chain.
//!
//! The splice rule: Lua 5.4 runs Lua-to-Lua calls inside one `luaV_execute` invocation, and
//! marks the first CallInfo of each invocation CIST_FRESH; a coroutine runs in its own state,
//! entered through `lua_resume`. So the walk (leaf first) is cut into states at coroutine
//! boundaries and each state into groups ending at a CIST_FRESH frame; the native chain (leaf
//! first) is cut into states at `lua_resume` frames. Within a state, the n-th group goes above
//! the n-th `luaV_execute` frame; groups left over (a coroutine resumed after yielding across a
//! pcall runs its remaining frames from one `luaV_execute`) go above the state's last one.
//!
//! Frames are named as Lua's debug library names them: by the instruction that called the
//! function (a local, global, field, method or upvalue name), else `function <FILE:LINE>`; the
//! line is where the function is defined (one frame per function, whichever line runs).

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use object::{Object, ObjectSymbol};

use super::{read_memory, InterpFrame};
use crate::tracker::{ModuleEntry, ModuleKind};

/// One CallInfo of the probes' walk (reqcost-probes' `LuaWalks`), leaf first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LuaCall {
    /// `Proto*` of a Lua function, 0 for a C function.
    pub proto: u64,
    /// `savedpc - code`.
    pub pc: u32,
    pub callstatus: u16,
    /// Coroutine boundaries crossed before this frame (0: the running state).
    pub state: u16,
}

/// A sample's Lua stack as the probes walked it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LuaStack {
    pub calls: Vec<LuaCall>,
    /// The walk stopped before the thread's first Lua frame.
    pub truncated: bool,
}

const CIST_FRESH: u16 = 1 << 2;
/// Frames the probes walk at most (LUA_MAX_FRAMES of lua.bpf.h).
const MAX_WALK: usize = 32;
const CIST_TAIL: u16 = 1 << 5;

/// The native code of a Lua core, as file offsets.
#[derive(Debug, Clone)]
struct Vm {
    execute: Range<u64>,
    resume: Range<u64>,
}

/// Where a native frame is in a Lua core.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum VmFrame {
    Execute,
    Resume,
}

/// How the splicing went, for the profile's notes.
#[derive(Debug, Default, Clone, Copy)]
pub struct LuaCounts {
    /// Samples in the VM with Lua frames spliced in.
    pub spliced: u64,
    /// Samples in the VM that got no walk (the thread's state unknown, or its ring overwritten).
    pub missed: u64,
    /// Walks cut short (deeper than the probes walk).
    pub truncated: u64,
}

#[derive(Default)]
pub struct Lua {
    vms: HashMap<u32, Option<Vm>>,
    protos: HashMap<(u32, u64), Option<Arc<Proto>>>,
    names: HashMap<(u32, u64, u64, u32), InterpFrame>,
    pub counts: LuaCounts,
    /// Lua cores whose VM reqcost could not find.
    pub notes: Vec<String>,
}

impl Lua {
    /// What the profile's notes say: why Lua frames are missing, and how many samples got
    /// them (nothing for a program without Lua).
    pub fn notes(&self) -> Vec<String> {
        let mut notes = self.notes.clone();
        let c = self.counts;
        if c.spliced + c.missed > 0 {
            notes.push(format!(
                "Lua frames: {} of {} samples in the Lua VM name their Lua functions; {} without a Lua stack (the thread entered no lua_resume or lua_pcallk while the probes were attached, its coroutine was resumed from C while they were paused, or its walk was overwritten) stay native; {} walks cut at {} frames (the outermost frames missing)",
                c.spliced,
                c.spliced + c.missed,
                c.missed,
                c.truncated,
                MAX_WALK
            ));
        }
        notes
    }

    /// Whether native frame `offset` of module `module` is the VM's loop or `lua_resume`.
    pub(crate) fn classify(
        &mut self,
        modules: &[ModuleEntry],
        module: u32,
        offset: u64,
    ) -> Option<VmFrame> {
        let vm = self
            .vms
            .entry(module)
            .or_insert_with(|| {
                let e = modules.get(module as usize)?;
                let found = find_vm(e);
                if let Err(why) = &found {
                    self.notes.push(format!("Lua frames not available: {why}"));
                }
                found.ok().flatten()
            })
            .as_ref()?;
        if vm.execute.contains(&offset) {
            Some(VmFrame::Execute)
        } else if vm.resume.contains(&offset) {
            Some(VmFrame::Resume)
        } else {
            None
        }
    }

    /// The frames to put above each native frame of `kinds` (the native chain's VM frames,
    /// leaf first, by position), from the walk `stack` of process `pid`.
    pub(crate) fn splice(
        &mut self,
        pid: u32,
        kinds: &[(usize, VmFrame)],
        stack: &LuaStack,
    ) -> Vec<(usize, Vec<InterpFrame>)> {
        self.counts.spliced += 1;
        if stack.truncated {
            self.counts.truncated += 1;
        }
        // The walk's groups, by state.
        let mut groups: Vec<Vec<Vec<InterpFrame>>> = Vec::new();
        let mut fresh = true;
        for (i, call) in stack.calls.iter().enumerate() {
            let s = call.state as usize;
            if groups.len() <= s {
                groups.resize_with(s + 1, Vec::new);
                fresh = true;
            }
            if call.proto != 0 {
                if fresh {
                    groups[s].push(Vec::new());
                }
                let caller = stack.calls.get(i + 1).filter(|c| c.state == call.state);
                let frame = self.frame(pid, call, caller);
                if let Some(g) = groups[s].last_mut() {
                    g.push(frame);
                }
                fresh = call.callstatus & CIST_FRESH != 0;
            }
        }
        let mut out: Vec<(usize, Vec<InterpFrame>)> = Vec::new();
        let mut state = 0;
        let mut executes: Vec<Vec<usize>> = vec![Vec::new()];
        for &(pos, kind) in kinds {
            match kind {
                VmFrame::Resume => {
                    state += 1;
                    executes.push(Vec::new());
                }
                VmFrame::Execute => executes[state].push(pos),
            }
        }
        for (s, positions) in executes.iter().enumerate() {
            let Some(state_groups) = groups.get_mut(s) else {
                break;
            };
            let Some(&last) = positions.last() else {
                continue;
            };
            for (g, frames) in std::mem::take(state_groups).into_iter().enumerate() {
                let pos = positions.get(g).copied().unwrap_or(last);
                match out.last_mut() {
                    Some((p, fs)) if *p == pos => fs.extend(frames),
                    _ => out.push((pos, frames)),
                }
            }
        }
        out
    }

    fn frame(&mut self, pid: u32, call: &LuaCall, caller: Option<&LuaCall>) -> InterpFrame {
        let caller = caller
            .filter(|c| c.proto != 0 && call.callstatus & (CIST_TAIL | CIST_FRESH) == 0)
            .map_or((0, 0), |c| (c.proto, c.pc));
        let key = (pid, call.proto, caller.0, caller.1);
        if let Some(f) = self.names.get(&key) {
            return f.clone();
        }
        let function = match self.proto(pid, call.proto) {
            None => format!("function <0x{:x}>", call.proto),
            Some(p) => {
                let name = (caller.0 != 0)
                    .then(|| self.proto(pid, caller.0))
                    .flatten()
                    .and_then(|c| c.call_name(pid, caller.1));
                let place = format!("{}:{}", p.source, p.linedefined);
                match name {
                    _ if p.linedefined == 0 => format!("main chunk @ {}", p.source),
                    Some(n) => format!("{n} @ {place}"),
                    None => format!("function <{place}>"),
                }
            }
        };
        let f = InterpFrame {
            function,
            module: "[lua]".into(),
        };
        self.names.insert(key, f.clone());
        f
    }

    fn proto(&mut self, pid: u32, addr: u64) -> Option<Arc<Proto>> {
        self.protos
            .entry((pid, addr))
            .or_insert_with(|| Proto::read(pid, addr).map(Arc::new))
            .clone()
    }
}

/// `luaV_execute` and `lua_resume` of a module that exports `lua_resume` (Ok(None) for other
/// modules). `luaV_execute` is static, so a stripped binary does not name it: it is the
/// largest function `.eh_frame` describes (15 210 bytes in Debian's lua5.4 and liblua5.4.so.0,
/// its computed-goto dispatch; the next largest is under 3 600), taken only when at least
/// twice the size of any other.
fn find_vm(e: &ModuleEntry) -> Result<Option<Vm>, String> {
    let ModuleKind::File(path) = &e.kind else {
        return Ok(None);
    };
    let Some(info) = &e.info else {
        return Ok(None);
    };
    let Ok(file) = std::fs::File::open(path) else {
        return Ok(None);
    };
    let cache = object::ReadCache::new(file);
    let Ok(obj) = object::File::parse(&cache) else {
        return Ok(None);
    };
    let Some(resume) = obj
        .dynamic_symbols()
        .find(|s| s.is_definition() && s.name() == Ok("lua_resume"))
    else {
        return Ok(None);
    };
    let mut ranges = info.function_ranges();
    ranges.sort_by_key(|r| std::cmp::Reverse(r.end - r.start));
    let (Some(first), Some(second)) = (ranges.first(), ranges.get(1)) else {
        return Err(format!(
            "{}: no unwind table to find luaV_execute in",
            e.name
        ));
    };
    if first.end - first.start < 2 * (second.end - second.start) {
        return Err(format!(
            "{}: cannot tell luaV_execute from its other functions (a Lua core built differently from Debian's)",
            e.name
        ));
    }
    let offsets = |r: Range<u64>| -> Option<Range<u64>> {
        let start = info.offset_of(r.start)?;
        Some(start..start + (r.end - r.start))
    };
    let execute = offsets(first.clone());
    let resume = offsets(resume.address()..resume.address() + resume.size().max(1));
    match (execute, resume) {
        (Some(execute), Some(resume)) => Ok(Some(Vm { execute, resume })),
        _ => Err(format!(
            "{}: luaV_execute outside its loaded segments",
            e.name
        )),
    }
}

/// What reqcost reads of a `Proto` (Lua 5.4.4, x86_64: lobject.h; offsets from the lua-src
/// crate's lua-5.4.4 tree, compiled with offsetof).
struct Proto {
    /// The chunk's name: a file name for `@path` chunks, `=name` without its `=`.
    source: String,
    linedefined: i32,
    code: Vec<u32>,
    /// Constants (`TValue`s of 16 bytes).
    k: u64,
    sizek: u32,
    /// `Upvaldesc`s of 16 bytes, name first.
    upvalues: u64,
    sizeupvalues: u32,
    /// (name, startpc, endpc) of each local variable.
    locvars: Vec<(u64, i32, i32)>,
}

const PROTO_BYTES: usize = 120;
/// Bounds on what one Proto makes reqcost read.
const MAX_CODE: usize = 1 << 20;
const MAX_LOCVARS: usize = 1 << 16;
const MAX_STRING: usize = 4096;

fn u64_at(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .map_or(0, |s| u64::from_ne_bytes(s.try_into().unwrap_or_default()))
}

fn i32_at(b: &[u8], at: usize) -> i32 {
    b.get(at..at + 4)
        .map_or(0, |s| i32::from_ne_bytes(s.try_into().unwrap_or_default()))
}

impl Proto {
    fn read(pid: u32, addr: u64) -> Option<Proto> {
        let b = read_memory(pid, addr, PROTO_BYTES)?;
        let sizecode = (i32_at(&b, 24).max(0) as usize).min(MAX_CODE);
        let sizelocvars = (i32_at(&b, 36).max(0) as usize).min(MAX_LOCVARS);
        let code = read_memory(pid, u64_at(&b, 64), sizecode * 4)?
            .chunks_exact(4)
            .map(|c| u32::from_ne_bytes(c.try_into().unwrap_or_default()))
            .collect();
        let locvars = read_memory(pid, u64_at(&b, 104), sizelocvars * 16)
            .unwrap_or_default()
            .chunks_exact(16)
            .map(|c| (u64_at(c, 0), i32_at(c, 8), i32_at(c, 12)))
            .collect();
        let source = lua_string(pid, u64_at(&b, 112)).map_or_else(|| "?".into(), chunk_name);
        Some(Proto {
            source,
            linedefined: i32_at(&b, 44),
            code,
            k: u64_at(&b, 56),
            sizek: i32_at(&b, 20).max(0) as u32,
            upvalues: u64_at(&b, 80),
            sizeupvalues: i32_at(&b, 16).max(0) as u32,
            locvars,
        })
    }

    /// The name of the function called by the instruction before `pc` (Lua's funcnamefromcode
    /// for OP_CALL and OP_TAILCALL).
    fn call_name(&self, pid: u32, pc: u32) -> Option<String> {
        let at = pc.checked_sub(1)? as usize;
        let i = *self.code.get(at)?;
        matches!(op(i), OP_CALL | OP_TAILCALL)
            .then(|| self.object_name(pid, at, arg_a(i), 0))
            .flatten()
    }

    /// Lua's getobjname: what register `reg` holds at instruction `lastpc`.
    fn object_name(&self, pid: u32, lastpc: usize, reg: u32, depth: u32) -> Option<String> {
        if let Some(n) = self.local_name(pid, reg + 1, lastpc) {
            return Some(n);
        }
        let pc = find_set_reg(&self.code, lastpc, reg)?;
        let i = self.code[pc];
        match op(i) {
            OP_MOVE if arg_b(i) < arg_a(i) && depth < 8 => {
                self.object_name(pid, pc, arg_b(i), depth + 1)
            }
            OP_GETTABUP | OP_GETFIELD => self.constant_name(pid, arg_c(i)),
            OP_SELF if arg_k(i) => self.constant_name(pid, arg_c(i)),
            OP_GETUPVAL => self.upvalue_name(pid, arg_b(i)),
            _ => None,
        }
    }

    /// Lua's luaF_getlocalname: the name of the `n`-th local variable active at `pc`.
    fn local_name(&self, pid: u32, mut n: u32, pc: usize) -> Option<String> {
        for &(name, start, end) in &self.locvars {
            if start as i64 > pc as i64 {
                break;
            }
            if (pc as i64) < end as i64 {
                n -= 1;
                if n == 0 {
                    return lua_string(pid, name);
                }
            }
        }
        None
    }

    fn constant_name(&self, pid: u32, index: u32) -> Option<String> {
        if index >= self.sizek {
            return None;
        }
        let tv = read_memory(pid, self.k + 16 * index as u64, 16)?;
        // Short or long string (LUA_TSTRING's variants).
        (tv[8] & 0x0f == 4).then(|| lua_string(pid, u64_at(&tv, 0)))?
    }

    fn upvalue_name(&self, pid: u32, index: u32) -> Option<String> {
        if index >= self.sizeupvalues {
            return None;
        }
        let d = read_memory(pid, self.upvalues + 16 * index as u64, 8)?;
        lua_string(pid, u64_at(&d, 0))
    }
}

/// A `TString`'s text: its tag at 8 (short strings 0x04, long 0x14), the short length at 11,
/// the long length at 16, the bytes at 24.
fn lua_string(pid: u32, addr: u64) -> Option<String> {
    if addr == 0 {
        return None;
    }
    let h = read_memory(pid, addr, 24)?;
    let len = match h[8] {
        0x04 => h[11] as usize,
        0x14 => u64_at(&h, 16) as usize,
        _ => return None,
    };
    let bytes = read_memory(pid, addr + 24, len.min(MAX_STRING))?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

/// `@path/to/blog.lua` → `blog.lua`; `=stdin` → `stdin`; a chunk from a string → `[string]`.
fn chunk_name(source: String) -> String {
    if let Some(path) = source.strip_prefix('@') {
        path.rsplit('/').next().unwrap_or(path).to_string()
    } else if let Some(name) = source.strip_prefix('=') {
        name.to_string()
    } else {
        "[string]".to_string()
    }
}

// Lua 5.4's instruction format (lopcodes.h): opcode in bits 0-6, A 7-14, k 15, B 16-23, C 24-31,
// sJ 7-31 (offset by 2^24 - 1); the opcodes reqcost reads.
const OP_MOVE: u32 = 0;
const OP_LOADNIL: u32 = 8;
const OP_GETUPVAL: u32 = 9;
const OP_GETTABUP: u32 = 11;
const OP_GETFIELD: u32 = 14;
const OP_SELF: u32 = 20;
const OP_JMP: u32 = 56;
const OP_CALL: u32 = 68;
const OP_TAILCALL: u32 = 69;
const OP_TFORCALL: u32 = 76;

fn op(i: u32) -> u32 {
    i & 0x7f
}
fn arg_a(i: u32) -> u32 {
    (i >> 7) & 0xff
}
fn arg_k(i: u32) -> bool {
    (i >> 15) & 1 != 0
}
fn arg_b(i: u32) -> u32 {
    (i >> 16) & 0xff
}
fn arg_c(i: u32) -> u32 {
    (i >> 24) & 0xff
}
fn arg_sj(i: u32) -> i64 {
    i64::from(i >> 7) - ((1 << 24) - 1)
}

/// Opcodes that set register A (the `A` column of lopcodes.c's luaP_opmodes).
fn sets_a(op: u32) -> bool {
    matches!(op, 0..=9 | 11..=14 | 19..=45 | 49..=53 | 67..=69 | 73 | 74 | 77 | 79..=81)
}

/// Lua's findsetreg: the last instruction before `lastpc` that set register `reg`, unless a
/// jump makes it conditional.
fn find_set_reg(code: &[u32], lastpc: usize, reg: u32) -> Option<usize> {
    let mut setreg = None;
    let mut jmptarget = 0i64;
    for (pc, &i) in code.iter().enumerate().take(lastpc) {
        let a = arg_a(i);
        let change = match op(i) {
            OP_LOADNIL => a <= reg && reg <= a + arg_b(i),
            OP_TFORCALL => reg >= a + 2,
            OP_CALL | OP_TAILCALL => reg >= a,
            OP_JMP => {
                let dest = pc as i64 + 1 + arg_sj(i);
                if dest <= lastpc as i64 && dest > jmptarget {
                    jmptarget = dest;
                }
                false
            }
            o => sets_a(o) && reg == a,
        };
        if change {
            setreg = ((pc as i64) >= jmptarget).then_some(pc);
        }
    }
    setreg
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abc(op: u32, a: u32, b: u32, c: u32) -> u32 {
        op | a << 7 | b << 16 | c << 24
    }

    /// `g(1)` for a global g, as Lua 5.4 compiles it: GETTABUP R1 := _ENV["g"]; LOADI R2 := 1;
    /// CALL R1. The called register was set by the load, the argument's by LOADI.
    #[test]
    fn the_register_a_call_reads_was_set_by_its_load() {
        let code = [
            abc(OP_GETTABUP, 1, 0, 0),
            abc(1, 2, 0, 0),
            abc(OP_CALL, 1, 2, 1),
        ];
        assert_eq!(find_set_reg(&code, 2, 1), Some(0));
        assert_eq!(find_set_reg(&code, 2, 2), Some(1));
        assert_eq!(find_set_reg(&code, 2, 3), None);
    }

    /// A jump over the load makes it conditional: no name.
    #[test]
    fn a_load_a_jump_skips_names_nothing() {
        // JMP +1 (sJ offset by 2^24 - 1) over GETTABUP, then CALL R1.
        let jmp = OP_JMP | (((1 << 24) - 1 + 1) << 7);
        let code = [jmp, abc(OP_GETTABUP, 1, 0, 0), abc(OP_CALL, 1, 1, 1)];
        assert_eq!(find_set_reg(&code, 2, 1), None);
    }

    #[test]
    fn chunk_names_keep_the_file_name() {
        assert_eq!(chunk_name("@testbed/lua/blog.lua".into()), "blog.lua");
        assert_eq!(chunk_name("=stdin".into()), "stdin");
        assert_eq!(chunk_name("return 1".into()), "[string]");
    }

    /// The walk of a coroutine resumed from the main thread: its groups go above the VM frames
    /// leafward of `lua_resume`, the main thread's above the one rootward of it.
    #[test]
    fn groups_go_above_their_states_vm_frames() {
        let mut lua = Lua::default();
        let call = |proto, callstatus, state| LuaCall {
            proto,
            pc: 0,
            callstatus,
            state,
        };
        // Unreadable protos (pid 0) are named by address.
        let stack = LuaStack {
            calls: vec![
                call(0x10, 0, 0),
                call(0x20, CIST_FRESH, 0),
                call(0, 2, 1),
                call(0x30, CIST_FRESH, 1),
            ],
            truncated: false,
        };
        let kinds = [
            (2, VmFrame::Execute),
            (5, VmFrame::Resume),
            (8, VmFrame::Execute),
        ];
        let out = lua.splice(0, &kinds, &stack);
        let names: Vec<(usize, Vec<&str>)> = out
            .iter()
            .map(|(p, fs)| (*p, fs.iter().map(|f| f.function.as_str()).collect()))
            .collect();
        assert_eq!(
            names,
            [
                (2, vec!["function <0x10>", "function <0x20>"]),
                (8, vec!["function <0x30>"])
            ]
        );
    }
}
