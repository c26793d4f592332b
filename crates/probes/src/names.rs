//! Names of syscall numbers and errno values on x86_64.
//!
//! The tables are generated: `names/tables.rs` says from what and how.

use std::borrow::Cow;

mod tables;

use tables::{ERRNOS, SYSCALLS};

/// The syscall's name, or `syscall_N` for a number without one.
pub fn syscall_name(nr: u32) -> String {
    syscall_label(nr).into_owned()
}

/// [`syscall_name`] without an allocation for a known syscall: each request event names its
/// top syscalls.
pub fn syscall_label(nr: u32) -> Cow<'static, str> {
    match SYSCALLS.get(nr as usize) {
        Some(name) if !name.is_empty() => Cow::Borrowed(name),
        _ => Cow::Owned(format!("syscall_{nr}")),
    }
}

/// The number of a named syscall on this architecture.
pub fn syscall_number(name: &str) -> Option<u32> {
    SYSCALLS.iter().position(|n| *n == name).map(|i| i as u32)
}

/// The errno's symbolic name, or `E<number>` for an unknown value.
///
/// The kernel-internal restart codes are named too: a syscall interrupted by a signal returns one
/// of them at the tracepoint, before signal delivery turns it into EINTR or a restart.
pub fn errno_name(errno: u32) -> String {
    let internal = match errno {
        512 => "ERESTARTSYS",
        513 => "ERESTARTNOINTR",
        514 => "ERESTARTNOHAND",
        515 => "ENOIOCTLCMD",
        516 => "ERESTART_RESTARTBLOCK",
        _ => "",
    };
    match ERRNOS.get(errno as usize).copied().unwrap_or(internal) {
        "" => format!("E{errno}"),
        name => name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_x86_64_numbering() {
        assert_eq!(syscall_name(0), "read");
        assert_eq!(syscall_name(1), "write");
        assert_eq!(syscall_name(16), "ioctl");
        assert_eq!(syscall_name(232), "epoll_wait");
        assert_eq!(syscall_name(288), "accept4");
        assert_eq!(syscall_name(441), "epoll_pwait2");
        assert_eq!(syscall_name(470), "listns");
        assert_eq!(syscall_name(400), "syscall_400");
        assert_eq!(syscall_name(9999), "syscall_9999");
        assert_eq!(syscall_number("sendmmsg"), Some(307));
        assert_eq!(syscall_number("no_such_call"), None);
    }

    #[test]
    fn errno_names() {
        assert_eq!(errno_name(2), "ENOENT");
        assert_eq!(errno_name(11), "EAGAIN");
        assert_eq!(errno_name(32), "EPIPE");
        assert_eq!(errno_name(115), "EINPROGRESS");
        assert_eq!(errno_name(514), "ERESTARTNOHAND");
        assert_eq!(errno_name(600), "E600");
    }
}
