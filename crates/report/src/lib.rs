//! The report stage: everything reqcost shows a person, computed from run records alone.

mod check;
mod compare;
pub mod export;
mod findings;
mod format;
mod kernel;
pub mod live_metrics;
mod profile;
mod profile_classes;
mod requests;
mod stack;
mod summary;
mod sweep;
#[cfg(test)]
mod testing;

pub use check::check;
pub use compare::comparison;
pub use findings::findings_section;
pub use format::{fmt_count, fmt_duration_ns, fmt_duration_us};
pub use kernel::kernel_section;
pub use profile::profile_section;
pub use requests::requests_section;
pub use stack::stack_section;
pub use summary::{side_by_side, summary};
pub use sweep::sweep;
