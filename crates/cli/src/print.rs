//! What a command prints on stdout: text for people or JSON for programs, chosen once by
//! `--json` (oha's `printer.rs` is the model).

use serde::Serialize;

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
            PrintMode::Json => println!(
                "{}",
                serde_json::to_string_pretty(value).expect("reqcost's results serialize")
            ),
            PrintMode::Text => print!("{}", render(value)),
        }
    }

    /// A side remark on stderr, for people only: programs reading the JSON get no chatter.
    pub fn note(self, message: impl std::fmt::Display) {
        if self == PrintMode::Text {
            eprintln!("{message}");
        }
    }
}
