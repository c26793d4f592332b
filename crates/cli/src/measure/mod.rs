//! Measuring a server, for every command that does: the options, the pipeline from the
//! server's start to its run record (`collect`, its phase loop in `phases`), what watches the
//! server (`instruments`, probed and unprobed `windows`, the unprobed `pass` of a short phase), a live window of a running server's
//! own traffic (`live`, its `ticker`), and the load a client program drives (`external`).
//! Nothing here knows the command line: the commands hand it plain options.

mod collect;
mod external;
mod instruments;
mod live;
mod options;
mod outcome;
mod pass;
mod phases;
mod session;
mod tagging;
mod ticker;
mod windows;

pub use collect::Collect;
pub use external::{ExternalLoad, Load};
pub use live::{watch_for, Live};
pub use options::{MeasureOptions, TargetSpec};
pub use windows::ProbeSchedule;
