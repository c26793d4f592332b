//! Sampled on-CPU call chains of a process tree: perf_event_open, unwinding, symbolization.

use reqcost_record::Profile;

/// A running sampler following one process tree.
pub struct Sampler {
    _private: (),
}

#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    #[error("{0}")]
    Unavailable(String),
}

impl Sampler {
    /// Starts sampling `root_pid`'s tree at `freq_hz`.
    pub fn start(_root_pid: u32, _freq_hz: u64) -> Result<Sampler, SampleError> {
        Err(SampleError::Unavailable(
            "sampling is not built yet".to_string(),
        ))
    }

    /// Stops sampling, unwinds and symbolizes, and returns the aggregated stacks.
    pub fn finish(self) -> Profile {
        Profile::default()
    }
}
