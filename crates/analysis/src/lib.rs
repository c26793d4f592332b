//! The analysis stage: statistics over repeated measurements, and (from the record alone) the
//! findings that explain a server's cost.

pub mod stats;
