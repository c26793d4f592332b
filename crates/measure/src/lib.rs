//! Measuring a server, for every command that does: the options, the pipeline from the
//! server's start to its run record (`collect`, its phase loop in `phases`), what watches the
//! server (`instruments`, probed and unprobed `windows`, the unprobed `pass` of a short phase), a live window of a running server's
//! own traffic (`live`, its `ticker`, the `budget` its probes keep, the live figures it serves for Prometheus in `metrics`), and the
//! load a client program drives (`external`); the signals that end a run early (`signals`), the
//! stages a harness can wait for (`stages`).
//! Nothing here knows the command line: the commands hand it plain options, and turn its
//! [`MeasureError`]s into their exit status and hints.

mod budget;
mod collect;
mod error;
mod external;
mod instruments;
mod live;
mod metrics;
mod options;
mod outcome;
mod pass;
mod phases;
mod session;
mod signals;
mod stack;
pub mod stages;
mod tagging;
#[cfg(test)]
mod testing;
mod ticker;
mod windows;

pub use budget::MIN_DUTY;
pub use collect::Collect;
pub use error::MeasureError;
pub use external::{ExternalLoad, Load};
pub use live::{watch_for, Live};
pub use options::{MeasureOptions, TargetSpec};
pub use stack::Upstreams;
pub use windows::ProbeSchedule;
