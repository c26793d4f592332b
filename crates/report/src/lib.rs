//! The report stage: everything reqcost shows a person, computed from a run record alone.

pub mod compare;
mod findings;
mod format;
mod kernel;
mod requests;
mod stacks;
mod summary;

pub use findings::findings_section;
pub use format::{fmt_count, fmt_duration_us};
pub use kernel::kernel_section;
pub use requests::requests_section;
pub use stacks::{profile_section, write_flamegraph, write_folded, write_pprof};
pub use summary::{side_by_side, summary};
