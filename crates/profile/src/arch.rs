//! The few CPU-specific pieces: which user registers to sample and how they seed the unwinder.

#[cfg(target_arch = "x86_64")]
mod imp {
    use perf_event_open_sys::bindings as b;

    pub type Unwinder<D> = framehop::x86_64::UnwinderX86_64<D>;
    pub type Cache = framehop::x86_64::CacheX86_64;

    /// Sampled in bit order: bp, sp, ip.
    pub const REGS_MASK: u64 =
        1 << b::PERF_REG_X86_BP | 1 << b::PERF_REG_X86_SP | 1 << b::PERF_REG_X86_IP;
    pub const NREGS: usize = 3;

    /// (pc, sp, unwinder registers) from the sampled values.
    pub fn regs(r: &[u64; NREGS]) -> (u64, u64, framehop::x86_64::UnwindRegsX86_64) {
        let [bp, sp, ip] = *r;
        (ip, sp, framehop::x86_64::UnwindRegsX86_64::new(ip, sp, bp))
    }
}

#[cfg(target_arch = "aarch64")]
mod imp {
    use perf_event_open_sys::bindings as b;

    pub type Unwinder<D> = framehop::aarch64::UnwinderAarch64<D>;
    pub type Cache = framehop::aarch64::CacheAarch64;

    /// Sampled in bit order: x29 (frame pointer), lr, sp, pc.
    pub const REGS_MASK: u64 = 1 << b::PERF_REG_ARM64_X29
        | 1 << b::PERF_REG_ARM64_LR
        | 1 << b::PERF_REG_ARM64_SP
        | 1 << b::PERF_REG_ARM64_PC;
    pub const NREGS: usize = 4;

    pub fn regs(r: &[u64; NREGS]) -> (u64, u64, framehop::aarch64::UnwindRegsAarch64) {
        let [fp, lr, sp, pc] = *r;
        (
            pc,
            sp,
            framehop::aarch64::UnwindRegsAarch64::new(lr, sp, fp),
        )
    }
}

pub use imp::*;
