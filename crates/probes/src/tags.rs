//! What sampled threads served: the `sample_tags` map that `tag_sample` (src/bpf) fills at each
//! call-chain sample, read back to charge each sample to a request.

use libbpf_rs::{MapCore, MapFlags, MapHandle};

/// Tags kept per thread and the layout of one (`struct sample_tag`, `struct sample_ring`).
const SAMPLE_TAGS: usize = 128;
const TAG_BYTES: usize = 24;
/// The program and the kernel's stamp of the sample run in the same overflow handler, in an
/// order that depends on the kernel version: the tag is the thread's one nearest the stamp, and
/// one farther than this belongs to another sample (reqcost samples a thread at most every
/// millisecond).
const MATCH_NS: u64 = 500_000;

/// A tag's connection with this bit set numbers the thread's held stretch instead
/// (`HELD_TAG` in src/bpf/held_tags.bpf.h).
const HELD_TAG: u64 = 1 << 63;

/// Reads the tags of samples (Send: the sampler's thread asks).
pub struct SampleTags {
    pub(crate) map: MapHandle,
    /// `held_claims`: which request claimed each thread's held stretch.
    pub(crate) claims: MapHandle,
}

/// What a thread served at a sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleServed {
    /// No tag of the thread matches the sample's time.
    Unknown,
    /// The thread served no request.
    Nothing,
    /// The request numbered `seq` on connection `conn_id` (as in `RequestEvent`).
    Request { conn_id: u64, seq: u32 },
    /// CPU the thread held between loop turns (docs/request-attribution.md), its `stretch`-th
    /// such stretch: charged to the request its next socket call serves, which
    /// [`SampleTags::claimed`] tells once that call came.
    Held { stretch: u32 },
}

impl SampleTags {
    /// What thread `tid` served at its sample stamped `time_ns` (CLOCK_MONOTONIC).
    pub fn served(&self, tid: u32, time_ns: u64) -> SampleServed {
        let Ok(Some(ring)) = self.map.lookup(&tid.to_ne_bytes(), MapFlags::ANY) else {
            return SampleServed::Unknown;
        };
        let mut best: Option<(u64, u64, u32)> = None;
        for i in 0..SAMPLE_TAGS {
            let at = 8 + i * TAG_BYTES;
            let Some(t) = ring.get(at..at + TAG_BYTES) else {
                break;
            };
            let ns = u64::from_ne_bytes(t[0..8].try_into().unwrap_or_default());
            let conn_id = u64::from_ne_bytes(t[8..16].try_into().unwrap_or_default());
            let seq = u32::from_ne_bytes(t[16..20].try_into().unwrap_or_default());
            let owner = u32::from_ne_bytes(t[20..24].try_into().unwrap_or_default());
            let off = ns.abs_diff(time_ns);
            if owner != tid || off > MATCH_NS {
                continue;
            }
            if best.is_none_or(|(b, _, _)| off < b) {
                best = Some((off, conn_id, seq));
            }
        }
        match best {
            None => SampleServed::Unknown,
            Some((_, 0, _)) => SampleServed::Nothing,
            Some((_, held, _)) if held & HELD_TAG != 0 => SampleServed::Held {
                stretch: held as u32,
            },
            Some((_, conn_id, seq)) => SampleServed::Request { conn_id, seq },
        }
    }

    /// The request (connection, index) that claimed thread `tid`'s held stretch `stretch`;
    /// None while the stretch is held, and for one no socket call claimed (no request's).
    pub fn claimed(&self, tid: u32, stretch: u32) -> Option<(u64, u32)> {
        let mut key = [0u8; 8];
        key[..4].copy_from_slice(&tid.to_ne_bytes());
        key[4..].copy_from_slice(&stretch.to_ne_bytes());
        let v = self.claims.lookup(&key, MapFlags::ANY).ok()??;
        let conn_id = u64::from_ne_bytes(v.get(0..8)?.try_into().ok()?);
        let seq = u32::from_ne_bytes(v.get(8..12)?.try_into().ok()?);
        Some((conn_id, seq))
    }
}
