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
//! - **Where connections carry several requests** (< 0.9 accepted per request), it judges per
//!   connection from the server's own figures: signal 1 **its full handshakes hold ≥ 25 % of
//!   the CPU** (their CPU as the server's TLS library told them apart), signal 2 **≥ 90 % of
//!   its handshakes were full** (none resumed: each connection pays for one).
//! - For gemini:// and https:// workloads, and for any run (`--load`, `attach`) whose server's
//!   TLS library was hooked and counted handshakes. CPU share: the crypto share, or the full
//!   handshakes' CPU where the server told it, whichever is larger.

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
/// Per connection: the server's full handshakes hold this share of the CPU...
const MIN_HANDSHAKE_CPU: f64 = 0.25;
/// ... and are this share of its handshakes at least.
const MIN_FULL: f64 = 0.9;

/// Whether the run is TLS as the rule judges it: reqcost's own TLS client drove it, or the
/// server's TLS library counted its handshakes (any client, or its own under `attach`).
pub(super) fn is_tls(ctx: &Ctx) -> bool {
    matches!(ctx.rec.workload.protocol.as_str(), "gemini" | "https")
        || ctx
            .main
            .phase
            .requests
            .as_ref()
            .is_some_and(|r| r.tls_handshakes > 0)
}

/// Crypto dominates because every request, or every connection, pays for a full handshake.
fn judge(ctx: &Ctx) -> Option<Draft> {
    let f = &ctx.main;
    let p = ctx.profile.filter(|p| p.samples >= PROFILE_MIN_SAMPLES)?;
    let w = &ctx.rec.workload;
    if !f.usable() || !is_tls(ctx) {
        return None;
    }
    // Self time only: samples whose innermost user frame is crypto. Counting every chain that
    // passes through the TLS library would also count the socket writes it makes.
    let crypto = user_self_share(p, is_crypto);
    let accepts = f.kernel.map(|k| k.sockets.accepted as f64 / f.ok)?;
    let told = f.phase.requests.as_ref().and_then(|r| {
        let told = r.tls_full_handshakes + r.tls_resumed_handshakes;
        (told > 0).then(|| Told {
            full: r.tls_full_handshakes,
            resumed: r.tls_resumed_handshakes,
            full_share: f.share(r.tls_full_handshake_cpu_ns as f64 / f.ok),
        })
    });
    // Signal 1: crypto is a large share of CPU; signal 2: about one connection, so one
    // handshake, per request. Over connections carrying several requests, the server's own
    // count says whether each paid for a full handshake, and what they cost.
    let per_request = crypto >= MIN_CRYPTO && accepts >= MIN_ACCEPTS;
    let per_connection = told.as_ref().is_some_and(|t| {
        t.full_share >= MIN_HANDSHAKE_CPU && t.full as f64 / t.told() as f64 >= MIN_FULL
    });
    if !per_request && !per_connection {
        return None;
    }
    let offered = w.options.get("tls-resumption").is_some_and(|v| v == "true");
    let c = &f.phase.client;
    let resumed = match &told {
        Some(t) => Some(t.resumed as f64 / t.told() as f64),
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
    let share = told.as_ref().map_or(crypto, |t| t.full_share.max(crypto));
    let on = if accepts >= MIN_ACCEPTS {
        "every request".to_string()
    } else {
        format!("every connection ({:.1} requests each)", 1.0 / accepts)
    };
    let evidence = [
        Some(format!("{:.1} % of CPU samples in crypto code", crypto * 100.0)),
        Some(format!("{accepts:.2} connections accepted per request")),
        Some(match (&told, resumed) {
            (Some(t), _) => t.describe(offered),
            (None, Some(r)) => format!(
                "the client offered session resumption; {:.0} % of {} handshakes resumed",
                r * 100.0,
                c.connections
            ),
            (None, None) if offered => "the client offered session resumption".into(),
            (None, None) => {
                "the client did not offer session resumption (--no-tls-resume)".into()
            }
        }),
    ];
    Some(Draft {
        title: format!(
            "{:.0} % of CPU is TLS crypto: a full handshake on {on}",
            share * 100.0
        ),
        evidence: evidence.into_iter().flatten().collect(),
        cpu_share: share,
        phase: f.phase.name.clone(),
        fix: "enable TLS session tickets/resumption and keep-alive; prefer ECDSA certificates and \
              X25519 key exchange",
        signals: 2 + usize::from(refused),
    })
}

/// The handshakes the server's TLS library told apart.
struct Told {
    full: u64,
    resumed: u64,
    /// Share of the phase's CPU in the full ones.
    full_share: f64,
}

impl Told {
    fn told(&self) -> u64 {
        self.full + self.resumed
    }

    fn describe(&self, offered: bool) -> String {
        let cpu = if self.full_share > 0.0 {
            format!(
                "; the full ones {:.0} % of the CPU",
                self.full_share * 100.0
            )
        } else {
            String::new()
        };
        format!(
            "the server's TLS library: {} full and {} resumed of {} handshakes{}{cpu}",
            self.full,
            self.resumed,
            self.told(),
            if offered {
                ", the client offered session resumption"
            } else {
                ""
            }
        )
    }
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
