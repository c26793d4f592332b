//! How a command fails, and the one place its exit status is decided (README, "Exit status").
//! Clap's own parse errors exit with [`BAD_INPUT`] as well; only a stdout that cannot be written
//! ends the process elsewhere (`print::write_out`).

use std::process::ExitCode;

use reqcost_measure::MeasureError;
use reqcost_server::TargetError;

/// Input reqcost could not use: a flag, a file, a record.
const BAD_INPUT: u8 = 2;
/// A run that went wrong (the server died, an interruption, failed requests, a failed push),
/// or a check that found a regression.
const RUN_FAILED: u8 = 1;

/// A failure with the exit code it deserves, and its one-line error.
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    pub fn bad_input(message: impl ToString) -> Failure {
        Failure {
            code: BAD_INPUT,
            message: message.to_string(),
        }
    }

    pub fn run(message: impl ToString) -> Failure {
        Failure {
            code: RUN_FAILED,
            message: message.to_string(),
        }
    }
}

/// A measurement that could not start, said with the flags that set what it could not use.
impl From<MeasureError> for Failure {
    fn from(e: MeasureError) -> Failure {
        match e {
            MeasureError::EmptyLoadCommand => Failure::bad_input(
                "--load is empty: give the client command, e.g. --load 'h2load -n 1000 -c {c} http://127.0.0.1:8080/'",
            ),
            MeasureError::NoConcurrency => Failure::bad_input("-c must be at least 1"),
            MeasureError::Target(e) if e.is_bad_input() => Failure::bad_input(e),
            MeasureError::Target(e) | MeasureError::Attach(e) => Failure::from(e),
            MeasureError::Pin { .. } => Failure::run(format!("{e} (use --no-pin)")),
            MeasureError::NotAccepting { pid, .. } => {
                Failure::run(format!("{e} (is process {pid} serving that --url?)"))
            }
            MeasureError::NotListening { pid, port, owner } => Failure::run(format!(
                "process {pid} does not listen on port {port} of --url, {owner}: pass its pid to --pid"
            )),
            MeasureError::NotReady { .. } => Failure::run(format!(
                "{e} (pass the pid of the process that serves the port to --pid)"
            )),
            MeasureError::NotReadyInTime {
                secs,
                readiness,
                tail,
            } => Failure::run(format!(
                "the server was not ready within {secs} s: reqcost waits until {readiness} (give \
                 --port, or --url for a TCP server; raise --startup-timeout if it starts \
                 slowly){tail}"
            )),
            MeasureError::MetricsListen { addr, source } => {
                Failure::run(format!("--metrics {addr}: cannot listen: {source}"))
            }
            MeasureError::MetricsThread(e) => {
                Failure::run(format!("--metrics: cannot start its thread: {e}"))
            }
            _ => Failure::run(e),
        }
    }
}

/// A server that could not be launched or found, said with the flag that would change it.
impl From<TargetError> for Failure {
    fn from(e: TargetError) -> Failure {
        match e {
            TargetError::PortNeverOpened { addr, secs, tail } => Failure::run(format!(
                "server did not accept connections on {addr} within {secs} s (is it listening on \
                 that port? raise --startup-timeout if it starts slowly){tail}"
            )),
            TargetError::SeveralListeners { .. } => {
                Failure::run(format!("{e}: choose one with --pid"))
            }
            _ => Failure::run(e),
        }
    }
}

/// A command's exit status, its error said on stderr.
pub fn exit_status(result: Result<(), Failure>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(e: MeasureError) -> (u8, String) {
        let f = Failure::from(e);
        (f.code, f.message)
    }

    #[test]
    fn measurement_errors_get_their_flags_and_exit_status() {
        let (code, message) = failure(MeasureError::NotReadyInTime {
            secs: 10,
            readiness: "its tree listens on a TCP port or has a UDP port bound".into(),
            tail: "; its log: x".into(),
        });
        assert_eq!(code, RUN_FAILED);
        assert_eq!(
            message,
            "the server was not ready within 10 s: reqcost waits until its tree listens on a TCP \
             port or has a UDP port bound (give --port, or --url for a TCP server; raise \
             --startup-timeout if it starts slowly); its log: x"
        );
        let (code, message) = failure(MeasureError::NotReady {
            pid: 7,
            readiness: "it accepts TCP connections on 127.0.0.1:80".into(),
        });
        assert_eq!(code, RUN_FAILED);
        assert_eq!(
            message,
            "process 7 is not ready: reqcost needs it accepts TCP connections on 127.0.0.1:80 \
             (pass the pid of the process that serves the port to --pid)"
        );
        let (code, message) = failure(MeasureError::NotAccepting {
            addr: "127.0.0.1:80".parse().unwrap(),
            pid: 7,
        });
        assert_eq!(code, RUN_FAILED);
        assert_eq!(
            message,
            "nothing accepts connections on 127.0.0.1:80 (is process 7 serving that --url?)"
        );
        assert_eq!(failure(MeasureError::NoConcurrency).0, BAD_INPUT);
    }

    /// A pid that is not there is bad input to `run --pid`, and a failed run to `attach`.
    #[test]
    fn a_missing_server_is_bad_input_only_where_it_was_named() {
        let run = failure(MeasureError::Target(TargetError::NoSuchPid(7)));
        let attach = failure(MeasureError::Attach(TargetError::NoSuchPid(7)));
        assert_eq!(run.0, BAD_INPUT);
        assert_eq!(attach.0, RUN_FAILED);
        assert_eq!(run.1, attach.1);
        assert_eq!(
            failure(MeasureError::Target(TargetError::Interrupted)).0,
            RUN_FAILED
        );
    }

    /// The server crate's messages name no flag; the command adds the one that would help.
    #[test]
    fn launch_errors_get_their_flags_here() {
        let never = failure(MeasureError::Target(TargetError::PortNeverOpened {
            addr: "127.0.0.1:80".parse().unwrap(),
            secs: 10,
            tail: "; its log: x".into(),
        }));
        assert_eq!(
            never,
            (
                RUN_FAILED,
                "server did not accept connections on 127.0.0.1:80 within 10 s (is it listening \
                 on that port? raise --startup-timeout if it starts slowly); its log: x"
                    .into()
            )
        );
        let several = Failure::from(TargetError::SeveralListeners {
            port: 80,
            pids: vec![1, 2],
        });
        assert_eq!(
            several.message,
            "several unrelated processes listen on TCP port 80 (pids [1, 2]): choose one with --pid"
        );
    }
}
