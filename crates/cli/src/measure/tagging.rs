//! Call-chain samples charged to requests: the probes tag each sample with the request its
//! thread serves (docs/profile.md, "Per request class"), and the requests that ended name the
//! tags' class, client, speed bucket and phase.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};

use reqcost_analysis::requests::speed_label;
use reqcost_probes::{LuaWalks, Probes, SampleServed, SampleTags};
use reqcost_profile::{LuaCall, LuaStack, Sampler, Served, Tagger};
use reqcost_record::{Profile, RequestEvent, SampleTag, Stack, IN_FLIGHT};

struct ProbeTagger {
    tags: SampleTags,
    /// The Lua stacks the probes walk, when the server runs a Lua they can walk.
    lua: Option<LuaWalks>,
}

impl Tagger for ProbeTagger {
    fn served(&mut self, pid: u32, tid: u32, time_ns: u64) -> Served {
        match self.tags.served(tid, time_ns) {
            SampleServed::Unknown => Served::Unknown,
            SampleServed::Nothing => Served::Nothing,
            SampleServed::Request { conn_id, seq } => Served::Request { pid, conn_id, seq },
            SampleServed::Held { stretch } => Served::Held { pid, tid, stretch },
        }
    }

    fn lua(&mut self, tid: u32, time_ns: u64) -> Option<LuaStack> {
        let walk = self.lua.as_ref()?.walk(tid, time_ns)?;
        Some(LuaStack {
            calls: walk
                .calls
                .iter()
                .map(|c| LuaCall {
                    proto: c.proto,
                    pc: c.pc,
                    callstatus: c.callstatus,
                    state: c.state,
                })
                .collect(),
            truncated: walk.truncated,
        })
    }

    fn claimed(&mut self, held: Served) -> Option<Served> {
        let Served::Held { pid, tid, stretch } = held else {
            return None;
        };
        let (conn_id, seq) = self.tags.claimed(tid, stretch)?;
        Some(Served::Request { pid, conn_id, seq })
    }
}

/// Has the probes tag the sampler's samples, and walk the Lua stacks of a Lua server (`root`'s
/// tree); a note says why not when they cannot.
pub(super) fn tag_samples(probes: &Probes, sampler: &Sampler, root: u32, notes: &mut Vec<String>) {
    let tags = match probes.tag_samples(sampler.perf_fds()) {
        Ok(tags) => tags,
        Err(e) => {
            eprintln!("warning: call-chain samples not charged to requests: {e}");
            notes.push(format!("call-chain samples not charged to requests: {e}"));
            return;
        }
    };
    let lua = probes.lua_frames(root).unwrap_or_else(|e| {
        eprintln!("warning: Lua frames not available: {e}");
        notes.push(format!("Lua frames not available: {e}"));
        None
    });
    sampler.tag_with(Box::new(ProbeTagger { tags, lua }));
}

/// What each request that ended was, by `PID/CONNECTION/INDEX` (as the profile names them).
#[derive(Default)]
pub(super) struct RequestLabels(RefCell<HashMap<String, SampleTag>>);

impl RequestLabels {
    pub fn add(&self, ev: &RequestEvent, class: &str, phase: &str) {
        let tag = SampleTag {
            class: class.to_string(),
            client: ev.peer.ip().to_canonical().to_string(),
            speed: speed_label(ev).to_string(),
            phase: phase.to_string(),
            request: String::new(),
        };
        self.0.borrow_mut().insert(ev.id(), tag);
    }

    /// Names the profile's requests and merges the stacks that then share a tag. A request in
    /// `keep` (the phases' costliest) keeps its id, so its own chains stay apart; so does a
    /// request no phase reported, which is in flight.
    pub fn name(self, profile: &mut Profile, keep: &HashSet<&str>) {
        let labels = self.0.into_inner();
        let mut tags: Vec<SampleTag> = Vec::new();
        let mut ids: HashMap<SampleTag, u32> = HashMap::new();
        let renamed: Vec<u32> = std::mem::take(&mut profile.tags)
            .into_iter()
            .map(|t| {
                let named = if !t.class.is_empty() {
                    t
                } else if let Some(l) = labels.get(&t.request) {
                    SampleTag {
                        request: if keep.contains(t.request.as_str()) {
                            t.request
                        } else {
                            String::new()
                        },
                        ..l.clone()
                    }
                } else {
                    SampleTag {
                        class: IN_FLIGHT.into(),
                        ..t
                    }
                };
                *ids.entry(named.clone()).or_insert_with(|| {
                    tags.push(named);
                    tags.len() as u32 - 1
                })
            })
            .collect();
        let mut merged: HashMap<(Vec<u32>, String, Option<u32>), u64> = HashMap::new();
        for s in std::mem::take(&mut profile.stacks) {
            let tag = s.tag.map(|t| renamed[t as usize]);
            *merged.entry((s.frames, s.thread, tag)).or_insert(0) += s.count;
        }
        profile.stacks = merged
            .into_iter()
            .map(|((frames, thread, tag), count)| Stack {
                frames,
                thread,
                count,
                tag,
            })
            .collect();
        profile.stacks.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.thread.cmp(&b.thread))
                .then_with(|| a.frames.cmp(&b.frames))
                .then_with(|| a.tag.cmp(&b.tag))
        });
        profile.tags = tags;
    }
}
