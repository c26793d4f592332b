//! A gzipped pprof protobuf (profile.proto) of one run's call chains: values `samples/count` and
//! `cpu/nanoseconds`; inlined frames share a location with one line each; thread names as the
//! `thread` label, and what the thread served as the `class`, `client`, `speed`, `phase` and
//! `request` labels (`go tool pprof -tagfocus class=/blog`). Read by `go tool pprof` and
//! Pyroscope.

use std::collections::HashMap;
use std::io::Write;

use reqcost_analysis::profile::{key, FnKey};
use reqcost_record::{Profile, Stack, Target, TAG_KEYS};

use super::{Exporter, Subject};

pub struct Pprof;

impl Exporter for Pprof {
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String> {
        let profile = subject.profile()?;
        let program = match subject {
            Subject::Run(reading) => program(reading.run.target),
            _ => None,
        };
        gzipped(profile, program)
    }
}

/// The gzipped profile message of `p`; `program` names the server's binary.
pub(super) fn gzipped(p: &Profile, program: Option<&str>) -> Result<Vec<u8>, String> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let compressed = gz.write_all(&pprof_bytes(p, program));
    compressed
        .and_then(|()| gz.finish())
        .map_err(|e| e.to_string())
}

/// The file name of the measured server's binary: the launched command's, or the name of the
/// attached process (which the kernel cuts to 15 bytes).
pub(super) fn program(target: &Target) -> Option<&str> {
    match &target.command {
        Some(c) => c.first().map(|p| p.rsplit('/').next().unwrap_or(p)),
        None => Some(target.comm.as_str()),
    }
}

/// The uncompressed profile message; `program` names the server's binary.
fn pprof_bytes(p: &Profile, program: Option<&str>) -> Vec<u8> {
    let mut strings = Strings::default();
    let mut out = Vec::new();
    let [samples, count, cpu, nanos] =
        ["samples", "count", "cpu", "nanoseconds"].map(|s| strings.id(s));
    for (t, u) in [(samples, count), (cpu, nanos)] {
        pb::message(&mut out, 1, &value_type(t, u));
    }
    let mappings = Mappings::of(p, program, &mut strings);
    let functions = Functions::of(p, &mut strings);
    let mut locations = Locations::default();
    for s in &p.stacks {
        let ids = locations.of_stack(p, s, &mappings, &functions);
        let mut m = Vec::new();
        pb::packed(&mut m, 1, &ids);
        pb::packed(&mut m, 2, &[s.count, s.count * p.period_ns]);
        let tag = s.tag.and_then(|t| p.tags.get(t as usize));
        let labels = tag.into_iter().flat_map(|t| {
            TAG_KEYS
                .iter()
                .filter_map(move |k| Some((*k, t.get(k)?)))
                .filter(|(_, v)| !v.is_empty())
        });
        for (k, v) in [("thread", s.thread.as_str())].into_iter().chain(labels) {
            let mut label = Vec::new();
            pb::uint(&mut label, 1, strings.id(k));
            pb::uint(&mut label, 2, strings.id(v));
            pb::message(&mut m, 3, &label);
        }
        pb::message(&mut out, 2, &m);
    }
    out.extend_from_slice(&mappings.msgs);
    out.extend_from_slice(&locations.msgs);
    out.extend_from_slice(&functions.msgs);
    for s in &strings.list {
        pb::bytes(&mut out, 6, s.as_bytes());
    }
    pb::uint(&mut out, 10, (p.duration_s * 1e9) as u64);
    pb::message(&mut out, 11, &value_type(cpu, nanos));
    pb::uint(&mut out, 12, p.period_ns);
    out
}

fn value_type(t: u64, u: u64) -> Vec<u8> {
    let mut m = Vec::new();
    pb::uint(&mut m, 1, t);
    pb::uint(&mut m, 2, u);
    m
}

/// One mapping per module, the server's binary first: pprof names the profile after its first
/// mapping, and Pyroscope takes mapping 1 for the main binary. Without a module of that name
/// (a record from before, a stripped path), the root of the first user chain stands in; that
/// root is often libc's start routine, hence the name first.
struct Mappings<'a> {
    ids: HashMap<&'a str, u64>,
    msgs: Vec<u8>,
}

impl<'a> Mappings<'a> {
    fn of(p: &'a Profile, program: Option<&str>, strings: &mut Strings) -> Mappings<'a> {
        // A process name is cut to 15 bytes (TASK_COMM_LEN): then it is a prefix.
        let is_program = |module: &str, name: &str| {
            module == name || (name.len() == 15 && module.starts_with(name))
        };
        let named = program.and_then(|name| {
            p.frames
                .iter()
                .find(|f| !f.kernel && is_program(&f.module, name))
        });
        let main_module = named
            .or_else(|| {
                let root = p.stacks.first()?.frames.last()?;
                Some(&p.frames[*root as usize]).filter(|f| !f.kernel)
            })
            .map(|f| f.module.as_str());
        let modules = main_module
            .into_iter()
            .chain(p.frames.iter().map(|f| f.module.as_str()));
        let mut mappings = Mappings {
            ids: HashMap::new(),
            msgs: Vec::new(),
        };
        for module in modules {
            let next = mappings.ids.len() as u64 + 1;
            mappings.ids.entry(module).or_insert_with(|| {
                let mut m = Vec::new();
                pb::uint(&mut m, 1, next);
                pb::uint(&mut m, 5, strings.id(module));
                pb::uint(&mut m, 7, 1); // has_functions: symbolized already
                pb::uint(&mut m, 10, 1); // has_inline_frames
                pb::message(&mut mappings.msgs, 3, &m);
                next
            });
        }
        mappings
    }
}

/// One function per (name, module), and the function of every frame.
struct Functions {
    of_frame: Vec<u64>,
    msgs: Vec<u8>,
}

impl Functions {
    fn of(p: &Profile, strings: &mut Strings) -> Functions {
        let mut ids: HashMap<FnKey<'_>, u64> = HashMap::new();
        let mut msgs = Vec::new();
        let of_frame = p
            .frames
            .iter()
            .map(|f| {
                let next = ids.len() as u64 + 1;
                *ids.entry(key(f)).or_insert_with(|| {
                    let mut m = Vec::new();
                    pb::uint(&mut m, 1, next);
                    pb::uint(&mut m, 2, strings.id(&f.function));
                    pb::uint(&mut m, 3, strings.id(&f.function));
                    pb::message(&mut msgs, 5, &m);
                    next
                })
            })
            .collect();
        Functions { of_frame, msgs }
    }
}

/// Locations: a run of inlined frames plus the function they sit in, each made once.
#[derive(Default)]
struct Locations {
    ids: HashMap<Vec<u32>, u64>,
    msgs: Vec<u8>,
}

impl Locations {
    /// The location ids of a stack, leaf first.
    fn of_stack(
        &mut self,
        p: &Profile,
        s: &Stack,
        mappings: &Mappings,
        functions: &Functions,
    ) -> Vec<u64> {
        let mut ids = Vec::new();
        let mut run: Vec<u32> = Vec::new();
        for (i, &f) in s.frames.iter().enumerate() {
            run.push(f);
            let last = i + 1 == s.frames.len();
            if p.frames[f as usize].inlined && !last {
                continue;
            }
            let next = self.ids.len() as u64 + 1;
            let msgs = &mut self.msgs;
            let id = *self.ids.entry(run.clone()).or_insert_with(|| {
                let mut m = Vec::new();
                pb::uint(&mut m, 1, next);
                pb::uint(
                    &mut m,
                    2,
                    mappings.ids[p.frames[f as usize].module.as_str()],
                );
                for &r in &run {
                    let mut line = Vec::new();
                    pb::uint(&mut line, 1, functions.of_frame[r as usize]);
                    pb::message(&mut m, 4, &line);
                }
                pb::message(msgs, 4, &m);
                next
            });
            ids.push(id);
            run.clear();
        }
        ids
    }
}

/// pprof's string table: index 0 is the empty string.
struct Strings {
    list: Vec<String>,
    ids: HashMap<String, u64>,
}

impl Default for Strings {
    fn default() -> Self {
        Strings {
            list: vec![String::new()],
            ids: HashMap::from([(String::new(), 0)]),
        }
    }
}

impl Strings {
    fn id(&mut self, s: &str) -> u64 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.list.len() as u64;
        self.list.push(s.to_string());
        self.ids.insert(s.to_string(), i);
        i
    }
}

/// The protobuf wire format, as much as profile.proto needs.
mod pb {
    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    /// A varint field; zero is the default and is left out.
    pub fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
        if v != 0 {
            varint(out, u64::from(field) << 3);
            varint(out, v);
        }
    }

    pub fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
        varint(out, u64::from(field) << 3 | 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }

    pub fn message(out: &mut Vec<u8>, field: u32, m: &[u8]) {
        bytes(out, field, m);
    }

    pub fn packed(out: &mut Vec<u8>, field: u32, vs: &[u64]) {
        let mut b = Vec::new();
        for &v in vs {
            varint(&mut b, v);
        }
        bytes(out, field, &b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_varints() {
        let mut v = Vec::new();
        pb::uint(&mut v, 1, 300);
        pb::uint(&mut v, 2, 0);
        pb::packed(&mut v, 3, &[1, 128]);
        assert_eq!(v, [0x08, 0xac, 0x02, 0x1a, 0x03, 0x01, 0x80, 0x01]);
    }
}
