//! Interpreters' own frames in the native call chains (docs/interpreters.md): where the
//! native chain runs an interpreter's main loop, the functions of the interpreted program that
//! loop was running at the sample are spliced in, as callees of the loop's frame.
//!
//! An interpreter is one module here: it knows which native code is its main loop (from the
//! binary), turns the stack the probes walked at the sample into named frames (reading the
//! process's memory for names, files and lines), and says how the two line up. Lua 5.4 is the
//! first; the tracker calls each one on every sample.

pub mod lua;

/// A frame of interpreted code, as the record will name it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InterpFrame {
    /// `NAME @ FILE:LINE` (or `function <FILE:LINE>` when the program gives it no name).
    pub function: String,
    /// `[lua]` for the interpreted program's functions; the binary's file name for the
    /// interpreter's own functions that its symbol table does not name (`luaV_execute`).
    pub module: String,
}

/// Reads `len` bytes at `addr` of process `pid` (None when it cannot: gone, unmapped).
pub(crate) fn read_memory(pid: u32, addr: u64, len: usize) -> Option<Vec<u8>> {
    let mut buf = vec![0u8; len];
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: one local iovec over `buf`, valid for `len` bytes; the remote one is only read
    // by the kernel, which checks it against the other process's mappings.
    let n = unsafe { libc::process_vm_readv(pid as i32, &local, 1, &remote, 1, 0) };
    (n == len as isize).then_some(buf)
}
