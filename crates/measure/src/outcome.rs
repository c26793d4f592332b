//! How a measured run ends: why it must stop after a phase (a signal, a dead server, failed
//! requests), what the failures are blamed on, and a crash told apart from the refusals that
//! follow it.

use std::collections::BTreeMap;

use reqcost_record::{ClientStats, Outcome, Phase};
use reqcost_server::Server;
use reqcost_workload::PhaseSpec;

use crate::signals;

/// Why the run must stop after this phase, if it must: a signal, a dead server, a warm-up
/// without one answer, a failed main.
pub(super) fn early_outcome(
    phases: &mut [Phase],
    spec: &PhaseSpec,
    client: &ClientStats,
    server: &mut Server,
) -> Option<Outcome> {
    let crashed = !signals::interrupted() && server.exited().is_some();
    let cut = match phases.last_mut().filter(|_| crashed && spec.measured) {
        Some(phase) => end_at_crash(&mut phase.client),
        None => 0,
    };
    let after = match cut {
        0 => String::new(),
        n => {
            format!(" (the phase ends there: {n} requests refused after the crash are not counted)")
        }
    };
    stopped_outcome(&spec.name, &after, server)
        .or_else(|| failed_warmup(spec, client))
        .or_else(|| failed_main(phases, spec))
}

/// A signal, or a server that died during phase `phase` (`after` says what that did to the
/// phase's figures).
pub(crate) fn stopped_outcome(phase: &str, after: &str, server: &mut Server) -> Option<Outcome> {
    if signals::interrupted() {
        return Some(Outcome::Interrupted);
    }
    let exit = server.exited()?;
    Some(Outcome::ServerDied {
        detail: format!("{exit} during phase {phase}{after}{}", server.log_tail()),
    })
}

/// A warm-up that got no answer at all: measuring after it would only measure failures.
fn failed_warmup(spec: &PhaseSpec, client: &ClientStats) -> Option<Outcome> {
    (!spec.measured && client.ok == 0 && client.requests > 0).then(|| Outcome::Failed {
        detail: failures(client, "warm-up requests"),
    })
}

/// A main phase with no answer, or refused connections, makes the run a failure.
fn failed_main(phases: &[Phase], spec: &PhaseSpec) -> Option<Outcome> {
    let main = phases
        .last()
        .filter(|p| spec.measured && p.name == "main")?;
    (main.client.ok == 0 || main.client.errors.contains_key("refused")).then(|| Outcome::Failed {
        detail: failures(&main.client, "requests"),
    })
}

/// `N of M WHAT failed (KIND COUNT, ...)`.
fn failures(client: &ClientStats, what: &str) -> String {
    format!(
        "{} of {} {what} failed ({}): {}",
        client.error_count(),
        client.requests,
        error_kinds(&client.errors),
        blame(&client.errors)
    )
}

fn error_kinds(errors: &BTreeMap<String, u64>) -> String {
    errors
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The most frequent error kind's likely cause (ties go to the kind named first in the
/// record's order, which is alphabetical).
fn blame(errors: &BTreeMap<String, u64>) -> &'static str {
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
fn end_at_crash(client: &mut ClientStats) -> u64 {
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
