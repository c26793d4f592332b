//! The hottest code of a group of tagged samples: a request class's, or one costliest request's
//! (docs/profile.md, "Per request class"). One home for what the summary prints, the analysis
//! JSON carries and the findings quote for the classes that carry them.

use serde::{Deserialize, Serialize};

use reqcost_record::{Profile, RunRecord, SampleTag, Stack};

use crate::profile::{callers, function_counts, is_probe_frame, key, trunk, FnKey, View};
use crate::tagged::{select, split, TagFilter, UNTAGGED};

/// Classes described, most samples first.
pub const TOP_CLASSES: usize = 5;
/// Costliest requests whose own chains are described, in the costliest lists' order.
pub const TOP_REQUESTS: usize = 10;
/// Functions listed per group, by self and by total samples.
pub const GROUP_FUNCTIONS: usize = 5;
/// Callers kept with each function, nearest first.
const CALLER_DEPTH: usize = 4;

/// A group's samples and where they went.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct GroupCode {
    /// The class, or the request's `PID/CONNECTION/INDEX`.
    pub name: String,
    pub samples: u64,
    /// On-CPU time the samples stand for (samples × period), nanoseconds.
    pub sampled_ns: u64,
    /// Samples whose chain runs through the eBPF probes' programs: reqcost's cost, not the
    /// group's, left out of `by_self` and `by_total`.
    #[serde(default)]
    pub probe_samples: u64,
    /// Functions with most samples as the leaf, each with its most frequent callers.
    pub by_self: Vec<HotFunction>,
    /// Functions with most samples anywhere in the chain, the run's start-up and main-loop
    /// frames left out (as in the summary's inclusive list).
    pub by_total: Vec<HotFunction>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HotFunction {
    pub function: String,
    pub module: String,
    pub kernel: bool,
    pub samples: u64,
    /// Share of the group's samples (0..1).
    pub share: f64,
    /// The most frequent chain of callers of its self samples, nearest first (by_self only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callers: Vec<String>,
}

impl HotFunction {
    /// `share` in %.
    pub fn share_pct(&self) -> f64 {
        self.share * 100.0
    }
}

impl GroupCode {
    /// What one group's samples ran; `scaffolding` is the whole run's [`trunk`] (start-up and
    /// main loop), left out of `by_total`. The group's own trunk would be its own code: all of
    /// a class's samples run through its handler.
    pub fn of(name: &str, group: &Profile, scaffolding: &[FnKey<'_>]) -> GroupCode {
        let (g, probe_samples) = &without_probes(group);
        let counts = function_counts(g);
        let share = |n: u64| n as f64 / group.samples.max(1) as f64;
        let mut ranked: Vec<_> = counts.iter().collect();
        ranked.sort_by(|a, b| {
            b.1.self_samples
                .cmp(&a.1.self_samples)
                .then_with(|| a.0.cmp(b.0))
        });
        let by_self = ranked
            .iter()
            .filter(|(_, c)| c.self_samples > 0)
            .take(GROUP_FUNCTIONS)
            .map(|(k, c)| {
                let chain = callers(g, View::All, |fr| key(fr) == **k, CALLER_DEPTH);
                HotFunction {
                    function: k.0.to_string(),
                    module: k.1.to_string(),
                    kernel: c.kernel,
                    samples: c.self_samples,
                    share: share(c.self_samples),
                    callers: chain
                        .first()
                        .map(|(frames, _)| frames.iter().map(|f| f.function.clone()).collect())
                        .unwrap_or_default(),
                }
            })
            .collect();
        ranked.sort_by(|a, b| {
            b.1.total_samples
                .cmp(&a.1.total_samples)
                .then_with(|| a.0.cmp(b.0))
        });
        let by_total = ranked
            .iter()
            .filter(|(k, _)| !scaffolding.contains(k))
            .take(GROUP_FUNCTIONS)
            .map(|(k, c)| HotFunction {
                function: k.0.to_string(),
                module: k.1.to_string(),
                kernel: c.kernel,
                samples: c.total_samples,
                share: share(c.total_samples),
                callers: Vec::new(),
            })
            .collect();
        GroupCode {
            name: name.to_string(),
            samples: group.samples,
            sampled_ns: group.samples * group.period_ns,
            probe_samples: *probe_samples,
            by_self,
            by_total,
        }
    }

    /// `burn_a 92 % self (← handle ← main), memcpy 3 %`: the group's hottest code in one line.
    pub fn describe(&self, functions: usize) -> String {
        let mut parts: Vec<String> = self
            .by_self
            .iter()
            .take(functions)
            .enumerate()
            .map(|(i, f)| {
                let via = if i == 0 && !f.callers.is_empty() {
                    format!(" (← {})", f.callers.join(" ← "))
                } else {
                    String::new()
                };
                format!("{} {:.0} % self{via}", f.function, f.share * 100.0)
            })
            .collect();
        if self.probe_samples > 0 {
            parts.push(format!(
                "eBPF probes (reqcost's own) {:.0} %",
                100.0 * self.probe_samples as f64 / self.samples.max(1) as f64
            ));
        }
        parts.join(", ")
    }
}

/// `p` without the chains through the probes' programs, and their samples: those are
/// reqcost's cost wherever their leaf is (a helper, a lock the program took), not the code's.
/// `samples` stays the whole's, so shares stay shares of all the group's samples.
pub fn without_probes(p: &Profile) -> (Profile, u64) {
    let (probes, code): (Vec<_>, Vec<_>) = p.stacks.iter().cloned().partition(|s| {
        s.frames.iter().any(|&i| {
            p.frames
                .get(i as usize)
                .is_some_and(|f| f.kernel && is_probe_frame(&f.function))
        })
    });
    let probe_samples = probes.iter().map(|s| s.count).sum();
    let code = Profile {
        stacks: code,
        ..p.clone()
    };
    (code, probe_samples)
}

/// The hottest code of the [`TOP_CLASSES`] classes with most samples; empty when the samples
/// carry no tags.
pub fn classes(p: &Profile) -> Vec<GroupCode> {
    let Ok(groups) = split(p, "class") else {
        return Vec::new();
    };
    let scaffolding = trunk(p);
    groups
        .iter()
        .filter(|(c, _)| c != UNTAGGED)
        .take(TOP_CLASSES)
        .map(|(c, g)| GroupCode::of(c, g, &scaffolding))
        .collect()
}

/// The hottest code of one class, when the samples are tagged and some are the class's.
pub fn class(p: &Profile, class: &str) -> Option<GroupCode> {
    let filter = TagFilter {
        key: "class".into(),
        value: class.into(),
    };
    let g = select(p, &[filter]).ok().filter(|g| g.samples > 0)?;
    Some(GroupCode::of(class, &g, &trunk(p)))
}

/// The own chains of the requests `ids` names (the costliest first), the first
/// [`TOP_REQUESTS`] that have samples.
pub fn requests<'a>(p: &Profile, ids: impl IntoIterator<Item = &'a str>) -> Vec<GroupCode> {
    let Ok(groups) = split(p, "request") else {
        return Vec::new();
    };
    let scaffolding = trunk(p);
    let mut out = Vec::new();
    for id in ids {
        if out.len() == TOP_REQUESTS {
            break;
        }
        if id.is_empty() || out.iter().any(|g: &GroupCode| g.name == id) {
            continue;
        }
        if let Some((_, g)) = groups.iter().find(|(name, _)| name == id) {
            out.push(GroupCode::of(id, g, &scaffolding));
        }
    }
    out
}

/// The upstream hops' samples (`Profile::hop_stacks`) as a profile of their own, those whose
/// tag `keep` accepts: their functions ranked as a tree's.
pub fn hops(p: &Profile, keep: impl Fn(&SampleTag) -> bool) -> Profile {
    let stacks: Vec<Stack> = p
        .hop_stacks
        .iter()
        .filter(|s| {
            s.tag
                .and_then(|t| p.tags.get(t as usize))
                .is_some_and(&keep)
        })
        .cloned()
        .collect();
    Profile {
        samples: stacks.iter().map(|s| s.count).sum(),
        stacks,
        hop_stacks: Vec::new(),
        ..p.clone()
    }
}

/// The hottest code hop `hop` ran for front class `class`'s requests of phase `phase`, when
/// its samples are there (docs/stack.md, "Call chains per hop"). Its start-up and main loop
/// are those of the hop's other samples: a database busy with one class's slow query has
/// that query's frames in nearly every sample, which would make them the tree's trunk.
pub fn hop_class(p: &Profile, hop: u8, phase: &str, class: &str) -> Option<GroupCode> {
    let of_class = |t: &SampleTag| t.hop == hop && t.phase == phase && t.class == class;
    let rest = hops(p, |t| t.hop == hop && !of_class(t));
    let g = hops(p, of_class);
    (g.samples > 0).then(|| GroupCode::of(class, &g, &trunk(&rest)))
}

/// The own chains of the run's costliest requests (every phase's plausible ones, most CPU
/// first): "this request took 23 ms, here is where".
pub fn costliest(rec: &RunRecord) -> Vec<GroupCode> {
    let Some(p) = rec.profile.as_ref() else {
        return Vec::new();
    };
    let mut costly: Vec<_> = rec
        .phases
        .iter()
        .filter_map(|ph| ph.requests.as_ref())
        .flat_map(|r| &r.costliest)
        .collect();
    costly.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then_with(|| a.id.cmp(&b.id)));
    requests(p, costly.iter().map(|c| c.id.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::{Frame, SampleTag, Stack};

    fn frame(f: &str, kernel: bool) -> Frame {
        Frame {
            function: f.into(),
            module: if kernel { "[kernel.kallsyms]" } else { "srv" }.into(),
            kernel,
            inlined: false,
            resolved: true,
        }
    }

    /// Class /a burns in burn_a (and 1 sample in a lock a probe took), /b in burn_b; request
    /// 7/1/0 is /a's.
    fn profile() -> Profile {
        let stack = |frames: Vec<u32>, count, tag| Stack {
            frames,
            thread: "srv".into(),
            count,
            tag: Some(tag),
        };
        let tag = |c: &str, r: &str| SampleTag {
            class: c.into(),
            request: r.into(),
            ..SampleTag::default()
        };
        Profile {
            period_ns: 1_000_000,
            frames: vec![
                frame("burn_a", false),
                frame("burn_b", false),
                frame("handle", false),
                frame("main", false),
                frame("bpf_prog_1234_tag_sample", true),
                frame("__rcu_read_unlock", true),
            ],
            stacks: vec![
                stack(vec![0, 2, 3], 8, 0),
                stack(vec![0, 2, 3], 2, 2),
                stack(vec![5, 4, 2, 3], 1, 0),
                stack(vec![1, 2, 3], 4, 1),
            ],
            samples: 15,
            tags: vec![tag("/a", ""), tag("/b", ""), tag("/a", "7/1/0")],
            ..Profile::default()
        }
    }

    #[test]
    fn each_class_names_its_own_hot_code_and_the_probes_apart() {
        let p = profile();
        let c = classes(&p);
        let names: Vec<(&str, u64)> = c.iter().map(|g| (g.name.as_str(), g.samples)).collect();
        assert_eq!(names, [("/a", 11), ("/b", 4)]);
        let a = &c[0];
        assert_eq!(a.sampled_ns, 11_000_000);
        assert_eq!(a.probe_samples, 1);
        assert_eq!(a.by_self.len(), 1);
        assert_eq!(a.by_self[0].function, "burn_a");
        assert_eq!(a.by_self[0].samples, 10);
        assert_eq!(a.by_self[0].callers, ["handle", "main"]);
        assert!(a.by_total.iter().any(|f| f.function == "burn_a"), "{a:?}");
        assert!(a.by_total.iter().all(|f| ![
            "burn_b",
            "__rcu_read_unlock",
            "bpf_prog_1234_tag_sample"
        ]
        .contains(&f.function.as_str())));
        assert_eq!(
            a.describe(3),
            "burn_a 91 % self (← handle ← main), eBPF probes (reqcost's own) 9 %"
        );
        assert_eq!(c[1].by_self[0].function, "burn_b");
        assert_eq!(class(&p, "/b").unwrap(), c[1]);
        assert!(class(&p, "/c").is_none());
    }

    /// The uprobes' traps in the server's threads (the return trampoline's uretprobe syscall,
    /// the breakpoint's single step and its resume) are the probes' cost: no class's own code.
    #[test]
    fn the_uprobes_traps_are_the_probes_not_the_class() {
        let trap = |frames: Vec<u32>, count| Stack {
            frames,
            thread: "srv".into(),
            count,
            tag: Some(0),
        };
        let p = Profile {
            period_ns: 1_000_000,
            frames: vec![
                frame("SSL_write", false),
                frame("handle", false),
                frame("__do_sys_uretprobe", true),
                frame("do_syscall_64", true),
                frame("entry_SYSCALL_64", true),
                frame("exc_debug_user", true),
                frame("asm_exc_debug", true),
                frame("uprobe_notify_resume", true),
                frame("arch_uprobe_post_xol", true),
                frame("handle_swbp", true),
            ],
            stacks: vec![
                trap(vec![0, 1], 5),
                trap(vec![3, 2, 3, 4, 0, 1], 3),
                trap(vec![5, 6, 0, 1], 2),
                trap(vec![8, 7, 0, 1], 1),
                trap(vec![9, 0, 1], 1),
            ],
            samples: 12,
            tags: vec![SampleTag {
                class: "/tls".into(),
                ..SampleTag::default()
            }],
            ..Profile::default()
        };
        let c = classes(&p);
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].samples, 12);
        assert_eq!(c[0].probe_samples, 7);
        let trapped = |f: &HotFunction| p.frames.iter().skip(2).any(|t| t.function == f.function);
        assert!(!c[0].by_self.iter().any(trapped), "{:?}", c[0]);
        assert!(!c[0].by_total.iter().any(trapped), "{:?}", c[0]);
        assert_eq!(c[0].by_self[0].function, "SSL_write");
        assert_eq!(c[0].by_self[0].samples, 5);
    }

    #[test]
    fn requests_keep_their_own_chains_in_the_order_asked() {
        let p = profile();
        let r = requests(&p, ["9/9/9", "7/1/0", "7/1/0"]);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].name, "7/1/0");
        assert_eq!(r[0].samples, 2);
        assert_eq!(r[0].by_self[0].function, "burn_a");
    }

    #[test]
    fn untagged_profiles_have_no_groups() {
        let p = Profile {
            tags: vec![],
            ..profile()
        };
        assert!(classes(&p).is_empty());
        assert!(requests(&p, ["7/1/0"]).is_empty());
        assert!(class(&p, "/a").is_none());
    }
}
