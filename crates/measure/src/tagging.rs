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

/// What the sampler's thread and the labels share about the requests samples are charged to.
#[derive(Default)]
struct Folds {
    /// The requests some sample was charged to under their own id, not folded since.
    sampled: HashSet<RequestKey>,
    /// The requests that ended and will not be among the costliest, each with the stand-in of
    /// its label its samples are folded into: those that ended since the labels last turned,
    /// and in the turn before ([`SAMPLE_LAG`]).
    cheap: HashMap<RequestKey, RequestKey>,
    cheap_older: HashMap<RequestKey, RequestKey>,
}

type Shared = Arc<Mutex<Folds>>;

impl Folds {
    fn stand_in(&self, key: &RequestKey) -> Option<RequestKey> {
        self.cheap
            .get(key)
            .or_else(|| self.cheap_older.get(key))
            .copied()
    }

    /// Where a sample charged to `key` goes: its stand-in once it is known to be cheap.
    fn charged(&mut self, key: RequestKey) -> RequestKey {
        self.stand_in(&key).unwrap_or_else(|| {
            self.sampled.insert(key);
            key
        })
    }

    /// The stand-in of a sampled request that turned out cheap.
    fn fold(&mut self, key: &RequestKey) -> Option<RequestKey> {
        let to = self.stand_in(key)?;
        self.sampled.remove(key);
        Some(to)
    }
}

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Folds> {
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

struct ProbeTagger {
    tags: SampleTags,
    /// The Lua stacks the probes walk, when the server runs a Lua they can walk.
    lua: Option<LuaWalks>,
    shared: Shared,
}

impl ProbeTagger {
    fn sampled(&self, served: Served) -> Served {
        match served {
            Served::Request { pid, conn_id, seq } => {
                let (pid, conn_id, seq) = lock(&self.shared).charged((pid, conn_id, seq));
                Served::Request { pid, conn_id, seq }
            }
            _ => served,
        }
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

    fn folded(&mut self, request: Served) -> Option<Served> {
        let Served::Request { pid, conn_id, seq } = request else {
            return None;
        };
        let (pid, conn_id, seq) = lock(&self.shared).fold(&(pid, conn_id, seq))?;
        Some(Served::Request { pid, conn_id, seq })
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
    let shared = Shared::default();
    sampler.tag_with(Box::new(ProbeTagger {
        tags,
        lua,
        shared: Arc::clone(&shared),
    }));
    RequestLabels(Some(RefCell::new(Labels::new(shared))))
}

/// What each request that ended was, by pid, connection and index (the profile names them
/// `PID/CONNECTION/INDEX`), for the samples charged to it. Kept only while samples are charged
/// to requests, and then, so that memory stays flat however long the window, only for the
/// requests that ended within the last [`SAMPLE_LAG`] or two, whose samples the sampler's
/// thread may not have read yet, for the sampled ones that may be among the costliest, and
/// for one stand-in per label: the samples of a request that will not be among the costliest
/// are folded into its label's stand-in, in the sampler's thread ([`Folds`]). A request
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
    shared: Shared,
    /// Each label's stand-in: the first request of it that will not be among the costliest.
    stand_ins: Vec<Option<RequestKey>>,
    /// The labels of the stand-ins, and of requests a sample was charged to under their own id.
    kept: HashMap<RequestKey, u32>,
    /// Requests that ended since `turned`, and in the [`SAMPLE_LAG`] before.
    recent: HashMap<RequestKey, u32>,
    older: HashMap<RequestKey, u32>,
    /// Upstream requests that ended before the front request they served, by that front
    /// request, with their hop: labelled when it ends, since `turned` and in the lag before.
    /// Each with whether it will not be among its hop's costliest.
    waiting: HashMap<RequestKey, Vec<(RequestKey, u8, bool)>>,
    waiting_older: HashMap<RequestKey, Vec<(RequestKey, u8, bool)>>,
    turned: Instant,
}

impl Labels {
    fn new(shared: Shared) -> Labels {
        Labels {
            distinct: Vec::new(),
            find: HashMap::new(),
            shared,
            stand_ins: Vec::new(),
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
        self.stand_ins.push(None);
        known.push(distinct.len() as u32 - 1);
        distinct.len() as u32 - 1
    }

    /// Files request `key`, labelled `at`; when `cheap` (it will not be among the costliest),
    /// its samples go to its label's stand-in.
    fn add(&mut self, key: RequestKey, at: u32, cheap: bool) {
        self.recent.insert(key, at);
        if cheap {
            let to = *self.stand_ins[at as usize].get_or_insert_with(|| {
                self.kept.insert(key, at);
                key
            });
            lock(&self.shared).cheap.insert(key, to);
        }
    }

    /// Files upstream request `key` of hop `hop` under front request `front`'s label, or with
    /// no front class when there is none: the hop's own work. `cheap` as for [`Labels::add`].
    fn label_hop(&mut self, key: RequestKey, hop: u8, front: Option<u32>, cheap: bool) {
        let at = match front {
            Some(at) => {
                let (class, client, speed, phase, _) = self.distinct[at as usize].clone();
                self.index(&class, client, speed, (&phase, hop))
            }
            None => self.index(UNATTRIBUTED, NO_CLIENT, "", ("", hop)),
        };
        self.add(key, at, cheap);
    }

    /// Keeps the older requests' labels that a sample needs under their own id, and forgets
    /// the others. Upstream requests whose front request has not ended in two turns are the
    /// hop's own work.
    ///
    /// The tables turn by swapping and are emptied in place, keeping their room: a long attach
    /// holds each at its busiest turn's size instead of growing new ones every turn, whose
    /// freed predecessors the allocator may not hand back.
    fn turn(&mut self) {
        {
            let mut shared = lock(&self.shared);
            std::mem::swap(&mut self.older, &mut self.recent);
            self.kept.extend(
                self.recent
                    .drain()
                    .filter(|(key, _)| shared.sampled.contains(key)),
            );
            let shared = &mut *shared;
            std::mem::swap(&mut shared.cheap_older, &mut shared.cheap);
            shared.cheap.clear();
        }
        std::mem::swap(&mut self.waiting_older, &mut self.waiting);
        let mut gone = std::mem::take(&mut self.waiting);
        for (key, hop, cheap) in gone.drain().flat_map(|(_, v)| v) {
            self.label_hop(key, hop, None, cheap);
        }
        self.waiting = gone;
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
    /// Files a request that ended; `may_be_costliest` tells whether it may be among its
    /// phase's costliest, whose own chains the profile keeps apart. Names its samples by its
    /// `class`, client, speed and `phase`; an upstream hop's (`class` its hop's own) by the
    /// front request it served, once that one ended.
    pub fn add(&self, ev: &RequestEvent, class: &str, phase: &str, may_be_costliest: bool) {
        let Some(labels) = &self.0 else {
            return;
        };
        let labels = &mut *labels.borrow_mut();
        if labels.turned.elapsed() >= SAMPLE_LAG {
            labels.turn();
        }
        let key = (ev.pid, ev.conn_id, ev.seq);
        let cheap = !may_be_costliest;
        if ev.hop > 0 {
            let Some(front) = ev.caused_by.map(|r| (r.pid, r.conn_id, r.seq)) else {
                return labels.label_hop(key, ev.hop, None, cheap);
            };
            match labels.get(&front) {
                Some(at) => labels.label_hop(key, ev.hop, Some(at), cheap),
                None => labels
                    .waiting
                    .entry(front)
                    .or_default()
                    .push((key, ev.hop, cheap)),
            }
            return;
        }
        let client = ev.peer.ip().to_canonical();
        let at = labels.index(class, client, speed_label(ev), (phase, 0));
        labels.add(key, at, cheap);
        // The upstream requests that ended before it.
        let waiting = [
            labels.waiting.remove(&key),
            labels.waiting_older.remove(&key),
        ];
        for (hop_key, hop, hop_cheap) in waiting.into_iter().flatten().flatten() {
            labels.label_hop(hop_key, hop, Some(at), hop_cheap);
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
    Stack::sort(&mut stacks);
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

    fn labels() -> (RequestLabels, Shared) {
        let shared = Shared::default();
        let labels = RequestLabels(Some(RefCell::new(Labels::new(Arc::clone(&shared)))));
        (labels, shared)
    }

    #[test]
    fn requests_share_their_labels_and_are_named_by_id() {
        let (labels, _) = labels();
        labels.add(&event(1, 0, "10.0.0.1:5000"), "/a", "main", true);
        labels.add(&event(1, 1, "10.0.0.1:5000"), "/a", "main", true);
        labels.add(&event(2, 0, "10.0.0.2:5000"), "/b", "main", true);
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
        let (labels, shared) = labels();
        labels.add(&event(1, 0, "10.0.0.1:5000"), "/a", "main", true);
        labels.add(&event(1, 1, "10.0.0.1:5000"), "/a", "main", true);
        lock(&shared).charged((7, 1, 1));
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
        let (labels, shared) = labels();
        // The upstream's request ends before the front request it served, as an application
        // answers before the proxy's request ends; one served no front request; one served a
        // front request that never ends here.
        labels.add(&hop_event(5, 0, 2, Some((1, 0))), "EVAL", "main", true);
        labels.add(&hop_event(5, 1, 2, None), "PING", "main", true);
        labels.add(&hop_event(5, 2, 2, Some((9, 9))), "EVAL", "main", true);
        labels.add(&event(1, 0, "10.0.0.1:5000"), "GET /slow", "main", true);
        for key in [(9, 5, 0), (9, 5, 1), (9, 5, 2)] {
            lock(&shared).charged(key);
        }
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
        labels.add(&event(1, 0, "10.0.0.1:5000"), "/a", "main", true);
        assert!(labels.0.is_none());
    }

    /// The sampler's aggregate as it keeps samples: one entry per name a sample was kept
    /// under, each sampled request folded as the aggregate does every second.
    #[test]
    fn memory_stays_flat_however_many_requests_are_sampled() {
        let (labels, shared) = labels();
        let mut entries: HashSet<RequestKey> = HashSet::new();
        let (mut most_entries, mut most_kept, mut most_sampled) = (0, 0, 0);
        for i in 0..100_000u32 {
            let conn_id = u64::from(i % 64);
            // A sample is read while the request runs, its end and label come later; 1000 is
            // on connection 40.
            entries.insert(lock(&shared).charged((7, conn_id, i)));
            // Every 1000th is among the costliest so far.
            labels.add(
                &event(conn_id, i, "10.0.0.1:5000"),
                "/a",
                "main",
                i % 1000 == 0,
            );
            if i % 100 == 99 {
                let mut f = lock(&shared);
                entries = entries
                    .into_iter()
                    .map(|key| f.fold(&key).unwrap_or(key))
                    .collect();
            }
            if i % 10_000 == 9_999 {
                labels.0.as_ref().unwrap().borrow_mut().turn();
            }
            let l = labels.0.as_ref().unwrap().borrow();
            most_entries = most_entries.max(entries.len());
            most_kept = most_kept.max(l.kept.len());
            most_sampled = most_sampled.max(lock(&shared).sampled.len());
        }
        // The 100 costly ones and one stand-in, with the last round's not folded yet.
        assert!(most_entries <= 201, "{most_entries} entries");
        assert!(most_kept <= 101, "{most_kept} kept");
        assert!(most_sampled <= 200, "{most_sampled} sampled");

        // The cheap requests' samples went to the stand-in, which names them by their label;
        // a costly one keeps its own id.
        let mut profile = Profile {
            tags: vec![tagged(request_id(7, 1, 1)), tagged(request_id(7, 40, 1000))],
            ..Profile::default()
        };
        labels.name(&mut profile, &HashSet::from(["7/40/1000"]));
        let got: Vec<(&str, &str)> = profile
            .tags
            .iter()
            .map(|t| (t.class.as_str(), t.request.as_str()))
            .collect();
        assert_eq!(got, [("/a", ""), ("/a", "7/40/1000")]);
    }

    #[test]
    fn a_sample_read_after_its_request_ended_cheap_goes_to_the_stand_in() {
        let (labels, shared) = labels();
        labels.add(&event(1, 0, "10.0.0.1:5000"), "/a", "main", false);
        labels.add(&event(1, 1, "10.0.0.1:5000"), "/a", "main", false);
        labels.add(&event(1, 2, "10.0.0.1:5000"), "/a", "main", true);
        let mut f = lock(&shared);
        assert_eq!(f.charged((7, 1, 1)), (7, 1, 0));
        assert_eq!(f.charged((7, 1, 2)), (7, 1, 2));
        assert_eq!(f.fold(&(7, 1, 2)), None);
        assert_eq!(f.sampled, HashSet::from([(7, 1, 2)]));
    }
}
