//! What a failed run is blamed on: the kind of its failures, said in words that point at the
//! cause, and a crash told apart from the refusals that follow it.

use std::collections::BTreeMap;

use reqcost_record::ClientStats;

/// The most frequent error kind's likely cause (ties go to the kind named first in the
/// record's order, which is alphabetical).
pub fn blame(errors: &BTreeMap<String, u64>) -> &'static str {
    let worst = errors
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(kind, _)| kind.as_str());
    match worst {
        Some("refused") => "the server stopped accepting connections",
        Some("timeout") => {
            "the server stopped answering (raise --request-timeout if it is only slow)"
        }
        Some("connect-timeout") => "connections were not accepted in time (--connect-timeout)",
        Some("reset") => "the server reset the connections",
        Some("too-large") => "responses are larger than --max-response (raise it)",
        Some("protocol") => {
            "responses do not follow the --url scheme's protocol (is it the server's protocol?)"
        }
        Some("tls") => "TLS handshakes failed (does the server speak TLS on that port?)",
        _ => "the requests failed",
    }
}

/// Requests refused once the server has died were sent after the crash, not failed by it: the
/// phase ends at the crash, and they leave its count. Returns how many were taken out.
pub fn end_at_crash(client: &mut ClientStats) -> u64 {
    let refused = client.errors.remove("refused").unwrap_or(0);
    client.requests -= refused.min(client.requests);
    refused
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(kinds: &[(&str, u64)]) -> BTreeMap<String, u64> {
        kinds.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    }

    #[test]
    fn each_kind_is_blamed_on_its_own_cause() {
        for (kind, says) in [
            ("refused", "stopped accepting"),
            ("timeout", "stopped answering"),
            ("too-large", "--max-response"),
            ("protocol", "protocol"),
            ("tls", "TLS"),
            ("reset", "reset"),
        ] {
            assert!(blame(&errors(&[(kind, 3)])).contains(says), "{kind}");
        }
        let mixed = errors(&[("refused", 1), ("too-large", 5)]);
        assert!(blame(&mixed).contains("--max-response"));
    }

    #[test]
    fn refusals_after_a_crash_leave_the_phase() {
        let mut client = ClientStats {
            requests: 200,
            ok: 150,
            errors: errors(&[("refused", 45), ("reset", 5)]),
            ..ClientStats::default()
        };
        assert_eq!(end_at_crash(&mut client), 45);
        assert_eq!(client.requests, 155);
        assert_eq!(client.errors, errors(&[("reset", 5)]));
    }
}
