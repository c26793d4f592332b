//! Call-chain samples charged to requests: the probes tag each sample with the request its
//! thread serves (docs/profile.md, "Per request class"), and the requests that ended name the
//! tags' class, client, speed bucket and phase.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqcost_analysis::requests::speed_label;
use reqcost_probes::{LuaWalks, Probes, SampleServed, SampleTags};
use reqcost_profile::{LuaStack, Sampler, Served, Tagger};
use reqcost_record::{
    parse_request_id, Profile, RequestEvent, SampleTag, Stack, IN_FLIGHT, UNATTRIBUTED,
};

/// A request by pid, connection and index, as events and samples name it.
type RequestKey = (u32, u64, u32);

/// The requests some sample was charged to, as the sampler's thread tags them.
type Sampled = Arc<Mutex<HashSet<RequestKey>>>;

struct ProbeTagger {
    tags: SampleTags,
    /// The Lua stacks the probes walk, when the server runs a Lua they can walk.
    lua: Option<LuaWalks>,
    sampled: Sampled,
}

impl ProbeTagger {
    fn sampled(&self, served: Served) -> Served {
        if let Served::Request { pid, conn_id, seq } = served {
            self.sampled
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert((pid, conn_id, seq));
        }
        served
    }
}

impl Tagger for ProbeTagger {
    fn served(&mut self, pid: u32, tid: u32, time_ns: u64) -> Served {
        self.sampled(match self.tags.served(tid, time_ns) {
            SampleServed::Unknown => Served::Unknown,
            SampleServed::Nothing => Served::Nothing,
            SampleServed::Request { conn_id, seq } => Served::Request { pid, conn_id, seq },
            SampleServed::Held { stretch } => Served::Held { pid, tid, stretch },
        })
    }

    fn lua(&mut self, tid: u32, time_ns: u64) -> Option<LuaStack> {
        self.lua.as_ref()?.walk(tid, time_ns)
    }

    fn claimed(&mut self, held: Served) -> Option<Served> {
        let Served::Held { pid, tid, stretch } = held else {
            return None;
        };
        let (conn_id, seq) = self.tags.claimed(tid, stretch)?;
        Some(self.sampled(Served::Request { pid, conn_id, seq }))
    }
}

/// Has the probes tag the sampler's samples, and walk the Lua stacks of a Lua server (`root`'s
/// tree); a note says why not when they cannot. Returns the labels the requests that end
/// give the tagged samples: none when the samples are not tagged.
pub(super) fn tag_samples(
    probes: &Probes,
    sampler: &Sampler,
    root: u32,
    notes: &mut Vec<String>,
) -> RequestLabels {
    let tags = match probes.tag_samples(sampler.perf_fds()) {
        Ok(tags) => tags,
        Err(e) => {
            eprintln!("warning: call-chain samples not charged to requests: {e}");
            notes.push(format!("call-chain samples not charged to requests: {e}"));
            return RequestLabels::default();
        }
    };
    let lua = match probes.lua_frames(root) {
        Ok(frames) => {
            notes.extend(frames.unwalked.iter().map(|why| {
                format!("Lua frames not walked: {why}; samples in its Lua code show the interpreter's native frames")
            }));
            frames.walks
        }
        Err(e) => {
            eprintln!("warning: Lua frames not available: {e}");
            notes.push(format!("Lua frames not available: {e}"));
            None
        }
    };
    let sampled = Sampled::default();
    sampler.tag_with(Box::new(ProbeTagger {
        tags,
        lua,
        sampled: Arc::clone(&sampled),
    }));
    RequestLabels(Some(RefCell::new(Labels::new(sampled))))
}

/// What each request that ended was, by pid, connection and index (the profile names them
/// `PID/CONNECTION/INDEX`), for the samples charged to it. Kept only while samples are charged
/// to requests, and then, so that memory stays flat however long the window, only for the
/// requests a sample was charged to and for those that ended within the last
/// [`SAMPLE_LAG`] or two, whose samples the sampler's thread may not have read yet. A request
/// holds an index into the distinct labels, not strings of its own: at tens of thousands of
/// requests a second, five strings per request were most of attach's own CPU.
#[derive(Default)]
pub(super) struct RequestLabels(Option<RefCell<Labels>>);

/// Longer than the sampler's thread takes to read a sample (a round of at most 100 ms plus
/// the unwinding): a request that ended longer ago than this and was in no sample is in none.
const SAMPLE_LAG: Duration = Duration::from_secs(5);

struct Labels {
    /// The distinct labels: class, client, speed bucket, phase, hop. An upstream hop's request
    /// takes the label of the front request it served, with its hop.
    distinct: Vec<(String, IpAddr, &'static str, String, u8)>,
    /// Indexes into `distinct` by client and speed bucket, which an event has without allocating.
    find: HashMap<(IpAddr, &'static str), Vec<u32>>,
    sampled: Sampled,
    /// The labels of requests a sample was charged to.
    kept: HashMap<RequestKey, u32>,
    /// Requests that ended since `turned`, and in the [`SAMPLE_LAG`] before.
    recent: HashMap<RequestKey, u32>,
    older: HashMap<RequestKey, u32>,
    /// Upstream requests that ended before the front request they served, by that front
    /// request, with their hop: labelled when it ends, since `turned` and in the lag before.
    waiting: HashMap<RequestKey, Vec<(RequestKey, u8)>>,
    waiting_older: HashMap<RequestKey, Vec<(RequestKey, u8)>>,
    turned: Instant,
}

impl Labels {
    fn new(sampled: Sampled) -> Labels {
        Labels {
            distinct: Vec::new(),
            find: HashMap::new(),
            sampled,
            kept: HashMap::new(),
            recent: HashMap::new(),
            older: HashMap::new(),
            waiting: HashMap::new(),
            waiting_older: HashMap::new(),
            turned: Instant::now(),
        }
    }

    /// The index of a label, added when new.
    fn index(
        &mut self,
        class: &str,
        client: IpAddr,
        speed: &'static str,
        (phase, hop): (&str, u8),
    ) -> u32 {
        let known = self.find.entry((client, speed)).or_default();
        let distinct = &mut self.distinct;
        if let Some(&i) = known.iter().find(|&&i| {
            let (c, _, _, p, h) = &distinct[i as usize];
            c == class && p == phase && *h == hop
        }) {
            return i;
        }
        distinct.push((class.to_string(), client, speed, phase.to_string(), hop));
        known.push(distinct.len() as u32 - 1);
        distinct.len() as u32 - 1
    }

    /// Labels upstream request `key` of hop `hop` with front request `front`'s label, or with
    /// no front class when there is none: the hop's own work.
    fn label_hop(&mut self, key: RequestKey, hop: u8, front: Option<u32>) {
        let at = match front {
            Some(at) => {
                let (class, client, speed, phase, _) = self.distinct[at as usize].clone();
                self.index(&class, client, speed, (&phase, hop))
            }
            None => self.index(UNATTRIBUTED, NO_CLIENT, "", ("", hop)),
        };
        self.recent.insert(key, at);
    }

    /// Keeps the older requests' labels that a sample needs, and forgets the others. Upstream
    /// requests whose front request has not ended in two turns are the hop's own work.
    fn turn(&mut self) {
        let older = std::mem::replace(&mut self.older, std::mem::take(&mut self.recent));
        {
            let sampled = self.sampled.lock().unwrap_or_else(|e| e.into_inner());
            self.kept
                .extend(older.into_iter().filter(|(key, _)| sampled.contains(key)));
        }
        let gone = std::mem::replace(&mut self.waiting_older, std::mem::take(&mut self.waiting));
        for (key, hop) in gone.into_values().flatten() {
            self.label_hop(key, hop, None);
        }
        self.turned = Instant::now();
    }

    fn get(&self, key: &RequestKey) -> Option<u32> {
        [&self.kept, &self.recent, &self.older]
            .into_iter()
            .find_map(|m| m.get(key).copied())
    }

    /// The label of the request `id` names, if it ended.
    fn tag(&self, id: &str) -> Option<SampleTag> {
        let at = self.get(&parse_request_id(id)?)?;
        let (class, client, speed, phase, hop) = &self.distinct[at as usize];
        Some(SampleTag {
            class: class.clone(),
            client: match client.is_unspecified() {
                true => String::new(),
                false => client.to_string(),
            },
            speed: (*speed).to_string(),
            phase: phase.clone(),
            request: String::new(),
            hop: *hop,
        })
    }
}

/// The client of an upstream request's label when it served no front request.
const NO_CLIENT: IpAddr = IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);

impl RequestLabels {
    /// Names request `ev`'s samples by its `class`, client, speed and `phase`; an upstream
    /// hop's (`class` its hop's own) by the front request it served, once that one ended.
    pub fn add(&self, ev: &RequestEvent, class: &str, phase: &str) {
        let Some(labels) = &self.0 else {
            return;
        };
        let labels = &mut *labels.borrow_mut();
        if labels.turned.elapsed() >= SAMPLE_LAG {
            labels.turn();
        }
        let key = (ev.pid, ev.conn_id, ev.seq);
        if ev.hop > 0 {
            let Some(front) = ev.caused_by.map(|r| (r.pid, r.conn_id, r.seq)) else {
                return labels.label_hop(key, ev.hop, None);
            };
            match labels.get(&front) {
                Some(at) => labels.label_hop(key, ev.hop, Some(at)),
                None => labels.waiting.entry(front).or_default().push((key, ev.hop)),
            }
            return;
        }
        let client = ev.peer.ip().to_canonical();
        let at = labels.index(class, client, speed_label(ev), (phase, 0));
        labels.recent.insert(key, at);
        // The upstream requests that ended before it.
        let waiting = [
            labels.waiting.remove(&key),
            labels.waiting_older.remove(&key),
        ];
        for (hop_key, hop) in waiting.into_iter().flatten().flatten() {
            labels.label_hop(hop_key, hop, Some(at));
        }
    }

    /// Names the profile's requests and merges the stacks that then share a tag. A request in
    /// `keep` (the phases' costliest) keeps its id, so its own chains stay apart; so does a
    /// request no phase reported, which is in flight.
    pub fn name(self, profile: &mut Profile, keep: &HashSet<&str>) {
        let labels = self.0.map(RefCell::into_inner);
        let mut tags: Vec<SampleTag> = Vec::new();
        let mut ids: HashMap<SampleTag, u32> = HashMap::new();
        let renamed: Vec<u32> = std::mem::take(&mut profile.tags)
            .into_iter()
            .map(|t| {
                let named = if !t.class.is_empty() {
                    t
                } else if let Some(l) = labels.as_ref().and_then(|l| l.tag(&t.request)) {
                    SampleTag {
                        request: if keep.contains(t.request.as_str()) {
                            t.request
                        } else {
                            String::new()
                        },
                        ..l
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
        profile.stacks = retagged(std::mem::take(&mut profile.stacks), &renamed);
        profile.hop_stacks = retagged(std::mem::take(&mut profile.hop_stacks), &renamed);
        profile.tags = tags;
    }
}

/// `stacks` with their tags renamed, those that then share a tag merged.
fn retagged(stacks: Vec<Stack>, renamed: &[u32]) -> Vec<Stack> {
    let mut merged: HashMap<(Vec<u32>, String, Option<u32>), u64> = HashMap::new();
    for s in stacks {
        let tag = s.tag.map(|t| renamed[t as usize]);
        *merged.entry((s.frames, s.thread, tag)).or_insert(0) += s.count;
    }
    let mut stacks: Vec<Stack> = merged
        .into_iter()
        .map(|((frames, thread, tag), count)| Stack {
            frames,
            thread,
            count,
            tag,
        })
        .collect();
    stacks.sort_by(|a, b| {
        b.count
            .cmp(&a.count)
            .then_with(|| a.thread.cmp(&b.thread))
            .then_with(|| a.frames.cmp(&b.frames))
            .then_with(|| a.tag.cmp(&b.tag))
    });
    stacks
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::{request_id, TlsPart};

    fn event(conn_id: u64, seq: u32, peer: &str) -> RequestEvent {
        RequestEvent {
            pid: 7,
            conn_id,
            seq,
            peer: peer.parse().unwrap(),
            local_port: 80,
            cpu_ns: 1000,
            syscalls: 3,
            top_syscalls: vec![("read".into(), 1)],
            bytes_in: 80,
            bytes_out: 1024,
            first_in_ns: 1,
            last_out_ns: 2,
            end_ns: 3,
            last_ns: 0,
            closed: false,
            tls: TlsPart::Plaintext,
            ..reqcost_testkit::request_event("GET / HTTP/1.1", "127.0.0.1")
        }
    }

    fn tagged(request: String) -> SampleTag {
        SampleTag {
            request,
            ..SampleTag::default()
        }
    }

    fn labels() -> (RequestLabels, Sampled) {
        let sampled = Sampled::default();
        let labels = RequestLabels(Some(RefCell::new(Labels::new(Arc::clone(&sampled)))));
        (labels, sampled)
    }

    #[test]
    fn requests_share_their_labels_and_are_named_by_id() {
        let (labels, _) = labels();
        labels.add(&event(1, 0, "10.0.0.1:5000"), "/a", "main");
        labels.add(&event(1, 1, "10.0.0.1:5000"), "/a", "main");
        labels.add(&event(2, 0, "10.0.0.2:5000"), "/b", "main");
        assert_eq!(labels.0.as_ref().unwrap().borrow().distinct.len(), 2);

        let mut profile = Profile {
            tags: vec![
                tagged(request_id(7, 1, 1)),
                tagged(request_id(7, 2, 0)),
                tagged(request_id(7, 3, 0)),
            ],
            ..Profile::default()
        };
        labels.name(&mut profile, &HashSet::from(["7/2/0"]));
        let got: Vec<(&str, &str, &str)> = profile
            .tags
            .iter()
            .map(|t| (t.class.as_str(), t.client.as_str(), t.request.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                ("/a", "10.0.0.1", ""),
                ("/b", "10.0.0.2", "7/2/0"),
                (IN_FLIGHT, "", "7/3/0")
            ]
        );
        assert_eq!(profile.tags[0].phase, "main");
    }

    #[test]
    fn only_sampled_requests_outlive_the_sampler_lag() {
        let (labels, sampled) = labels();
        labels.add(&event(1, 0, "10.0.0.1:5000"), "/a", "main");
        labels.add(&event(1, 1, "10.0.0.1:5000"), "/a", "main");
        sampled.lock().unwrap().insert((7, 1, 1));
        let key = |seq| (7, 1, seq);
        let mut l = labels.0.as_ref().unwrap().borrow_mut();
        l.turn();
        assert!(l.get(&key(0)).is_some() && l.get(&key(1)).is_some());
        l.turn();
        assert_eq!((l.get(&key(0)), l.get(&key(1))), (None, Some(0)));
        assert_eq!((l.recent.len(), l.older.len(), l.kept.len()), (0, 0, 1));
    }

    fn hop_event(conn_id: u64, seq: u32, hop: u8, front: Option<(u64, u32)>) -> RequestEvent {
        RequestEvent {
            pid: 9,
            hop,
            caused_by: front.map(|(conn_id, seq)| reqcost_record::RequestRef {
                pid: 7,
                conn_id,
                seq,
            }),
            ..event(conn_id, seq, "127.0.0.1:6000")
        }
    }

    #[test]
    fn a_hops_samples_take_the_front_request_they_served() {
        let (labels, sampled) = labels();
        // The upstream's request ends before the front request it served, as an application
        // answers before the proxy's request ends; one served no front request; one served a
        // front request that never ends here.
        labels.add(&hop_event(5, 0, 2, Some((1, 0))), "EVAL", "main");
        labels.add(&hop_event(5, 1, 2, None), "PING", "main");
        labels.add(&hop_event(5, 2, 2, Some((9, 9))), "EVAL", "main");
        labels.add(&event(1, 0, "10.0.0.1:5000"), "GET /slow", "main");
        sampled
            .lock()
            .unwrap()
            .extend([(9, 5, 0), (9, 5, 1), (9, 5, 2)]);
        {
            let mut l = labels.0.as_ref().unwrap().borrow_mut();
            l.turn();
            l.turn();
            assert!(l.waiting.is_empty() && l.waiting_older.is_empty());
        }
        let mut profile = Profile {
            tags: [0, 1, 2]
                .map(|seq| SampleTag {
                    hop: 2,
                    ..tagged(request_id(9, 5, seq))
                })
                .to_vec(),
            ..Profile::default()
        };
        labels.name(&mut profile, &HashSet::from(["9/5/0"]));
        let got: Vec<(&str, &str, &str, &str, u8)> = profile
            .tags
            .iter()
            .map(|t| {
                (
                    t.class.as_str(),
                    t.client.as_str(),
                    t.phase.as_str(),
                    t.request.as_str(),
                    t.hop,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("GET /slow", "10.0.0.1", "main", "9/5/0", 2),
                (UNATTRIBUTED, "", "", "", 2)
            ]
        );
    }

    #[test]
    fn without_tagging_nothing_is_kept() {
        let labels = RequestLabels::default();
        labels.add(&event(1, 0, "10.0.0.1:5000"), "/a", "main");
        assert!(labels.0.is_none());
    }
}
