//! dominant-code (generic): when the findings explain < 50 % of the CPU, the module holding
//! ≥ 25 % of the samples is named, in words for the libraries people know.

use reqcost_analysis::findings::diagnose;
use reqcost_record::{RunRecord, SampleTag, UNATTRIBUTED};

use crate::util::{add_stack, assert_evidence, edit, edited, fired, main, set_syscall, user_frame};

/// The clean fixture (200 samples) with `samples` more in `function` of `module`, called from
/// the server's main.
pub(crate) fn hot(function: &str, module: &str, samples: u64) -> RunRecord {
    edited(|r| {
        let chain = [
            user_frame(function, module),
            user_frame("pcre2_match_8", module),
            user_frame("handle", "server"),
            user_frame("main", "server"),
        ];
        add_stack(r, &chain, samples);
    })
}

#[test]
fn names_the_module_holding_a_quarter_of_the_cpu_when_nothing_else_explains_it() {
    // 67 of 267 samples: 25.1 %.
    let rec = hot("libpcre2-8.so.0!0x3a10", "libpcre2-8.so.0.11.2", 67);
    let f = fired(&rec, "dominant-code");
    assert_eq!(
        f.title,
        "generic: libpcre2-8.so.0.11.2 (regular expressions (PCRE)) holds 25 % of the CPU, which no rule of the catalog explains"
    );
    assert_evidence(
        &f,
        &[
            "its hottest function libpcre2-8.so.0!0x3a10 25 % self",
            "entered through pcre2_match_8 from handle [server]",
            "the catalog's findings explain 0 % of the CPU: this finding is generic",
        ],
    );
    assert!(f.fix.contains("pcre_jit"), "{}", f.fix);
    // Under a quarter, nothing is named.
    let below = hot("libpcre2-8.so.0!0x3a10", "libpcre2-8.so.0.11.2", 66);
    assert!(diagnose(&below).iter().all(|f| f.id != "dominant-code"));
}

#[test]
fn is_silent_when_the_rules_explain_half_the_cpu() {
    // zlib at 200 of 400 samples: compress-per-request explains 50 %, nothing generic is added.
    let rec = super::compress_per_request::gzip(200);
    let ids: Vec<String> = diagnose(&rec).into_iter().map(|f| f.id).collect();
    assert_eq!(ids, ["compress-per-request"]);
}

#[test]
fn crypto_under_a_tls_workload_is_left_to_tls_handshake() {
    let crypto = |protocol: &str| {
        let mut rec = hot("libcrypto.so.3!0x232c20", "libcrypto.so.3", 200);
        rec.workload.protocol = protocol.into();
        rec
    };
    let f = fired(&crypto("http"), "dominant-code");
    assert!(
        f.title.contains("libcrypto.so.3 (cryptography (TLS))"),
        "{}",
        f.title
    );
    assert!(diagnose(&crypto("https"))
        .iter()
        .all(|f| f.id != "dominant-code"));
    // Under any client, once the server's TLS library counted its handshakes.
    let counted = edit(crypto("external"), |r| {
        main(r)
            .requests
            .get_or_insert_with(Default::default)
            .tls_handshakes = 10
    });
    assert!(diagnose(&counted).iter().all(|f| f.id != "dominant-code"));
    fired(&crypto("external"), "dominant-code");
}

#[test]
fn a_crypto_library_that_hashes_is_named_by_what_its_functions_do() {
    // OpenSSL's SHA-256 block function under PBKDF2: hashing, named under TLS too, where
    // tls-handshake does not judge it.
    let pbkdf2 = |protocol: &str| {
        let mut rec = hot("sha256_block_data_order_avx2", "libcrypto.so.3", 200);
        rec.workload.protocol = protocol.into();
        rec
    };
    for protocol in ["http", "https"] {
        let f = fired(&pbkdf2(protocol), "dominant-code");
        assert!(
            f.title.starts_with(
                "generic: libcrypto.so.3 (hashing (SHA, HMAC, PBKDF2 key derivation)) holds"
            ),
            "{protocol}: {}",
            f.title
        );
        assert!(f.fix.contains("cache derived keys"), "{}", f.fix);
    }
    // AES-GCM in the same library is TLS work.
    let aes = hot("aesni_gcm_encrypt", "libcrypto.so.3", 200);
    assert!(fired(&aes, "dominant-code")
        .title
        .contains("libcrypto.so.3 (cryptography (TLS))"));
}

/// `rec` with `samples` of PCRE's leaf added, their threads serving `class` (the fixture's own
/// samples untagged).
fn pcre_in(rec: RunRecord, samples: u64, class: &str) -> RunRecord {
    edit(rec, |r| {
        let chain = [
            user_frame("libpcre2-8.so.0!0x3a10", "libpcre2-8.so.0.11.2"),
            user_frame("main", "server"),
        ];
        add_stack(r, &chain, samples);
        let p = r.profile.as_mut().unwrap();
        p.tags.push(SampleTag {
            class: class.into(),
            ..Default::default()
        });
        p.stacks.last_mut().unwrap().tag = Some(p.tags.len() as u32 - 1);
    })
}

fn ids(rec: &RunRecord) -> Vec<String> {
    diagnose(rec).into_iter().map(|f| f.id).collect()
}

/// A pre-fork server recycling its workers: the interpreter each new worker starts holds more
/// samples than process-per-request's calls explain, but they were taken outside any request,
/// in the start-up process-per-request's evidence names; inside requests it is the requests' own.
#[test]
fn ranks_below_a_set_up_finding_when_its_samples_are_outside_requests() {
    // process-per-request at 25 %; PCRE at 150 of 350 samples, 43 %.
    let forking = super::process_per_request::forks(50, 50);
    let outside = pcre_in(forking.clone(), 150, UNATTRIBUTED);
    assert_eq!(ids(&outside), ["process-per-request", "dominant-code"]);
    assert_evidence(
        &fired(&outside, "dominant-code"),
        &["100 % of its samples were taken outside any request"],
    );
    let inside = pcre_in(forking, 150, "/search");
    assert_eq!(ids(&inside), ["dominant-code", "process-per-request"]);
    assert_evidence(
        &fired(&inside, "dominant-code"),
        &["0 % of its samples were taken outside any request"],
    );
}

/// Two shares over the whole must overlap: PCRE at 75 % and process-per-request at 45 % cannot
/// both be apart, whatever the tags say.
#[test]
fn ranks_below_a_finding_whose_share_with_its_own_exceeds_the_whole() {
    let heavy_clones = edit(super::process_per_request::forks(50, 50), |r| {
        set_syscall(main(r), "clone", 50, 50 * 18_000)
    });
    let rec = pcre_in(heavy_clones, 600, "/search");
    let findings = diagnose(&rec);
    let ids: Vec<&str> = findings.iter().map(|f| f.id.as_str()).collect();
    assert_eq!(
        ids,
        ["process-per-request", "dominant-code"],
        "{findings:#?}"
    );
    assert!(
        findings[1].cpu_share > findings[0].cpu_share,
        "{findings:#?}"
    );
}
