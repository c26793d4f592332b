//! Why a measurement could not start. Once the first measured phase has begun, what goes wrong
//! ends up in the record's outcome instead, so that measured data is never lost.

use std::io;
use std::net::SocketAddr;

use reqcost_server::TargetError;

/// A measurement that could not start. The messages name no command-line flag: the command
/// that set the option adds its hint, and decides the exit status.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    #[error("the load command is empty")]
    EmptyLoadCommand,
    #[error("the load command's concurrency must be at least 1")]
    NoConcurrency,
    #[error("cannot pin reqcost to CPU {cpus:?}: {source}")]
    Pin { cpus: Vec<u32>, source: io::Error },
    /// The server to launch or attach to, or its start: bad input when the user named
    /// something that is not there ([`TargetError::is_bad_input`]).
    #[error(transparent)]
    Target(TargetError),
    /// The running server a live window attaches to.
    #[error(transparent)]
    Attach(TargetError),
    /// A running server that does not accept on the load's address.
    #[error("nothing accepts connections on {addr}")]
    NotAccepting { addr: SocketAddr, pid: u32 },
    /// A running server that accepts on the load's address, on a socket another process holds
    /// (`owner` says which, or why it is not known).
    #[error("process {pid} does not listen on port {port}, {owner}")]
    NotListening { pid: u32, port: u16, owner: String },
    #[error("server exited at start ({status}) before {readiness}{tail}")]
    ExitedAtStart {
        status: String,
        readiness: String,
        tail: String,
    },
    /// A running server not yet serving what the load needs.
    #[error("process {pid} is not ready: reqcost needs {readiness}")]
    NotReady { pid: u32, readiness: String },
    #[error("the server was not ready within {secs} s: reqcost waits until {readiness}{tail}")]
    NotReadyInTime {
        secs: u64,
        readiness: String,
        tail: String,
    },
    #[error("attach counts requests with the eBPF probes, and they cannot run: {0}")]
    ProbesOff(String),
    #[error("cannot serve the live figures on {addr}: {source}")]
    MetricsListen { addr: SocketAddr, source: io::Error },
    #[error(transparent)]
    MetricsAddr(io::Error),
    #[error("cannot start the live figures' responder thread: {0}")]
    MetricsThread(io::Error),
}
