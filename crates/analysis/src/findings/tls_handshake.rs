//! - signal 1: **≥ 25 % of CPU samples in crypto code**: samples whose innermost user frame is in
//!   a TLS library (libcrypto, libssl, libgnutls, libnettle, ...: Debian's builds are stripped, so
//!   the RSA and cipher internals show only as `libcrypto.so.3+0x...` and the module is what says
//!   it) or a crypto routine by name (ring, Go's `crypto/`, statically linked code). Self time,
//!   not every chain through the library: those include the socket writes it makes;
//! - signal 2: **≥ 0.9 connections accepted per request**, a handshake each;
//! - a third signal when the client offered session resumption and the server took it on < 10 %
//!   of connections (the workload counts resumed handshakes: `tls_resumed` in the client stats).
//! - Where the server's TLS library told full from resumed handshakes (`tls_full_handshakes`,
//!   `tls_resumed_handshakes` in the phase's requests, docs/tls.md), its count is the one used,
//!   whoever the client is (`--load`, `attach`), and the evidence names it.
//! - **Does not fire when the server resumed ≥ 50 % of the handshakes the client offered to
//!   resume** (or, by its own count, of all its handshakes): that is all a server can do for a
//!   protocol that closes per request (Gemini) or a client that does. A resumed TLS 1.3
//!   handshake with OpenSSL 3 still spends about half the CPU of a 1 KB Gemini request in
//!   libcrypto/libssl (X25519, HKDF, ticket decryption and the library's own lookups; testbed
//!   `tls-resumed`: ~50 % of samples, ~500 µs per request under reqcost), so crypto share and
//!   accepts alone cannot tell it from the full handshakes of `tls-full-handshake` (~91 %,
//!   RSA 3072).
//! - Only for gemini:// and https:// workloads. CPU share: the crypto share.

use reqcost_record::Frame;

use super::facts::{user_self_share, Ctx, Draft, PROFILE_MIN_SAMPLES};
use super::{CarriedBy, Needs, Rule};

pub(super) const RULE: Rule = Rule {
    id: "tls-handshake",
    seed: Some("seeds/001 and 004"),
    needs: &[Needs::Kernel, Needs::Profile, Needs::Requests],
    carried_by: CarriedBy::CpuClasses,
    judge,
};

/// Signal 1: at least this share of the samples with crypto as their innermost user frame.
const MIN_CRYPTO: f64 = 0.25;
/// Signal 2: connections accepted per request from this many: a handshake each.
const MIN_ACCEPTS: f64 = 0.9;
/// Silent when the server resumed at least this share of the handshakes the client offered to
/// resume.
const RESUMED: f64 = 0.5;
/// A third signal: the server resumed less than this share of them.
const REFUSED: f64 = 0.1;

/// Crypto dominates because every request pays for a full handshake.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let p = ctx.profile.filter(|p| p.samples >= PROFILE_MIN_SAMPLES)?;
    let w = &ctx.rec.workload;
    if !f.usable() || !matches!(w.protocol.as_str(), "gemini" | "https") {
        return None;
    }
    // Self time only: samples whose innermost user frame is crypto. Counting every chain that
    // passes through the TLS library would also count the socket writes it makes.
    let share = user_self_share(p, is_crypto);
    let accepts = f.kernel.map(|k| k.sockets.accepted as f64 / f.ok)?;
    // Signal 1: crypto is a large share of CPU; signal 2: about one connection, so one
    // handshake, per request.
    if share < MIN_CRYPTO || accepts < MIN_ACCEPTS {
        return None;
    }
    let offered = w.options.get("tls-resumption").is_some_and(|v| v == "true");
    let c = &f.phase.client;
    let server = f.phase.requests.as_ref().and_then(|r| {
        let told = r.tls_full_handshakes + r.tls_resumed_handshakes;
        (told > 0).then_some((r.tls_resumed_handshakes, told))
    });
    let resumed = match server {
        Some((resumed, told)) => Some(resumed as f64 / told as f64),
        None => c
            .tls_resumed
            .filter(|_| offered && c.connections > 0)
            .map(|r| r as f64 / c.connections as f64),
    };
    // A server that resumes sessions already does what can be done for a protocol that closes
    // per request (or a client that does): the crypto left is the floor, not a full handshake.
    if resumed.is_some_and(|r| r >= RESUMED) {
        return None;
    }
    // Signal 3: the client offered resumption and the server would not take it.
    let refused = offered && resumed.is_some_and(|r| r < REFUSED);
    Some(Draft {
        title: format!(
            "{:.0} % of CPU is TLS crypto: a full handshake on every request",
            share * 100.0
        ),
        evidence: vec![
            format!("{:.1} % of CPU samples in crypto code", share * 100.0),
            format!("{accepts:.2} connections accepted per request"),
            match (server, resumed) {
                (Some((n, told)), _) => format!(
                    "the server's TLS library: {} full and {n} resumed of {told} handshakes{}",
                    told - n,
                    if offered {
                        ", the client offered session resumption"
                    } else {
                        ""
                    }
                ),
                (None, Some(r)) => format!(
                    "the client offered session resumption; {:.0} % of {} handshakes resumed",
                    r * 100.0,
                    c.connections
                ),
                (None, None) if offered => "the client offered session resumption".into(),
                (None, None) => {
                    "the client did not offer session resumption (--no-tls-resume)".into()
                }
            },
        ],
        cpu_share: share,
        phase: f.phase.name.clone(),
        fix: "enable TLS session tickets/resumption and keep-alive; prefer ECDSA certificates and \
              X25519 key exchange",
        signals: 2 + usize::from(refused),
    })
}

/// Code of a TLS library (distro builds are stripped: their internal functions, where the bignum
/// and cipher work happens, only show as `libcrypto.so.3+0x...`, so the module says it), or a
/// crypto routine by name (statically linked: ring, Go's crypto/..., BoringSSL...).
fn is_crypto(frame: &Frame) -> bool {
    const LIBRARIES: &[&str] = &[
        "libcrypto",
        "libssl",
        "libgnutls",
        "libnettle",
        "libhogweed",
        "libgcrypt",
        "libmbedcrypto",
        "libmbedtls",
        "libwolfssl",
        "libs2n",
    ];
    const MARKERS: &[&str] = &[
        "aes",
        "sha256",
        "sha512",
        "sha1_",
        "x25519",
        "ecdsa",
        "ecp_nistz",
        "p256",
        "p384",
        "rsa",
        "bn_",
        "BN_",
        "EVP_",
        "chacha",
        "poly1305",
        "gcm",
        "ossl_",
        "mbedtls",
        "gnutls",
        "nettle",
        "curve25519",
        "ring_core",
        "montgomery",
        "mont_",
        "crypto/",
    ];
    let module = frame.module.rsplit('/').next().unwrap_or_default();
    LIBRARIES.iter().any(|l| module.starts_with(l))
        || MARKERS.iter().any(|m| frame.function.contains(m))
}
