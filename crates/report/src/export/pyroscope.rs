//! A run's profile pushed to a Pyroscope server: the pprof exporter's bytes POSTed to its
//! ingest API (`/ingest?name=SERVICE{labels}&format=pprof&...`, as Pyroscope v1 reads it) over a
//! small blocking HTTP/1.1 client, so that no TLS or async stack comes in for one request.

use std::fmt;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::str::FromStr;
use std::time::Duration;

use reqcost_analysis::reading::Reading;

use reqcost_analysis::tagged::split;
use reqcost_record::Profile;

use super::pprof::{gzipped, program, Pprof};
use super::{Exporter, Subject};

/// Long enough for a loaded server across a network, short enough that a dead one does not
/// hold a finished run's command for minutes.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Where a Pyroscope server listens: `http://HOST[:PORT][/PREFIX]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyroscopeUrl {
    /// `HOST:PORT`, as given or with port 80.
    authority: String,
    /// The path Pyroscope is served under, without the trailing slash (often empty).
    prefix: String,
}

impl FromStr for PyroscopeUrl {
    type Err = String;

    fn from_str(s: &str) -> Result<PyroscopeUrl, String> {
        if s.starts_with("https://") {
            return Err(format!(
                "\"{s}\": https is not supported by the push; use the server's http:// address \
                 (or a local proxy that adds TLS)"
            ));
        }
        let rest = s.strip_prefix("http://").ok_or_else(|| {
            format!(
                "\"{s}\" is not a Pyroscope URL: use http://HOST:PORT, e.g. http://127.0.0.1:4040"
            )
        })?;
        let (authority, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if authority.is_empty() {
            return Err(format!(
                "\"{s}\" names no host: use http://HOST:PORT, e.g. http://127.0.0.1:4040"
            ));
        }
        let authority = match authority.rsplit_once(':') {
            Some((_, port)) if !port.contains(']') => authority.to_string(),
            _ => format!("{authority}:80"),
        };
        let prefix = prefix.trim_end_matches('/');
        Ok(PyroscopeUrl {
            authority,
            prefix: if prefix.is_empty() {
                String::new()
            } else {
                format!("/{prefix}")
            },
        })
    }
}

impl fmt::Display for PyroscopeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}{}", self.authority, self.prefix)
    }
}

/// Pushes the profile of the run `reading` read to `url` as the service `service` (by default
/// the server binary's file name), one series per request class when the samples are tagged,
/// or says why the server did not take it.
pub fn push(url: &PyroscopeUrl, service: Option<&str>, reading: &Reading) -> Result<(), String> {
    for (class, body) in series(reading)? {
        let query = ingest_query(reading, service, class.as_deref());
        post(
            &url.authority,
            &format!("{}/ingest?{query}", url.prefix),
            &body,
        )?;
    }
    Ok(())
}

/// A series' `class` label (none for an untagged profile) and its gzipped pprof.
type Series = (Option<String>, Vec<u8>);

/// The pprof bodies to push with their `class` label: one per class of the tagged samples (so
/// that Pyroscope's label queries and its diff view work per class, as its own SDKs' dynamic
/// tags do), the samples without a tag under `(untagged)`; the whole profile, unlabelled,
/// when the samples carry no tags.
fn series(reading: &Reading) -> Result<Vec<Series>, String> {
    series_of(reading, MAX_SERIES)
}

/// [`series`] with at most `most` series.
fn series_of(reading: &Reading, most: usize) -> Result<Vec<Series>, String> {
    let Some(p) = reading.profile.filter(|p| !p.tags.is_empty()) else {
        return Ok(vec![(None, Pprof.serialize(&Subject::Run(reading))?)]);
    };
    let program = program(reading.run.target);
    let mut groups = split(p, "class")?;
    if groups.len() > most {
        let rest = groups.split_off(most - 1);
        let mut merged = Profile {
            stacks: Vec::new(),
            samples: 0,
            ..p.clone()
        };
        for (_, g) in rest {
            merged.samples += g.samples;
            merged.stacks.extend(g.stacks);
        }
        groups.push((OTHER_CLASSES.to_string(), merged));
    }
    groups
        .into_iter()
        .map(|(class, g)| Ok((Some(class), gzipped(&g, program)?)))
        .collect()
}

/// Series pushed at most, one POST each: the classes with fewest samples beyond the first
/// `MAX_SERIES - 1` go together under [`OTHER_CLASSES`] (a replayed log may hold a thousand).
const MAX_SERIES: usize = 32;
const OTHER_CLASSES: &str = "(other classes)";

/// The ingest API's query: the series name with its labels (an empty one left out; `class`
/// for a class's series), the time range in Unix seconds, the sampling rate, and the body's
/// format.
pub(super) fn ingest_query(
    reading: &Reading,
    service: Option<&str>,
    class: Option<&str>,
) -> String {
    let run = reading.run;
    let service = service_name(service.or_else(|| program(run.target)).unwrap_or("reqcost"));
    let phases: Vec<&str> = reading
        .analysis
        .phases
        .iter()
        .map(|p| p.name.as_str())
        .collect();
    let labels = [
        ("run_id", reading.analysis.run_id.clone()),
        ("phases", phases.join("+")),
        ("reqcost_version", run.reqcost_version.to_string()),
        ("class", class.unwrap_or_default().to_string()),
    ]
    .iter()
    .filter(|(_, v)| !v.is_empty())
    .map(|(k, v)| format!("{k}={}", label_value(v)))
    .collect::<Vec<_>>()
    .join(",");
    let (period_ns, duration_s) = reading
        .profile
        .map_or((0, 0.0), |p| (p.period_ns, p.duration_s));
    let from = run.started_unix_s.floor() as u64;
    let until = ((run.started_unix_s + duration_s).ceil() as u64).max(from + 1);
    let rate = 1e9 / period_ns.max(1) as f64;
    format!(
        "name={}&from={from}&until={until}&format=pprof&sampleRate={}&spyName=reqcost",
        percent_encode(&format!("{service}{{{labels}}}")),
        rate.round() as u64
    )
}

/// Pyroscope takes letters, digits and `_ . - /` in a service name; anything else becomes `_`.
fn service_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-/".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Label values end at `,` and `}` in the series name: those become `_`.
fn label_value(v: &str) -> String {
    v.replace([',', '}'], "_")
}

pub(super) fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One `POST target` to `authority`; Ok on a 2xx answer, otherwise its status line and the
/// first line of its body.
fn post(authority: &str, target: &str, body: &[u8]) -> Result<(), String> {
    let addr = authority
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {authority}: {e}"))?
        .next()
        .ok_or_else(|| format!("{authority} has no address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)
        .map_err(|e| format!("cannot connect to {addr}: {e} (is Pyroscope listening there?)"))?;
    stream.set_read_timeout(Some(TIMEOUT)).ok();
    stream.set_write_timeout(Some(TIMEOUT)).ok();
    let head = format!(
        "POST {target} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: reqcost/{}\r\n\
         Content-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        env!("CARGO_PKG_VERSION"),
        body.len()
    );
    let mut answer = Vec::new();
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body))
        .and_then(|()| stream.take(64 * 1024).read_to_end(&mut answer))
        .map_err(|e| format!("{addr}: {e}"))?;
    status_of(&String::from_utf8_lossy(&answer))
}

/// Ok for a 2xx response, otherwise `HTTP 422 Unprocessable Entity: first body line`.
fn status_of(response: &str) -> Result<(), String> {
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((response, ""));
    let status = head.lines().next().unwrap_or("");
    let code = status.split(' ').nth(1).unwrap_or("");
    if code.starts_with('2') && code.len() == 3 {
        return Ok(());
    }
    if status.is_empty() {
        return Err("the server closed the connection without an answer".into());
    }
    let reason = status.split_once(' ').map_or(status, |(_, r)| r);
    match body.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(line) => Err(format!("{reason}: {line}")),
        None => Err(reason.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::profile_run;
    use reqcost_record::{RunRecord, SampleTag};

    #[test]
    fn urls_take_http_only() {
        let u: PyroscopeUrl = "http://127.0.0.1:4040/".parse().unwrap();
        assert_eq!(u.to_string(), "http://127.0.0.1:4040");
        let u: PyroscopeUrl = "http://pyro.internal/base/".parse().unwrap();
        assert_eq!(u.to_string(), "http://pyro.internal:80/base");
        let u: PyroscopeUrl = "http://[::1]".parse().unwrap();
        assert_eq!(u.to_string(), "http://[::1]:80");
        let e = "https://x:4040".parse::<PyroscopeUrl>().unwrap_err();
        assert!(e.contains("https is not supported"), "{e}");
        let e = "x:4040".parse::<PyroscopeUrl>().unwrap_err();
        assert!(e.contains("use http://HOST:PORT"), "{e}");
        assert!("http:///x".parse::<PyroscopeUrl>().is_err());
    }

    #[test]
    fn the_query_names_the_service_and_its_labels() {
        let mut rec = profile_run();
        rec.id = "r,1}".into();
        let q = ingest_query(&Reading::of(&rec, None), Some("my app:v2"), None);
        let name = format!(
            "my_app_v2{{run_id=r_1_,reqcost_version={}}}",
            rec.reqcost_version
        );
        assert!(
            q.starts_with(&format!("name={}&", percent_encode(&name))),
            "{q}"
        );
        assert!(q.contains("&format=pprof&"), "{q}");
        let rate = 1e9 / rec.profile.as_ref().unwrap().period_ns as f64;
        assert!(q.contains(&format!("&sampleRate={}&", rate.round())), "{q}");
        let from = rec.started_unix_s.floor() as u64;
        assert!(q.contains(&format!("&from={from}&until=")), "{q}");
    }

    #[test]
    fn the_service_defaults_to_the_server_binary_and_phases_join_with_plus() {
        let rec = RunRecord::from_json(include_str!(
            "../../../analysis/tests/fixtures/busy-wait.json"
        ))
        .unwrap();
        let q = ingest_query(&Reading::of(&rec, None), None, Some("GET /a,b"));
        let name = "busy-wait{run_id=";
        assert!(
            q.starts_with(&format!("name={}", percent_encode(name))),
            "{q}"
        );
        let phases = ",phases=main+slow-clients,";
        assert!(q.contains(&percent_encode(phases)), "{q}");
        let class = ",class=GET /a_b}";
        assert!(q.contains(&percent_encode(class)), "{q}");
    }

    #[test]
    fn many_classes_go_as_at_most_max_series_series() {
        let mut rec = profile_run();
        let p = rec.profile.as_mut().unwrap();
        let classes = p.stacks.len();
        assert!(classes > 2);
        p.tags = (0..classes)
            .map(|i| SampleTag {
                class: format!("/c{i}"),
                ..SampleTag::default()
            })
            .collect();
        for (i, s) in p.stacks.iter_mut().enumerate() {
            s.tag = Some(i as u32);
        }
        let reading = Reading::of(&rec, None);
        assert_eq!(series(&reading).unwrap().len(), classes);
        let few = 2;
        let names: Vec<Option<String>> = series_of(&reading, few)
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names.len(), few);
        assert_eq!(names[few - 1].as_deref(), Some(OTHER_CLASSES));
    }

    #[test]
    fn answers_become_errors_with_their_status_and_body() {
        assert_eq!(status_of("HTTP/1.1 200 OK\r\n\r\n"), Ok(()));
        assert_eq!(
            status_of("HTTP/1.1 422 Unprocessable Entity\r\nX: y\r\n\r\n\nbad name\nmore"),
            Err("422 Unprocessable Entity: bad name".into())
        );
        assert_eq!(
            status_of("HTTP/1.1 404 Not Found\r\n\r\n"),
            Err("404 Not Found".into())
        );
        assert!(status_of("").unwrap_err().contains("without an answer"));
    }
}
