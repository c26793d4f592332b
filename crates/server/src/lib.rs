//! The target stage: the server being measured.
//!
//! [`Server`] launches a command (own process group, in its own cpuacct and cgroup v2 groups when
//! possible, the whole tree killed if reqcost dies) or attaches to a running process; [`Server::snapshot`] reads the
//! cumulative cost of its whole process tree, and [`Snapshot::since`] turns two snapshots into a
//! phase's totals. [`listener_of`] finds the process serving a TCP port.

mod accounting;
mod containment;
mod launch;
mod machine;
mod sockdiag;
mod sockets;
mod unixdiag;

pub use accounting::{descends_from, process_tree, threads, Snapshot};
pub use containment::{remove_dead_runs, run_name};
pub use launch::{ensure_port_free, free_loopback_port, LaunchSpec, Server, TargetError};
pub use machine::{machine_info, online_cpus, pin_current_thread, plan_pinning};
pub use sockdiag::{Connection, ListenerTraffic, ReceivedBytes, SocketBytes};
pub use sockets::{
    listener_of, tree_listening_ports, tree_listens_on, tree_loopback_peers, tree_serves,
    unacknowledged, unix_listener_of,
};
pub use unixdiag::tree_unix_peers;
