//! How a command fails, and the one place its exit status is decided (README, "Exit status").
//! Clap's own parse errors exit with [`BAD_INPUT`] as well; only a stdout that cannot be written
//! ends the process elsewhere (`print::write_out`).

use std::process::ExitCode;

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
