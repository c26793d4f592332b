//! - A server that resolves a name on every request (Apache's `HostnameLookups On` reverse-
//!   resolving each client, an application calling getaddrinfo for its upstream each time) reads
//!   the resolver's files on each: the opens say which by their paths, which the kernel probes
//!   keep (`opened` in the record).
//! - signal 1: **≥ 0.9 opens of the resolver's files per request, or per connection** where
//!   connections carry several requests (Apache resolves a client once per connection) (/etc/hosts, /etc/resolv.conf,
//!   /etc/nsswitch.conf, /etc/gai.conf, /etc/host.conf, /etc/services, /etc/protocols);
//! - signal 2: **the resolver's code on ≥ 2 % of the sampled call chains** (a function whose
//!   name contains getaddrinfo, getnameinfo, gethostbyaddr or gethostbyname, as libraries'
//!   wrappers do (`apr_getnameinfo`), the NSS `files` and `dns` back ends, the stub resolver), or **a second resolver file opened as often**, or **≥ 0.9 UDP datagrams sent
//!   per request or connection** (DNS queries: the record keeps no port, so a server whose requests come over
//!   TCP and that sends datagrams per request is taken to be querying DNS).
//! - CPU share: the sampled share of the chains through the resolver's code where the profile
//!   has them; otherwise the CPU in the opens, at most the phase's system CPU, in the share the
//!   resolver's files have of all opens.

use reqcost_record::{FdKind, IoDirection, OpenedPath, Unit};

use super::facts::{profile_share, Ctx, Draft, OPEN_CALLS};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "hostname-lookup",
    seed: None,
    needs: &[Needs::Kernel, Needs::Requests],
    carried_by: CarriedBy::SyscallClasses,
    judge,
};

/// Signal 1: opens of the resolver's files per request, from this many (and a second file as
/// often for signal 2); UDP datagrams sent per request, from as many, for signal 2.
const MIN_LOOKUPS: f64 = 0.9;
/// Signal 2: the resolver's code on at least this share of the sampled chains.
const MIN_RESOLVER_SAMPLES: f64 = 0.02;

/// Files the C library's resolver and NSS read to turn names into addresses and back.
const RESOLVER_FILES: &[&str] = &[
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/host.conf",
    "/etc/services",
    "/etc/protocols",
];

/// Entry points and back ends of name resolution (glibc, musl), in the names of the functions
/// that call them too (`apr_getnameinfo`, `uv_getaddrinfo`).
const RESOLVER_FRAMES: &[&str] = &[
    "getaddrinfo",
    "getnameinfo",
    "gethostbyaddr",
    "gethostbyname",
    "_nss_files_",
    "_nss_dns_",
    "__res_",
    "__libc_res_",
    "res_nquery",
    "res_nsend",
];

/// Whether `path` is one of the resolver's files.
fn is_resolver_file(path: &str) -> bool {
    RESOLVER_FILES.contains(&path)
}

/// A name looked up (a file read, a query sent) on every request.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let k = f.kernel.filter(|_| f.usable())?;
    let every = |units: f64| -> Vec<&OpenedPath> {
        k.opened
            .iter()
            .filter(|o| is_resolver_file(&o.path) && o.count as f64 / units >= MIN_LOOKUPS)
            .collect()
    };
    // Per connection where connections carry several requests: a lookup is the client's.
    let conns = f
        .phase
        .units_of(Unit::Connection)
        .filter(|&c| c >= 1.0 && c < f.ok);
    let (files, units, unit) = match (every(f.ok), conns) {
        (files, _) if !files.is_empty() => (files, f.ok, "request"),
        (_, Some(c)) => (every(c), c, "connection"),
        (files, None) => (files, f.ok, "request"),
    };
    // Signal 1: the resolver's files opened on every request.
    let first = files.first()?;
    let sampled = ctx.profile.and_then(|p| {
        profile_share(p, |n| RESOLVER_FRAMES.iter().any(|x| n.contains(x)))
            .filter(|&s| s >= MIN_RESOLVER_SAMPLES)
    });
    let (datagrams, _) = f.io(IoDirection::Write, FdKind::Udp);
    let datagrams = datagrams * f.ok / units;
    let queries = datagrams >= MIN_LOOKUPS;
    // Signal 2: the resolver's code in the profile, a second file, or queries sent.
    let signals = 1 + usize::from(sampled.is_some()) + usize::from(files.len() >= 2)
        + usize::from(queries);
    if signals < 2 {
        return None;
    }
    let resolver_opens: u64 = k
        .opened
        .iter()
        .filter(|o| is_resolver_file(&o.path))
        .map(|o| o.count)
        .sum();
    let all_opens: u64 = k.opened.iter().map(|o| o.count).sum();
    let opens_cpu = ctx.in_calls(f, OPEN_CALLS).cpu_ns * resolver_opens as f64
        / all_opens.max(1) as f64;
    let mut evidence: Vec<String> = files
        .iter()
        .map(|o| {
            format!(
                "{} opened {:.2} times per {unit}",
                o.path,
                o.count as f64 / units
            )
        })
        .collect();
    evidence.extend(sampled.map(|s| {
        format!(
            "{:.0} % of CPU samples in the resolver's code (getaddrinfo, getnameinfo, gethostbyaddr, NSS)",
            s * 100.0
        )
    }));
    if queries {
        evidence.push(format!(
            "{datagrams:.2} UDP datagrams sent per {unit}: DNS queries, by all appearances"
        ));
    }
    Some(Draft {
        title: format!(
            "a hostname lookup on every {unit}: {} opened {:.2} times per {unit}",
            first.path,
            first.count as f64 / units
        ),
        evidence,
        cpu_share: sampled.unwrap_or_else(|| f.share(opens_cpu)),
        phase: f.phase.name.clone(),
        fix: "do not resolve names per request: apache2 HostnameLookups Off (log addresses, \
              resolve them offline with logresolve), resolve upstream names once at start-up, \
              or cache lookups (nscd, a local caching resolver)",
        signals,
    })
}
