//! The findings catalog: rules that turn a run record into "here is why", each with the numbers
//! that support it, the share of CPU it explains, and a fix hint. Every rule needs at least two
//! independent signals.
//!
//! One file per rule: its module docs are its section of docs/findings.md (the story, each signal
//! with its threshold, how the CPU share is taken), then its [`Rule`] declaration (id, seed
//! story, the figures it needs, who carries its cost), its thresholds as named constants, and
//! the code that judges a record, writing the evidence and the fix. [`RULES`] lists them, one
//! line each; docs/findings.md's rule sections are generated from it (the `catalog` test checks
//! them), and each rule's table test lives in `tests/analysis/findings/`, in the file named as
//! the rule's.

mod facts;
mod stack;

pub use stack::diagnose_stack;

use std::borrow::Cow;

use reqcost_record::{GroupCost, Phase, Profile, RequestStats, RunRecord, Unit, IN_FLIGHT};
use serde::{Deserialize, Serialize};

use crate::hot_code::GroupCode;
use crate::profile::trunk;
use crate::requests::{group_cpu_share, OTHER};
use crate::tagged::{select, TagFilter};
use facts::{Ctx, Draft, SpeedContrast, PROFILE_MIN_SAMPLES};

/// Declares each rule's module and lists it in [`RULES`], so that a rule is one line here.
macro_rules! registry {
    ($($rule:ident),* $(,)?) => {
        $(mod $rule;)*

        /// Every rule of the catalog, in the order reports list the ones they could not judge.
        pub static RULES: &[&Rule] = &[$(&$rule::RULE),*];
    };
}

registry! {
    small_writes,
    busy_wait,
    client_sensitive,
    poll_scaling,
    fs_storm,
    log_per_request,
    copy_heavy,
    nagle,
    tls_handshake,
    conn_per_request,
    kernel_bound,
    alloc_churn,
    process_per_request,
    compress_per_request,
    datagram_per_send,
    hostname_lookup,
    copy_through_user,
    durable_syncs,
    dominant_code,
    dominant_syscalls,
}

/// One rule of the catalog, declared in its own file beside the code that judges it.
pub struct Rule {
    /// Catalog id: `small-writes`, `busy-wait`, ...
    pub id: &'static str,
    /// The seed story it comes from (`seeds/001`), for its heading in docs/findings.md.
    pub seed: Option<&'static str>,
    /// The figures it cannot fire without: a record lacking one lists the rule as not evaluated.
    pub needs: &'static [Needs],
    /// Who is named as carrying the cost, where the phase has per-request accounting.
    pub carried_by: CarriedBy,
    /// What the rule found in a record, when at least two of its signals agree.
    judge: fn(&Ctx) -> Option<Draft>,
}

/// Figures of a record that some rules cannot do without.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// The eBPF probes' figures: syscalls, bytes, waits, per-request accounting.
    Kernel,
    /// Sampled call chains, enough of them to take shares from.
    Profile,
    /// Requests counted, by reqcost's load or the server-side accounting: a rule whose
    /// thresholds are per request. A record that counted none (`--load` with a client whose
    /// requests reqcost cannot see) is judged per MiB or datagram by the other rules.
    Requests,
}

/// Whom a finding names as carrying its cost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CarriedBy {
    /// The slow clients, with their speed bucket, when the phase holds slow clients against fast
    /// ones; otherwise the classes holding most of its syscalls.
    SlowClients,
    /// The classes holding most of the phase's CPU: for evidence taken from the profile.
    CpuClasses,
    /// The classes holding most of the phase's syscalls: for evidence taken from syscalls.
    SyscallClasses,
}

/// Samples a carrier class needs before its own hot functions are named, and how many are.
const CLASS_MIN_SAMPLES: u64 = 20;
const CLASS_FUNCTIONS: usize = 3;

/// A finding explaining at least this share of the server's CPU is major; below, minor.
pub const MAJOR_SHARE: f64 = 0.10;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confidence {
    Medium,
    High,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Finding {
    /// Catalog id: `small-writes`, `busy-wait`, ...
    pub id: String,
    /// One line saying what is wrong.
    pub title: String,
    /// The numbers behind it, with units, from the record.
    pub evidence: Vec<String>,
    /// Estimated share of the server's CPU this explains (0..1), in the phase named by `phase`.
    pub cpu_share: f64,
    /// Phase where the evidence is strongest.
    pub phase: String,
    pub fix: String,
    pub confidence: Confidence,
    /// `cpu_share` ≥ [`MAJOR_SHARE`].
    pub major: bool,
    /// The request classes or clients that carry the cost, where the phase has per-request
    /// accounting: `client 10.0.0.7 (< 16 KiB/s)`, `class /search: 80 % of the phase's CPU`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub carriers: Vec<String>,
    /// The tree whose figures it was computed on, when the record followed upstream hops:
    /// `nginx (hop 0)`, `postgres (hop 2)` (docs/stack.md); its `cpu_share` is of that
    /// tree's CPU.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub server: String,
}

/// Every finding the record supports, the ones explaining most CPU first. A record whose main
/// phase counted no request is judged per the unit it reads best in (MiB sent, datagrams), by
/// the rules that do not need requests; their findings say per what.
impl Finding {
    /// `cpu_share` in %, as every output prints it.
    pub fn cpu_share_pct(&self) -> f64 {
        self.cpu_share * 100.0
    }

    /// Names where the CPU goes rather than a pathology (`dominant-code`, `dominant-syscalls`):
    /// it shows when the catalog explains little, so a fix that removes a pathology can bring
    /// it out.
    pub fn is_generic(&self) -> bool {
        GENERIC.contains(&self.id.as_str())
    }
}

pub fn diagnose(rec: &RunRecord) -> Vec<Finding> {
    let judged = per_unit_of_work(rec);
    let rec = judged.as_ref();
    let own = rec.profile.as_ref().map(crate::profile::without_probes);
    let Some(ctx) = Ctx::of(rec, own.as_deref()) else {
        return Vec::new();
    };
    let unit = ctx.main.phase.unit;
    let mut findings: Vec<Finding> = RULES
        .iter()
        .filter(|rule| unit == Unit::Request || !rule.needs.contains(&Needs::Requests))
        .filter_map(|rule| {
            let mut finding = (rule.judge)(&ctx)?.finish(rule);
            finding.carriers = carriers(rec, &finding.phase, rule.carried_by);
            if rule.carried_by == CarriedBy::CpuClasses {
                finding
                    .evidence
                    .extend(carriers_code(rec, ctx.profile, &finding.phase));
            }
            if unit != Unit::Request {
                finding.per_unit(unit);
            }
            Some(finding)
        })
        .collect();
    rank(&ctx, &mut findings);
    findings
}

/// The findings explaining most CPU first; a generic one (it names where the CPU goes, a
/// specific one says why) below every specific finding whose evidence explains the same CPU:
/// `dominant-syscalls` below all of them, `dominant-code` as [`dominant_code::defers_to`] says.
fn rank(ctx: &Ctx, findings: &mut Vec<Finding>) {
    findings.sort_by(|a, b| {
        b.cpu_share
            .total_cmp(&a.cpu_share)
            .then(b.confidence.cmp(&a.confidence))
            .then(a.id.cmp(&b.id))
    });
    let generic: Vec<Finding> = findings.extract_if(.., |f| f.is_generic()).collect();
    for g in generic {
        let at = findings
            .iter()
            .position(|f| f.cpu_share < g.cpu_share)
            .unwrap_or(findings.len());
        let below = findings
            .iter()
            .rposition(|s| {
                !s.is_generic()
                    && (g.id == dominant_syscalls::RULE.id
                        || dominant_code::defers_to(ctx, g.cpu_share, s))
            })
            .map_or(at, |last| at.max(last + 1));
        findings.insert(below, g);
    }
}

/// `rec` as the rules judge it: per request when its main phase counted any; else per the unit
/// that phase reads best in, so that the rules that work on totals still run.
fn per_unit_of_work(rec: &RunRecord) -> Cow<'_, RunRecord> {
    match rec.main_phase() {
        Some(m) if !counted_requests(m) && m.default_unit() != m.unit => {
            let mut r = rec.clone();
            r.in_units(None);
            Cow::Owned(r)
        }
        _ => Cow::Borrowed(rec),
    }
}

fn counted_requests(phase: &Phase) -> bool {
    phase.units_of(Unit::Request).is_some_and(|n| n > 0.0)
}

/// The rules that name where the CPU goes rather than a pathology, judged only when the others
/// explain little of it.
const GENERIC: &[&str] = &[dominant_code::RULE.id, dominant_syscalls::RULE.id];

/// The summed share of the CPU that the findings of the specific (not generic) rules explain.
fn explained_by_specific(ctx: &Ctx) -> f64 {
    RULES
        .iter()
        .filter(|r| !GENERIC.contains(&r.id))
        .filter_map(|r| (r.judge)(ctx))
        .fold(0.0, |sum, d| sum + d.cpu_share)
        .min(1.0)
}

impl Finding {
    /// The rules write "per request"; judged per another unit, they say per what.
    fn per_unit(&mut self, unit: Unit) {
        let per = format!("per {}", unit.name());
        self.title = self.title.replace("per request", &per);
        for e in &mut self.evidence {
            *e = e.replace("per request", &per);
        }
    }
}

/// Rules that could not be judged on a record, and why: the figures they read were not taken.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Unevaluated {
    pub rules: Vec<&'static str>,
    pub reason: String,
}

/// The rules [`diagnose`] could not judge on `rec`, so that "no finding" is not read as "nothing
/// wrong" when the probes or the sampler were off. A rule missing both is listed once, with the
/// probes.
pub fn unevaluated(rec: &RunRecord) -> Vec<Unevaluated> {
    let Some(main) = rec.main_phase() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let no_kernel = main.server.kernel.is_none();
    if no_kernel {
        let why = main
            .missing
            .get("kernel")
            .filter(|w| !w.is_empty())
            .map_or("the record has no eBPF figures", String::as_str);
        out.push(Unevaluated {
            rules: needing(Needs::Kernel, &[]),
            reason: format!("they read the eBPF probes' syscall counts: {why}"),
        });
    }
    let thin = match &rec.profile {
        None => Some("no call chains were sampled (--no-sample, or the sampler failed)".into()),
        Some(p) if p.samples < PROFILE_MIN_SAMPLES => Some(format!(
            "the profile has {} samples, under the {PROFILE_MIN_SAMPLES} they need (--duration, --freq)",
            p.samples
        )),
        Some(_) => None,
    };
    if let Some(reason) = &thin {
        let listed: &[Needs] = if no_kernel { &[Needs::Kernel] } else { &[] };
        out.push(Unevaluated {
            rules: needing(Needs::Profile, listed),
            reason: format!("they read sampled call chains: {reason}"),
        });
    }
    let judged = main.default_unit();
    if !counted_requests(main) && judged != Unit::Request {
        let listed: Vec<Needs> = [
            no_kernel.then_some(Needs::Kernel),
            thin.is_some().then_some(Needs::Profile),
        ]
        .into_iter()
        .flatten()
        .collect();
        let rules = needing(Needs::Requests, &listed);
        if !rules.is_empty() {
            out.push(Unevaluated {
                rules,
                reason: format!(
                    "they judge per request: no requests counted; the other rules judged this run per {}",
                    judged.name()
                ),
            });
        }
    }
    out
}

/// Ids of the rules that need `figures` and none of `listed` (those rules are named already).
fn needing(figures: Needs, listed: &[Needs]) -> Vec<&'static str> {
    RULES
        .iter()
        .filter(|r| r.needs.contains(&figures) && !r.needs.iter().any(|n| listed.contains(n)))
        .map(|r| r.id)
        .collect()
}

/// The classes or clients that carry the cost of a finding in `phase`, as its rule names them.
fn carriers(rec: &RunRecord, phase: &str, carried_by: CarriedBy) -> Vec<String> {
    let Some(phase) = rec.phases.iter().find(|p| p.name == phase) else {
        return Vec::new();
    };
    let Some(stats) = phase.requests.as_ref() else {
        return Vec::new();
    };
    let contrast = SpeedContrast::of(phase).filter(|c| c.ratio() >= 2.0);
    let mut named = match (carried_by, contrast) {
        (CarriedBy::SlowClients, Some(c)) => c
            .slow
            .buckets
            .iter()
            .flat_map(|g| {
                g.clients
                    .iter()
                    .map(move |ip| format!("client {ip} ({})", g.name))
            })
            .collect(),
        // The class table's own share: of the phase's CPU, handshakes and CPU in no request
        // included, so a class is never shown carrying more than the table gives it.
        (CarriedBy::CpuClasses, _) => {
            classes_text(&top_classes(stats, group_cpu_share, 1.0), "the phase's CPU")
        }
        (CarriedBy::SlowClients | CarriedBy::SyscallClasses, _) => {
            let syscalls = |g: &GroupCost| {
                g.syscalls_per_request * g.requests as f64 + g.in_flight_syscalls as f64
            };
            let total = stats.by_class.iter().map(syscalls).sum();
            classes_text(
                &top_classes(stats, syscalls, total),
                "the syscalls of the phase's requests",
            )
        }
    };
    named.extend(in_flight_carriers(stats));
    named
}

/// Requests still open at the phase's end that hold at least 5 % of its CPU (up to three,
/// costliest first): no class's per-request figure counts them, so they are named apart.
fn in_flight_carriers(stats: &RequestStats) -> Vec<String> {
    let total = (stats.attributed_cpu_ns + stats.unattributed_cpu_ns).max(1) as f64;
    stats
        .costliest
        .iter()
        .filter(|c| c.in_flight && c.cpu_ns as f64 / total >= 0.05)
        .take(3)
        .map(|c| {
            format!(
                "request {} from client {} {IN_FLIGHT}: {:.0} % of the phase's CPU so far",
                c.request,
                c.client,
                c.cpu_ns as f64 * 100.0 / total
            )
        })
        .collect()
}

/// Up to three classes holding at least 5 % of `total` by `weight`, the largest first, with
/// their shares of it.
fn top_classes(
    stats: &RequestStats,
    weight: impl Fn(&GroupCost) -> f64,
    total: f64,
) -> Vec<(&GroupCost, f64)> {
    let mut classes: Vec<(&GroupCost, f64)> = stats
        .by_class
        .iter()
        .filter(|g| g.name != OTHER)
        .map(|g| (g, weight(g) / total.max(f64::MIN_POSITIVE)))
        .filter(|(_, share)| *share >= 0.05)
        .collect();
    classes.sort_by(|a, b| b.1.total_cmp(&a.1));
    classes.truncate(3);
    classes
}

fn classes_text(classes: &[(&GroupCost, f64)], what: &str) -> Vec<String> {
    classes
        .iter()
        .map(|(g, share)| {
            let open = if g.in_flight > 0 {
                format!(" (+{} in flight)", g.in_flight)
            } else {
                String::new()
            };
            format!("class {}{open}: {:.0} % of {what}", g.name, share * 100.0)
        })
        .collect()
}

/// The code evidence of the classes carrying a finding taken from the profile: each one's own
/// hottest functions, from the samples tagged with it in `phase` (the whole run's would name
/// another class's code), when it has enough of them. `profile` is the rules' (without the
/// probes' samples).
fn carriers_code(rec: &RunRecord, profile: Option<&Profile>, phase: &str) -> Vec<String> {
    let (Some(p), Some(stats)) = (
        profile,
        rec.phases
            .iter()
            .find(|ph| ph.name == phase)
            .and_then(|ph| ph.requests.as_ref()),
    ) else {
        return Vec::new();
    };
    let filter = |key: &str, value: &str| TagFilter {
        key: key.into(),
        value: value.into(),
    };
    let scaffolding = trunk(p);
    top_classes(stats, group_cpu_share, 1.0)
        .iter()
        .filter_map(|(g, _)| {
            let own = select(p, &[filter("class", &g.name), filter("phase", phase)]).ok()?;
            (own.samples >= CLASS_MIN_SAMPLES).then(|| {
                format!(
                    "class {}'s own samples ({}): {}",
                    g.name,
                    own.samples,
                    GroupCode::of(&g.name, &own, &scaffolding).describe(CLASS_FUNCTIONS)
                )
            })
        })
        .collect()
}
