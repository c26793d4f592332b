//! How a command fails, and the one place its exit status is decided (README, "Exit status").
//! Clap's own parse errors exit with [`BAD_INPUT`] as well; only a stdout that cannot be written
//! ends the process elsewhere (`print::write_out`).

use std::process::ExitCode;

use reqcost_measure::MeasureError;

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
