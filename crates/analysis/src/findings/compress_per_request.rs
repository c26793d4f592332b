//! - signal 1: **≥ 20 % of CPU samples in compression code**: samples whose innermost user frame
//!   is in zlib, brotli or zstd (Debian's builds are stripped: their internals show as
//!   `libz.so.1.2.13!0x4970`, and the module is what says it), or, where the library is linked
//!   into the program (Node.js carries its own zlib), a function of their compressors by name
//!   (`deflate_slow`, `longest_match`, `BrotliEncoder…`, `ZSTD_compress…`, Go's
//!   `compress/flate.`);
//! - signal 2: **the same response is compressed again and again**: the request class carrying
//!   the most CPU has ≥ 10 requests and ≥ 50 % of the phase's CPU (per-request accounting), or,
//!   without it, reqcost sent ≥ 10 requests for one URL;
//! - a third signal when compression holds **≥ 50 %** of the samples.
//! - Debian's nginx with `gzip on; gzip_comp_level 9` serving a 234 KB text file to clients
//!   asking for gzip: ~98 % of the samples in libz, 45 ms per request; with `gzip_static` and a
//!   precompressed file, none.
//! - CPU share: the sampled share of compression code.

use super::facts::{user_self_share, Ctx, Draft, PROFILE_MIN_SAMPLES};
use super::{CarriedBy, Needs, Rule};
use crate::profile::{entries, known_library, KnownLibrary, View};
use reqcost_record::Frame;

pub(super) const RULE: Rule = Rule {
    id: "compress-per-request",
    seed: None,
    needs: &[Needs::Profile, Needs::Requests],
    carried_by: CarriedBy::CpuClasses,
    judge,
};

/// Signal 1: at least this share of the samples in compression code...
const MIN_SHARE: f64 = 0.20;
/// ... and a third signal from this share.
const LARGE_SHARE: f64 = 0.50;
/// Signal 2: requests of one class (or one URL) from this many...
const MIN_REPEATS: u64 = 10;
/// ... holding at least this share of the phase's CPU, in percent.
const MIN_CLASS_CPU_PCT: f64 = 50.0;

/// Functions of the compressors' own code, by the names their builds with symbols give them:
/// zlib's and zlib-ng's deflate (`deflate_slow`, `deflate_medium`, `longest_match_avx2`,
/// `fill_window`, `compress_block`, `_tr_flush_block`), brotli's and zstd's encoders, Go's
/// compress/flate.
const COMPRESSOR_FUNCTIONS: &[&str] = &[
    "deflate_",
    "longest_match",
    "fill_window",
    "compress_block",
    "_tr_flush_block",
    "BrotliEncoder",
    "BrotliCompress",
    "ZSTD_compress",
    "compress/flate.",
];

/// zlib, brotli or zstd, by the module's file name.
fn compression_library(module: &str) -> Option<&'static KnownLibrary> {
    known_library(module).filter(|l| l.kind == "compression")
}

fn is_compression(frame: &Frame) -> bool {
    compression_library(&frame.module).is_some()
        || COMPRESSOR_FUNCTIONS
            .iter()
            .any(|f| frame.function.starts_with(f))
}

/// The same responses compressed on every request, at whatever level the server was given.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let p = ctx.profile.filter(|p| p.samples >= PROFILE_MIN_SAMPLES)?;
    if !f.usable() {
        return None;
    }
    let share = user_self_share(p, is_compression);
    let repeated = repeats(ctx)?;
    // Signal 1: compression is a large share of the CPU; signal 2: the requests carrying it ask
    // for the same thing again and again.
    if share < MIN_SHARE {
        return None;
    }
    let top = entries(p, View::User, is_compression);
    let (library, what) = top
        .first()
        .map(|e| {
            let what = compression_library(e.entry.1)
                .map_or("compression linked into the program", |l| l.what);
            (e.entry.1, what)
        })
        .unwrap_or(("compression code", "compression"));
    let through = top.first().map(|e| e.describe());
    Some(Draft {
        title: format!(
            "{:.0} % of the CPU compresses responses ({what}, {library}), the same ones on every request",
            share * 100.0
        ),
        evidence: [
            Some(format!(
                "{:.0} % of CPU samples in {library} ({what})",
                share * 100.0
            )),
            through,
            Some(repeated),
        ]
        .into_iter()
        .flatten()
        .collect(),
        cpu_share: share,
        phase: f.phase.name.clone(),
        fix: crate::profile::COMPRESSION_FIX,
        signals: 2 + usize::from(share >= LARGE_SHARE),
    })
}

/// Signal 2, as evidence: the class holding most of the CPU repeats one request, or reqcost sent
/// one URL over and over.
fn repeats(ctx: &Ctx) -> Option<String> {
    let f = &ctx.main;
    match f.phase.requests.as_ref() {
        Some(r) if r.requests > 0 => {
            let top = r.by_class.first()?;
            (top.requests >= MIN_REPEATS && top.cpu_share_pct >= MIN_CLASS_CPU_PCT).then(|| {
                format!(
                    "class {}: {} requests, {:.0} % of the phase's CPU: the same response compressed each time",
                    top.name, top.requests, top.cpu_share_pct
                )
            })
        }
        _ => {
            let w = &ctx.rec.workload;
            let one_url = w.requests_file.is_none() && w.load.is_none();
            (one_url && f.phase.client.ok >= MIN_REPEATS).then(|| {
                format!(
                    "{} requests for {}: the same response compressed each time",
                    f.phase.client.ok, w.url
                )
            })
        }
    }
}
