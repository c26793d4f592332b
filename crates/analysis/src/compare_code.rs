//! Each request class's flame graph difference between A and B: per class, the CPU per request
//! of the class its samples stand for on each side, and the functions whose self CPU per request
//! grew or shrank most (docs/compare.md, "Per class code"); and each call chain's CPU per
//! request on either side, which a differential flame graph draws.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;

use reqcost_record::{Profile, RunRecord, Unit};

use crate::hot_code::without_probes;
use crate::profile::{folded_chain, function_counts};
use crate::tagged::{split, UNTAGGED};

/// Classes compared, most sampled CPU over both sides first.
const CLASSES: usize = 5;
/// Functions listed per class, largest change first.
const FUNCTIONS: usize = 8;
/// A function listed has changed by at least this much of its class's CPU per request (the
/// larger side's), so that sampling noise in the tail is not listed.
const MIN_CHANGE: f64 = 0.02;

/// One class's difference.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ClassCodeDiff {
    pub class: String,
    /// Sampled CPU of the class per request of the class, ns, mean over each side's runs
    /// (None: the side served no request of the class, or its samples carry no tags).
    pub a_ns_per_request: Option<f64>,
    pub b_ns_per_request: Option<f64>,
    /// The functions whose self CPU per request changed most, largest change first.
    pub functions: Vec<FunctionDiff>,
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct FunctionDiff {
    pub function: String,
    pub module: String,
    /// Self CPU per request of the class, ns, on each side (0 where it was not sampled).
    pub a_ns: f64,
    pub b_ns: f64,
}

impl FunctionDiff {
    /// B's self CPU per request less A's, ns.
    pub fn change_ns(&self) -> f64 {
        self.b_ns - self.a_ns
    }
}

/// One side's class: samples, the requests they stand for and self samples by (function,
/// module) over its runs, weighted by each run's period.
#[derive(Default)]
struct SideClass {
    sampled_ns: f64,
    requests: f64,
    self_ns: BTreeMap<(String, String), f64>,
}

impl SideClass {
    fn per_request(&self, ns: f64) -> Option<f64> {
        (self.requests > 0.0).then(|| ns / self.requests)
    }
}

/// The path a class label names, so that classes match across protocols: the HTTP label
/// `GET /big.txt`, the Gemini label `/big.txt` and the gopher selector `big.txt` all name
/// `/big.txt`. Labels that name no request (`(tls)`, `(no request)`) stay as they are.
pub fn class_path(label: &str) -> Cow<'_, str> {
    if label.starts_with('(') {
        return Cow::Borrowed(label);
    }
    let path = match label.split_once(' ') {
        Some((method, path))
            if !method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase()) =>
        {
            path
        }
        _ => label,
    };
    match path.starts_with('/') {
        true => Cow::Borrowed(path),
        false => Cow::Owned(format!("/{path}")),
    }
}

/// Whether class label `name` is compared as `class`: the same label, or, when the two sides
/// spoke different protocols, the same path ([`class_path`]).
fn names_class(name: &str, class: &str) -> bool {
    name == class || class_path(name) == class
}

/// Whether the two sides spoke different protocols (gopher against Gemini): their classes are
/// then matched by path, as the labels of one request differ between protocols.
fn across_protocols(ra: &[RunRecord], rb: &[RunRecord]) -> bool {
    let protocol = |rs: &[RunRecord]| rs.first().map(|r| r.workload.protocol.clone());
    protocol(ra) != protocol(rb)
}

/// Each side's classes over its runs: the samples tagged with a class in one of the run's
/// phases, and the requests of those phases' class rows they stand for ([`measured`]); keyed
/// by path when `by_path`.
fn side(records: &[RunRecord], by_path: bool) -> BTreeMap<String, SideClass> {
    let mut out: BTreeMap<String, SideClass> = BTreeMap::new();
    for rec in records {
        let Some(p) = rec.profile.as_ref() else {
            continue;
        };
        let Ok(groups) = split(p, "class") else {
            continue;
        };
        for (class, g) in groups.iter().filter(|(c, _)| c != UNTAGGED) {
            let (in_phases, requests) = measured(rec, class, g);
            let key = match by_path {
                true => class_path(class).into_owned(),
                false => class.clone(),
            };
            let s = out.entry(key).or_default();
            s.requests += requests;
            s.sampled_ns += (in_phases.samples * in_phases.period_ns) as f64;
            let (code, _) = without_probes(&in_phases);
            for ((f, m), c) in function_counts(&code) {
                if c.self_samples == 0 {
                    continue;
                }
                *s.self_ns.entry((f.to_string(), m.to_string())).or_default() +=
                    (c.self_samples * in_phases.period_ns) as f64;
            }
        }
    }
    out
}

/// Each folded call chain (`profile::folded_chain`) of `records`' samples with its CPU per unit
/// of work in ns, averaged over the sampled runs: one side of a whole-run differential flame
/// graph.
pub fn run_chain_costs(records: &[RunRecord]) -> BTreeMap<String, f64> {
    let sampled: Vec<(Profile, f64)> = records.iter().filter_map(run_samples).collect();
    chain_costs(&sampled)
}

/// Each folded call chain of class `class`'s samples in `records`' measured phases with its CPU
/// per request of the class in ns, averaged over the runs that counted requests of the class:
/// one side of a class's differential flame graph.
pub fn class_chain_costs(records: &[RunRecord], class: &str) -> BTreeMap<String, f64> {
    let sampled: Vec<(Profile, f64)> = records
        .iter()
        .filter_map(|r| class_samples(r, class))
        .filter(|(_, requests)| *requests > 0.0)
        .collect();
    chain_costs(&sampled)
}

/// Each folded call chain of each (profile, units its samples divide by) with its CPU per unit
/// in ns (samples × the sampling period over the units), averaged over the profiles.
fn chain_costs(sampled: &[(Profile, f64)]) -> BTreeMap<String, f64> {
    let mut cost: BTreeMap<String, f64> = BTreeMap::new();
    for (p, units) in sampled {
        let scale = p.period_ns as f64 / units.max(1.0) / sampled.len() as f64;
        for s in &p.stacks {
            *cost.entry(folded_chain(p, s)).or_default() += s.count as f64 * scale;
        }
    }
    cost
}

/// A run's samples and the units of work the sampler ran through, which a whole-run
/// differential flame graph divides them by: the requests (`RunRecord::sampled_requests`, the
/// warm-up's and the unprobed passes' included) when its phases are measured per request, else
/// the phases' own units (a UDP server's MiB); None without samples.
fn run_samples(rec: &RunRecord) -> Option<(Profile, f64)> {
    let units = if rec.phases.iter().all(|p| p.unit == Unit::Request) {
        rec.sampled_requests() as f64
    } else {
        rec.phases.iter().map(|p| p.units()).sum()
    };
    Some((rec.profile.clone()?, units))
}

/// Class `class`'s samples in a run's measured phases (not the warm-up's) and the requests of
/// the class they stand for ([`measured`]), over every label compared as `class`
/// ([`names_class`]); None without tagged samples of the class.
fn class_samples(rec: &RunRecord, class: &str) -> Option<(Profile, f64)> {
    let groups = split(rec.profile.as_ref()?, "class").ok()?;
    let mut matched = groups
        .iter()
        .filter(|(name, _)| name != UNTAGGED && names_class(name, class))
        .map(|(name, g)| measured(rec, name, g));
    let (mut p, mut requests) = matched.next()?;
    for (q, n) in matched {
        p.samples += q.samples;
        p.stacks.extend(q.stacks);
        requests += n;
    }
    Some((p, requests))
}

/// The samples of `g` (one class's) tagged with one of the record's phases, and the requests
/// of `class` those phases' rows counted that they stand for: a phase probed part of the time
/// (alternate windows, an attach's budget or duty) tags samples only in its probed windows,
/// while its rows count the whole phase's requests (`Phase::probed_part`).
fn measured(rec: &RunRecord, class: &str, g: &Profile) -> (Profile, f64) {
    let phase_of = |tag: Option<u32>| tag.and_then(|t| g.tags.get(t as usize)).map(|t| &t.phase);
    let stacks: Vec<_> = g
        .stacks
        .iter()
        .filter(|s| phase_of(s.tag).is_some_and(|ph| rec.phases.iter().any(|p| p.name == *ph)))
        .cloned()
        .collect();
    let requests = rec
        .phases
        .iter()
        .filter_map(|ph| Some((ph, ph.requests.as_ref()?)))
        .flat_map(|(ph, r)| r.by_class.iter().map(move |row| (ph, row)))
        .filter(|(_, row)| row.name == class)
        .map(|(ph, row)| ph.probed_part(row.requests as f64))
        .sum();
    let p = Profile {
        samples: stacks.iter().map(|s| s.count).sum(),
        stacks,
        ..g.clone()
    };
    (p, requests)
}

/// Each class's flame graph difference between runs `ra` and `rb`; empty when neither side's
/// samples carry tags.
pub fn class_code_diffs(ra: &[RunRecord], rb: &[RunRecord]) -> Vec<ClassCodeDiff> {
    let by_path = across_protocols(ra, rb);
    let (a, b) = (side(ra, by_path), side(rb, by_path));
    let empty = SideClass::default();
    let mut classes: Vec<(&String, f64)> = a
        .keys()
        .chain(b.keys())
        .map(|c| {
            let ns = |s: &BTreeMap<String, SideClass>| s.get(c).map_or(0.0, |x| x.sampled_ns);
            (c, ns(&a) + ns(&b))
        })
        .collect();
    classes.sort_by(|x, y| y.1.total_cmp(&x.1).then_with(|| x.0.cmp(y.0)));
    classes.dedup_by(|x, y| x.0 == y.0);
    classes
        .into_iter()
        .take(CLASSES)
        .map(|(class, _)| {
            let (sa, sb) = (
                a.get(class).unwrap_or(&empty),
                b.get(class).unwrap_or(&empty),
            );
            let (a_total, b_total) = (sa.per_request(sa.sampled_ns), sb.per_request(sb.sampled_ns));
            let floor = MIN_CHANGE * a_total.unwrap_or(0.0).max(b_total.unwrap_or(0.0));
            let mut functions: Vec<FunctionDiff> = sa
                .self_ns
                .keys()
                .chain(sb.self_ns.keys())
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .map(|k| {
                    let ns = |s: &SideClass| {
                        s.per_request(s.self_ns.get(k).copied().unwrap_or(0.0))
                            .unwrap_or(0.0)
                    };
                    FunctionDiff {
                        function: k.0.clone(),
                        module: k.1.clone(),
                        a_ns: ns(sa),
                        b_ns: ns(sb),
                    }
                })
                .filter(|f| (f.b_ns - f.a_ns).abs() >= floor.max(f64::MIN_POSITIVE))
                .collect();
            functions.sort_by(|x, y| {
                (y.b_ns - y.a_ns)
                    .abs()
                    .total_cmp(&(x.b_ns - x.a_ns).abs())
                    .then_with(|| x.function.cmp(&y.function))
            });
            functions.truncate(FUNCTIONS);
            ClassCodeDiff {
                class: class.clone(),
                a_ns_per_request: a_total,
                b_ns_per_request: b_total,
                functions,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::{
        CpuMethod, CpuWindows, Frame, GroupCost, ProbeBudget, SampleTag, Stack, WindowTotals,
    };

    /// The busy-wait fixture with a profile of (class, leaf, samples) chains at 1 ms a sample,
    /// tagged in phase `main`, whose class rows count `requests` per class.
    fn record(chains: &[(&str, &str, u64)], requests: &[(&str, u64)]) -> RunRecord {
        let mut rec =
            RunRecord::from_json(include_str!("../tests/fixtures/busy-wait.json")).unwrap();
        for ph in &mut rec.phases {
            let r = ph.requests.as_mut().unwrap();
            r.by_class = if ph.name == "main" {
                requests
                    .iter()
                    .map(|(name, n)| GroupCost {
                        name: name.to_string(),
                        requests: *n,
                        ..GroupCost::default()
                    })
                    .collect()
            } else {
                Vec::new()
            };
        }
        let mut p = Profile {
            period_ns: 1_000_000,
            ..Profile::default()
        };
        for (class, leaf, n) in chains {
            let frame = Frame {
                function: leaf.to_string(),
                module: "srv".into(),
                kernel: false,
                inlined: false,
                resolved: true,
            };
            p.frames.push(frame);
            p.tags.push(SampleTag {
                class: class.to_string(),
                phase: "main".into(),
                ..SampleTag::default()
            });
            p.stacks.push(Stack {
                frames: vec![p.frames.len() as u32 - 1],
                thread: "srv".into(),
                count: *n,
                tag: Some(p.tags.len() as u32 - 1),
            });
            p.samples += n;
        }
        rec.profile = Some(p);
        rec
    }

    #[test]
    fn each_class_says_which_functions_grew_per_request() {
        let a = record(
            &[("/a", "burn_a", 10), ("/b", "burn_b", 4)],
            &[("/a", 10), ("/b", 4)],
        );
        let b = record(
            &[
                ("/a", "burn_a", 20),
                ("/a", "memcpy", 10),
                ("/b", "burn_b", 4),
            ],
            &[("/a", 10), ("/b", 4)],
        );
        let d = class_code_diffs(&[a], &[b]);
        let classes: Vec<&str> = d.iter().map(|c| c.class.as_str()).collect();
        assert_eq!(classes, ["/a", "/b"]);
        assert_eq!(d[0].a_ns_per_request, Some(1e6));
        assert_eq!(d[0].b_ns_per_request, Some(3e6));
        let f: Vec<(&str, f64, f64)> = d[0]
            .functions
            .iter()
            .map(|f| (f.function.as_str(), f.a_ns, f.b_ns))
            .collect();
        assert_eq!(f, [("burn_a", 1e6, 2e6), ("memcpy", 0.0, 1e6)]);
        assert_eq!(d[1].a_ns_per_request, d[1].b_ns_per_request);
        assert!(d[1].functions.is_empty(), "{:?}", d[1]);
    }

    #[test]
    fn chains_cost_per_request_of_their_class() {
        let runs = [
            record(
                &[("/a", "burn_a", 10), ("/b", "burn_b", 4)],
                &[("/a", 10), ("/b", 4)],
            ),
            record(&[("/a", "burn_a", 30)], &[("/a", 10)]),
        ];
        let chains: Vec<(String, f64)> = class_chain_costs(&runs, "/a").into_iter().collect();
        // 1 ms a request in the first run, 3 in the second: 2 ms averaged over the runs.
        assert_eq!(chains, [("srv;burn_a".to_string(), 2e6)]);
    }

    #[test]
    fn classes_match_by_path_across_protocols() {
        let mut gopher = record(&[("big.txt", "burn", 10)], &[("big.txt", 10)]);
        gopher.workload.protocol = "gopher".into();
        let mut gemini = record(&[("/big.txt", "burn", 2)], &[("/big.txt", 10)]);
        gemini.workload.protocol = "gemini".into();
        let d = class_code_diffs(&[gopher.clone()], &[gemini.clone()]);
        let sides: Vec<(&str, Option<f64>, Option<f64>)> = d
            .iter()
            .map(|c| (c.class.as_str(), c.a_ns_per_request, c.b_ns_per_request))
            .collect();
        assert_eq!(sides, [("/big.txt", Some(1e6), Some(2e5))]);
        let chains: Vec<(String, f64)> = class_chain_costs(&[gopher.clone()], "/big.txt")
            .into_iter()
            .collect();
        assert_eq!(chains, [("srv;burn".to_string(), 1e6)]);
        // One protocol on both sides: labels are matched as they are.
        gemini.workload.protocol = "gopher".into();
        assert_eq!(class_code_diffs(&[gopher], &[gemini]).len(), 2);
    }

    #[test]
    fn class_paths_drop_the_method_and_give_a_selector_its_slash() {
        for (label, path) in [
            ("GET /big.txt", "/big.txt"),
            ("/big.txt", "/big.txt"),
            ("big.txt", "/big.txt"),
            ("(tls)", "(tls)"),
        ] {
            assert_eq!(class_path(label), path, "{label}");
        }
    }

    #[test]
    fn untagged_sides_have_nothing_to_compare() {
        let mut a = record(&[("/a", "burn_a", 10)], &[("/a", 10)]);
        a.profile.as_mut().unwrap().tags.clear();
        assert!(class_code_diffs(&[a.clone()], &[a]).is_empty());
    }

    /// A budgeted attach's probes on one second in this many.
    const PROBED_ONE_IN: u64 = 5;

    /// The probed fifth of `record(chains, requests)`'s traffic, as a budgeted attach records
    /// it (`count_scale` 5): a fifth of each chain's samples tagged, the rest taken while the
    /// probes were paused and untagged, and the class rows the probed windows counted scaled
    /// to the whole window as the measurement scales them.
    fn budgeted(chains: &[(&str, &str, u64)], requests: &[(&str, u64)]) -> RunRecord {
        let fifth = |n: u64| n / PROBED_ONE_IN;
        let probed: Vec<(&str, &str, u64)> =
            chains.iter().map(|&(c, f, n)| (c, f, fifth(n))).collect();
        let counted: Vec<(&str, u64)> = requests.iter().map(|&(c, n)| (c, fifth(n))).collect();
        let mut rec = record(&probed, &counted);
        let p = rec.profile.as_mut().unwrap();
        for (frame, (_, _, n)) in chains.iter().enumerate() {
            p.stacks.push(Stack {
                frames: vec![frame as u32],
                thread: "srv".into(),
                count: n - fifth(*n),
                tag: None,
            });
            p.samples += n - fifth(*n);
        }
        let window = |elapsed_s| WindowTotals {
            windows: 10,
            elapsed_s,
            ..WindowTotals::default()
        };
        let scale = PROBED_ONE_IN as f64;
        for ph in &mut rec.phases {
            ph.scale_requests_to_cpu(scale);
            ph.cpu_windows = Some(CpuWindows {
                method: CpuMethod::Sampled,
                reason: "--budget 3%".into(),
                probed: window(2.0),
                unprobed: window(8.0),
                count_scale: scale,
                requests_cut: 0,
                pass_work: None,
                pass_requests: 0,
                budget: Some(ProbeBudget::default()),
            });
        }
        rec
    }

    /// Samples are tagged only while the probes are attached, and a budgeted attach's class
    /// rows count the whole window: its CPU per request of a class, and each chain's, are the
    /// tagged samples over the probed windows' requests, as full time's, and its untagged
    /// samples go to no class (the old division read a fifth of full time's).
    #[test]
    fn a_budgeted_attach_costs_a_request_what_full_time_does() {
        let chains = [("/a", "burn_a", 100), ("/b", "burn_b", 40)];
        let requests = [("/a", 50), ("/b", 20)];
        let (full, budget) = ([record(&chains, &requests)], [budgeted(&chains, &requests)]);
        let main = |r: &[RunRecord]| r[0].phases[0].requests.as_ref().unwrap().by_class.clone();
        assert_eq!(
            main(&budget),
            main(&full),
            "rows scaled to the whole window"
        );
        let untagged = |r: &[RunRecord]| {
            let p = r[0].profile.as_ref().unwrap();
            p.stacks
                .iter()
                .filter(|s| s.tag.is_none())
                .map(|s| s.count)
                .sum::<u64>()
        };
        assert_eq!((untagged(&full), untagged(&budget)), (0, 112));
        let d = class_code_diffs(&full, &budget);
        let sides: Vec<(&str, Option<f64>, Option<f64>)> = d
            .iter()
            .map(|c| (c.class.as_str(), c.a_ns_per_request, c.b_ns_per_request))
            .collect();
        assert_eq!(
            sides,
            [("/a", Some(2e6), Some(2e6)), ("/b", Some(2e6), Some(2e6))]
        );
        assert!(d.iter().all(|c| c.functions.is_empty()), "{d:?}");
        for class in ["/a", "/b"] {
            assert_eq!(
                class_chain_costs(&budget, class),
                class_chain_costs(&full, class),
                "{class}"
            );
        }
        // The whole run's samples, tagged or not, cover its whole time.
        assert_eq!(run_chain_costs(&budget), run_chain_costs(&full));
    }

    /// A run measured per MiB (a UDP server's) has its chains' CPU per MiB, not per request:
    /// it counted none, and dividing by at least one would give the run's total.
    #[test]
    fn a_run_measured_per_mib_costs_its_chains_per_mib() {
        let mut rec = record(&[("/a", "work", 10)], &[("/a", 5)]);
        for ph in &mut rec.phases {
            ph.unit = Unit::MiB;
        }
        let mib: f64 = rec.phases.iter().map(|p| p.units()).sum();
        assert!(mib > 0.0 && mib != rec.sampled_requests() as f64, "{mib}");
        let cost = run_chain_costs(&[rec]);
        assert_eq!(cost.values().sum::<f64>(), 10.0 * 1e6 / mib);
    }
}
