//! Sampled on-CPU call chains, aggregated (see `reqcost-profile` and docs/profile.md).

use serde::{Deserialize, Serialize};

/// Aggregated, symbolized stacks of the measured process tree: enough to print top functions
/// and to write folded stacks, flame graphs and pprof later from the record alone.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Profile {
    /// Event that drove sampling: `cycles` (hardware counter) or `cpu-clock` (kernel timer,
    /// used where the machine has no hardware counters).
    pub event: String,
    /// Requested rate, samples per second of on-CPU time of each thread.
    pub freq_hz: u64,
    /// On-CPU time one sample stands for, nanoseconds (1e9 / `freq_hz`). Exact for `cpu-clock`;
    /// the average for `cycles`, whose period the kernel adjusts to meet the rate.
    pub period_ns: u64,
    /// Wall-clock time the sampler ran, seconds.
    pub duration_s: f64,
    /// Samples of the tree kept in `stacks` (the sum of their counts).
    pub samples: u64,
    /// Samples the kernel dropped because reqcost did not drain its buffers in time.
    pub lost: u64,
    /// Samples whose user-space unwinding stopped before the thread's first frame (stack copy
    /// too short, code without unwind information and without frame pointers).
    pub truncated: u64,
    /// Interned frames; `Stack::frames` index into this table.
    pub frames: Vec<Frame>,
    /// Distinct call chains with how many samples each got.
    pub stacks: Vec<Stack>,
    /// Limits of this profile a reader must know (binaries without symbols, debug info skipped
    /// because of its size, ...).
    #[serde(default)]
    pub notes: Vec<String>,
    /// What the sampled threads were serving (docs/profile.md, "Per request class");
    /// `Stack::tag` indexes into it. Empty in records made before samples were tagged, and
    /// when the probes were off.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<SampleTag>,
    /// The followed upstream hops' samples (docs/stack.md, "Call chains per hop"), apart from
    /// `stacks` so that every figure of the profile stays the target's; each one's tag names
    /// its hop. Not in `samples`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hop_stacks: Vec<Stack>,
}

/// The request a sample's thread was serving, by the rule that charges CPU to requests
/// (docs/request-attribution.md), or none.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash, Default)]
pub struct SampleTag {
    /// The request's class as the phase's class rows name it; [`UNATTRIBUTED`] when the thread
    /// served no request, [`IN_FLIGHT`] for a request that had not ended when measuring did.
    pub class: String,
    /// The client's address; empty when unattributed or in flight.
    #[serde(default)]
    pub client: String,
    /// The request's client-speed bucket label; empty when unattributed or in flight.
    #[serde(default)]
    pub speed: String,
    /// The phase whose requests it was filed under; empty when not filed in any.
    #[serde(default)]
    pub phase: String,
    /// `PID/CONNECTION/INDEX` of the request, kept for the phases' costliest requests and for
    /// requests in flight only (so the profile stays bounded), empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub request: String,
    /// The upstream hop the sample was taken in (0: the target). A hop's sample names the
    /// FRONT request its request served: `class`, `client`, `speed` and `phase` are that front
    /// request's, `request` the hop's own request when kept.
    #[serde(default, skip_serializing_if = "is_front")]
    pub hop: u8,
}

fn is_front(hop: &u8) -> bool {
    *hop == 0
}

/// Class of samples taken while the thread served no request.
pub const UNATTRIBUTED: &str = "(unattributed)";
/// Class of samples of a request that no phase reported (still open at the end).
pub const IN_FLIGHT: &str = "(in flight)";

impl SampleTag {
    /// The value of a grouping key: `class`, `client`, `speed`, `phase` or `request`.
    pub fn get(&self, key: &str) -> Option<&str> {
        match key {
            "class" => Some(&self.class),
            "client" => Some(&self.client),
            "speed" => Some(&self.speed),
            "phase" => Some(&self.phase),
            "request" => Some(&self.request),
            _ => None,
        }
    }
}

/// Keys a sample can be grouped or filtered by.
pub const TAG_KEYS: [&str; 5] = ["class", "client", "speed", "phase", "request"];

/// One function in a call chain. A machine address inside inlined code yields several frames:
/// the inlined functions (innermost first, `inlined: true`) then the function they sit in.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Demangled function name; for an address no symbol covers, `MODULE!0xSTART` (file offset
    /// of the start of the function `.eh_frame` says contains it), `MODULE+0xOFFSET` (file
    /// offset) when no unwind entry covers it either, or `[unknown]` when no mapping covers it.
    pub function: String,
    /// File name of the binary or library (`[kernel.kallsyms]`, a kernel module's `[name]`,
    /// `[vdso]`, `[jit]` for code named by a /tmp/perf-PID.map), empty when unknown.
    pub module: String,
    /// Kernel code (true) or user code (false).
    pub kernel: bool,
    /// Inlined into the next frame of the chain.
    pub inlined: bool,
    /// A symbol named this frame (false for `MODULE+0xOFFSET` and `[unknown]`).
    pub resolved: bool,
}

/// A distinct call chain.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Stack {
    /// Indexes into `Profile::frames`, leaf (the sampled instruction) first: kernel frames, then
    /// user frames down to the thread's entry point.
    pub frames: Vec<u32>,
    /// Name of the sampled thread (comm).
    pub thread: String,
    /// Samples that had this chain.
    pub count: u64,
    /// What the thread was serving: an index into `Profile::tags`; None when untagged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<u32>,
}

impl Stack {
    /// The record's order of call chains: most samples first, then by thread, chain and tag,
    /// so that a record is written the same however its chains were gathered.
    pub fn sort(stacks: &mut [Stack]) {
        stacks.sort_by(|a, b| {
            b.count
                .cmp(&a.count)
                .then_with(|| a.thread.cmp(&b.thread))
                .then_with(|| a.frames.cmp(&b.frames))
                .then_with(|| a.tag.cmp(&b.tag))
        });
    }
}
