//! The target stage: the server being measured.
//!
//! [`Server`] launches a command (own process group, killed if reqcost dies, in its own cpuacct
//! cgroup when possible) or attaches to a running process; [`Server::snapshot`] reads the
//! cumulative cost of its whole process tree, and [`Snapshot::since`] turns two snapshots into a
//! phase's totals. [`listener_of`] finds the process serving a TCP port.

mod accounting;
mod launch;
mod machine;
mod sockets;

pub use accounting::{descends_from, process_tree, threads, Snapshot};
pub use launch::{free_loopback_port, LaunchSpec, Server, TargetError};
pub use machine::{machine_info, pin_current_thread, plan_pinning};
pub use sockets::{listener_of, tree_listens_on};
