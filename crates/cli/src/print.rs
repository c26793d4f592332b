//! What a command prints on stdout: text for people or JSON for programs, chosen once by
//! `--json` (oha's `printer.rs` is the model).

use std::io::Write;

use reqcost_analysis::reading::Reading;
use reqcost_record::{RunRecord, Unit};
use serde::Serialize;

/// `println!` that never panics: see [`write_out`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::print::write_out(&format!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;

/// Writes `text` on stdout. When its reader has gone (`reqcost report R | head -1`), reqcost
/// ends quietly with success, as Unix tools do: nothing it prints next would be read.
pub fn write_out(text: &str) {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(0),
        Err(e) => {
            eprintln!("error: cannot write to stdout: {e}");
            std::process::exit(1)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrintMode {
    Text,
    Json,
}

impl PrintMode {
    pub fn from_json_flag(json: bool) -> PrintMode {
        if json {
            PrintMode::Json
        } else {
            PrintMode::Text
        }
    }

    /// Prints `value` as pretty JSON, or as the text `render` makes of it.
    pub fn print<T: Serialize>(self, value: &T, render: impl FnOnce(&T) -> String) {
        match self {
            PrintMode::Json => outln!("{}", json(value)),
            PrintMode::Text => write_out(&render(value)),
        }
    }

    /// A side remark on stderr, for people only: programs reading the JSON get no chatter.
    pub fn note(self, message: impl std::fmt::Display) {
        if self == PrintMode::Text {
            eprintln!("{message}");
        }
    }
}

fn json<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).expect("reqcost's results serialize")
}

/// What `run` and `report` print about one run: the summary for people, reqcost's analysis of
/// it for programs (`--json`, docs/analysis.md), or the run record itself (`--record-json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOutput {
    shown: Shown,
    /// The per-unit figures per this unit (`--per`), or per each phase's default.
    per: Option<Unit>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shown {
    Summary,
    Analysis,
    Record,
}

impl RunOutput {
    pub fn from_flags(json: bool, record_json: bool) -> RunOutput {
        let shown = match (json, record_json) {
            (_, true) => Shown::Record,
            (true, false) => Shown::Analysis,
            (false, false) => Shown::Summary,
        };
        RunOutput { shown, per: None }
    }

    /// Progress and side remarks go to people only.
    pub fn mode(self) -> PrintMode {
        PrintMode::from_json_flag(self.shown != Shown::Summary)
    }

    /// The figures per `per` (`--per`), in the summary and the analysis alike; the record
    /// itself keeps its totals.
    pub fn per(self, per: Option<Unit>) -> RunOutput {
        RunOutput { per, ..self }
    }

    /// The command's one reading of `record`, which every output of it shows.
    pub fn read(self, record: &RunRecord) -> Reading<'_> {
        Reading::of(record, self.per)
    }

    /// The output asked for of `record`, which `reading` read.
    pub fn print(self, record: &RunRecord, reading: &Reading) {
        match self.shown {
            Shown::Summary => write_out(&reqcost_report::summary(reading)),
            Shown::Analysis => outln!("{}", json(&reading.analysis)),
            Shown::Record => outln!("{}", json(record)),
        }
    }
}
