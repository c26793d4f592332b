//! The report stage: everything reqcost shows a person, computed from a run record alone.

mod format;
mod summary;

pub use format::{fmt_count, fmt_duration_us};
pub use summary::{side_by_side, summary};
