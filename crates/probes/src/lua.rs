//! Lua 5.4 in the server's tree (docs/interpreters.md): the files that hold the Lua core (the
//! `lua5.4` executable, liblua5.4.so), whether reqcost knows their structure layouts, and the
//! reader of the Lua stacks that `lua_sample` (src/bpf/lua.bpf.h) walks at each call-chain
//! sample.

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use libbpf_rs::{MapCore, MapFlags, MapHandle};
use object::{Object, ObjectSection, ObjectSymbol};
use reqcost_profile::{LuaCall, LuaStack};

/// The only Lua whose layouts lua.bpf.h carries (offsets read from the lua-src crate's
/// lua-5.4.4 tree).
pub const KNOWN_VERSION: &str = "Lua 5.4.4";

/// Layout of `struct lua_ring` / `struct lua_walk` / `struct lua_frame` in lua.bpf.h.
const WALKS: usize = 128;
const MAX_FRAMES: usize = 32;
const FRAME_BYTES: usize = 16;
const WALK_BYTES: usize = 16 + MAX_FRAMES * FRAME_BYTES;
/// As for the sample tags (src/tags.rs): the walk and the sample are stamped in the same
/// overflow handler.
const MATCH_NS: u64 = 500_000;

/// Reads the walks (Send: the sampler's thread asks).
pub struct LuaWalks {
    pub(crate) map: MapHandle,
}

impl LuaWalks {
    /// The Lua stack walked at thread `tid`'s sample stamped `time_ns`, if one was.
    pub fn walk(&self, tid: u32, time_ns: u64) -> Option<LuaStack> {
        let ring = self
            .map
            .lookup(&tid.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()?;
        let u64_at =
            |b: &[u8], at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().unwrap_or_default());
        let u32_at =
            |b: &[u8], at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap_or_default());
        let u16_at =
            |b: &[u8], at: usize| u16::from_ne_bytes(b[at..at + 2].try_into().unwrap_or_default());
        let mut best: Option<(u64, &[u8])> = None;
        for i in 0..WALKS {
            let at = 8 + i * WALK_BYTES;
            let Some(w) = ring.get(at..at + WALK_BYTES) else {
                break;
            };
            let off = u64_at(w, 0).abs_diff(time_ns);
            if u32_at(w, 8) != tid || off > MATCH_NS {
                continue;
            }
            if best.is_none_or(|(b, _)| off < b) {
                best = Some((off, w));
            }
        }
        let (_, w) = best?;
        let n = (u16_at(w, 12) as usize).min(MAX_FRAMES);
        let calls = (0..n)
            .map(|i| {
                let f = 16 + i * FRAME_BYTES;
                LuaCall {
                    proto: u64_at(w, f),
                    pc: u32_at(w, f + 8),
                    callstatus: u16_at(w, f + 12),
                    state: u16_at(w, f + 14),
                }
            })
            .collect();
        Some(LuaStack {
            calls,
            truncated: u16_at(w, 14) != 0,
        })
    }
}

/// What the probes walk of a tree's Lua: the walks of the cores reqcost knows, and the
/// others by name and version. A Lua core reqcost cannot walk is a fact about the server, not a
/// failure: Debian's redis-server embeds Lua 5.1 whether or not it ever runs a script.
pub struct LuaFrames {
    pub walks: Option<LuaWalks>,
    /// `PATH is Lua 5.1.5, ...`: their samples keep the interpreter's native frames.
    pub unwalked: Vec<String>,
}

/// Files of the tree that hold the Lua core, by whether reqcost can walk their stacks.
#[derive(Debug, Default)]
pub(crate) struct LuaFiles {
    /// Lua 5.4.4 cores: the file as reqcost opens it, and its path as the tree names it.
    pub known: Vec<(PathBuf, String)>,
    /// Why the others cannot be walked: `PATH: Lua 5.3.6, ...`.
    pub unknown: Vec<String>,
}

/// The Lua cores the processes `pids` map (each file once).
pub(crate) fn find(pids: &[u32]) -> LuaFiles {
    let mut found = LuaFiles::default();
    let mut seen = BTreeSet::new();
    for &pid in pids {
        let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        for path in crate::tls::mapped_files(&maps) {
            let file = root.join(path.trim_start_matches('/'));
            let Ok(meta) = fs::metadata(&file) else {
                continue;
            };
            if !seen.insert((meta.dev(), meta.ino())) {
                continue;
            }
            // Named by the process first: Debian's redis-server is a link to the file
            // redis-check-rdb, which is what the maps name.
            let named = match comm(pid) {
                Some(comm) => format!("{comm} ({path})"),
                None => path.to_string(),
            };
            match lua_version(&file) {
                None => {}
                Some(Ok(v)) if v == KNOWN_VERSION => found.known.push((file, path.to_string())),
                Some(Ok(v)) => found.unknown.push(format!(
                    "{named} is {v}, and reqcost knows the structure layouts of {KNOWN_VERSION} \
                     only"
                )),
                Some(Err(why)) => found.unknown.push(format!("{named}: {why}")),
            }
        }
    }
    found
}

/// The process's own name (comm), None once it is gone.
fn comm(pid: u32) -> Option<String> {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim().to_string()).filter(|c| !c.is_empty())
}

/// The Lua version of a file that exports `lua_resume` (None for other files): from its
/// `lua_ident` string (`$LuaVersion: Lua 5.4.4  Copyright ...`; Lua 5.1's, as Redis embeds it,
/// is `$Lua: Lua 5.1.5 Copyright ...`).
fn lua_version(path: &Path) -> Option<Result<String, String>> {
    let cache = object::ReadCache::new(File::open(path).ok()?);
    let obj = object::File::parse(&cache).ok()?;
    let exported = |name: &str| {
        obj.dynamic_symbols()
            .find(|s| s.is_definition() && s.name() == Ok(name))
    };
    exported("lua_resume")?;
    let Some(ident) = exported("lua_ident") else {
        return Some(Err(
            "exports lua_resume but no lua_ident: not a Lua reqcost knows".into(),
        ));
    };
    let text = obj
        .sections()
        .find(|s| (s.address()..s.address() + s.size()).contains(&ident.address()))
        .and_then(|s| {
            let data = s.data().ok()?;
            let from = (ident.address() - s.address()) as usize;
            data.get(from..from + ident.size().min(200) as usize)
                .map(|b| String::from_utf8_lossy(b).into_owned())
        });
    let version = text.as_deref().and_then(|t| {
        let rest = t
            .strip_prefix("$LuaVersion: ")
            .or_else(|| t.strip_prefix("$Lua: "))?;
        let end = rest
            .find("  ")
            .or_else(|| rest.find(" Copyright"))
            .unwrap_or(rest.len());
        Some(rest[..end].to_string())
    });
    Some(version.ok_or_else(|| "its lua_ident names no version".to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This test binary is no Lua: nothing found, nothing said.
    #[test]
    fn a_process_without_lua_has_no_lua_core() {
        let found = find(&[std::process::id()]);
        assert!(
            found.known.is_empty() && found.unknown.is_empty(),
            "{found:?}"
        );
    }

    /// A Lua 5.3 interpreter (scripts/bootstrap installs Debian's) is found and named as one
    /// reqcost cannot walk.
    #[test]
    fn another_lua_version_is_named_and_not_walked() {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut lua = Command::new("lua5.3")
            .args(["-e", "print('ready') io.read()"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("lua5.3 runs (scripts/bootstrap installs it)");
        // Once it prints, its executable is mapped (spawn may return while exec is under way).
        let mut line = String::new();
        std::io::BufReader::new(lua.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("lua5.3 prints");
        let found = find(&[lua.id()]);
        drop(lua.stdin.take());
        let _ = lua.wait();
        assert!(found.known.is_empty(), "{found:?}");
        assert_eq!(
            found.unknown,
            ["lua5.3 (/usr/bin/lua5.3) is Lua 5.3.6, and reqcost knows the structure layouts of Lua 5.4.4 only"]
        );
    }

    /// Debian's lua5.4 (scripts/bootstrap installs it) is Lua 5.4.4; a shell is no Lua.
    #[test]
    fn debian_lua_is_the_known_version() {
        assert_eq!(
            lua_version(Path::new("/usr/bin/lua5.4")),
            Some(Ok(KNOWN_VERSION.to_string()))
        );
        assert_eq!(lua_version(Path::new("/bin/sh")), None);
    }

    /// Debian's redis-server (a link to redis-check-rdb) embeds Lua 5.1: named by the process's
    /// own name and its version, not by the file the link points to alone.
    #[test]
    fn redis_is_named_by_its_process_and_its_lua_version() {
        use std::process::Command;
        let mut redis = Command::new("redis-server")
            .args(["--port", "0", "--save", ""])
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("redis-server runs");
        // Spawn may return while exec is under way: wait for the executable's mapping.
        let maps = format!("/proc/{}/maps", redis.id());
        while !fs::read_to_string(&maps).is_ok_and(|m| m.contains("redis-check-rdb")) {
            assert!(redis.try_wait().unwrap().is_none(), "redis-server exited");
            std::thread::yield_now();
        }
        let found = find(&[redis.id()]);
        let _ = redis.kill();
        let _ = redis.wait();
        assert_eq!(
            found.unknown,
            [
                "redis-server (/usr/bin/redis-check-rdb) is Lua 5.1.5, and reqcost knows the \
              structure layouts of Lua 5.4.4 only"
            ]
        );
    }
}
