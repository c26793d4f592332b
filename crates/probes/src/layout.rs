//! The map layout of `src/bpf/reqcost.h` for the loader. The slots of `misc`, `req_ctr` and
//! `own` are the C enums themselves, as the skeleton generates them; the rest is mirrored here,
//! and tests compare it with reqcost.h's numbers and the built object's map value sizes.

use reqcost_record::{FdKind, IoDirection};

pub(crate) use crate::bpf::types::{misc_slot, own_field, own_prog, own_tree, req_counter};
use crate::names;

/// The skeleton makes a C enum a newtype over its value: as a map slot, that value is an index.
macro_rules! slot_index {
    ($($slot:ident),*) => {$(
        impl $slot {
            pub(crate) const fn at(self) -> usize {
                self.0 as usize
            }
        }
    )*};
}
slot_index!(misc_slot, req_counter, own_prog, own_field, own_tree);

pub const MAX_SYSCALLS: usize = 512;
/// Bits of the `tracked` bitmap: one per possible thread group id.
pub const PID_LIMIT: u32 = 4 * 1024 * 1024;
/// TLS library files whose calls are counted apart, and where a uprobe's cookie holds the
/// file's number.
pub const TLS_LIBS: usize = 16;
pub const TLS_LIB_SHIFT: u32 = 56;

/// fd kinds in the order of the KIND_* constants.
pub const KINDS: [FdKind; 6] = [
    FdKind::Socket,
    FdKind::File,
    FdKind::Pipe,
    FdKind::Anon,
    FdKind::Other,
    FdKind::Udp,
];
pub const NR_KINDS: usize = KINDS.len();
/// Indexes of the two socket kinds in [`KINDS`].
pub const KIND_SOCKET: usize = 0;
pub const KIND_UDP: usize = 5;

/// Read-like and write-like syscalls in the order of the OP_* constants.
pub const IO_OPS: [(&str, IoDirection); 18] = [
    ("read", IoDirection::Read),
    ("pread64", IoDirection::Read),
    ("readv", IoDirection::Read),
    ("preadv", IoDirection::Read),
    ("preadv2", IoDirection::Read),
    ("recvfrom", IoDirection::Read),
    ("recvmsg", IoDirection::Read),
    ("recvmmsg", IoDirection::Read),
    ("write", IoDirection::Write),
    ("pwrite64", IoDirection::Write),
    ("writev", IoDirection::Write),
    ("pwritev", IoDirection::Write),
    ("pwritev2", IoDirection::Write),
    ("sendto", IoDirection::Write),
    ("sendmsg", IoDirection::Write),
    ("sendmmsg", IoDirection::Write),
    ("sendfile", IoDirection::Write),
    ("splice", IoDirection::Write),
];
pub const NR_IO_OPS: usize = IO_OPS.len();
pub const NR_SIZE_BUCKETS: usize = 36;

/// Readiness waits in the order of the WAIT_* constants.
pub const WAIT_OPS: [&str; 7] = [
    "epoll_wait",
    "epoll_pwait",
    "epoll_pwait2",
    "poll",
    "ppoll",
    "select",
    "pselect6",
];
pub const NR_WAIT_OPS: usize = WAIT_OPS.len();
pub const WAIT_FIELDS: usize = 4;
pub const NR_RUNQ_BUCKETS: usize = 32;

const CLS_IO: u8 = 1;
const CLS_WAIT: u8 = CLS_IO + NR_IO_OPS as u8;
const CLS_CLOSE: u8 = CLS_WAIT + NR_WAIT_OPS as u8;
const CLS_IOCTL: u8 = CLS_CLOSE + 1;
const CLS_EPOLL_CTL: u8 = CLS_CLOSE + 2;
const CLS_MMAP: u8 = CLS_CLOSE + 3;
const CLS_MUNMAP: u8 = CLS_CLOSE + 4;
const CLS_ACCEPT: u8 = CLS_CLOSE + 5;
const CLS_NO_ERRORS: u8 = CLS_CLOSE + 6;
const CLS_SHUTDOWN: u8 = CLS_CLOSE + 7;
const CLS_OPEN: u8 = CLS_CLOSE + 8;
const CLS_OPENAT: u8 = CLS_CLOSE + 9;
const CLS_CONNECT: u8 = CLS_CLOSE + 10;
/// Bytes of an opened path the program keeps, its NUL included.
pub const OPEN_PATH_LEN: usize = 128;

pub const SYS_COUNT: usize = 0;
pub const SYS_TIME_NS: usize = 1;
pub const SYS_ERRORS: usize = 2;
pub const SYS_FIELDS: usize = 3;
pub const SYS_LEN: usize = MAX_SYSCALLS * SYS_FIELDS;

/// The programs whose runs the `own` map counts, named as the object names them.
pub const OWN_PROGRAMS: [(own_prog, &str); own_prog::NR_PROGS.at()] = [
    (own_prog::PROG_SYS_ENTER, "sys_enter"),
    (own_prog::PROG_SYS_EXIT, "sys_exit"),
    (own_prog::PROG_SCHED_SWITCH, "sched_switch"),
    (own_prog::PROG_SCHED_WAKEUP, "sched_wakeup"),
    (own_prog::PROG_SCHED_WAKEUP_NEW, "sched_wakeup_new"),
    (own_prog::PROG_PAGE_FAULT_USER, "page_fault_user"),
    (own_prog::PROG_PAGE_FAULT_KERNEL, "page_fault_kernel"),
    (own_prog::PROG_SCHED_PROCESS_FORK, "sched_process_fork"),
    (own_prog::PROG_SCHED_PROCESS_EXIT, "sched_process_exit"),
    (own_prog::PROG_SSL_READ_ENTER, "ssl_read_enter"),
    (own_prog::PROG_SSL_READ_EX_ENTER, "ssl_read_ex_enter"),
    (own_prog::PROG_SSL_WRITE_ENTER, "ssl_write_enter"),
    (own_prog::PROG_SSL_WRITE_EX_ENTER, "ssl_write_ex_enter"),
    (own_prog::PROG_SSL_EXIT, "ssl_exit"),
];
/// `OWN_LEN` of reqcost.h.
pub const OWN_LEN: usize = own_prog::NR_PROGS.at() * own_field::OWN_FIELDS.at();

pub const IO_SLOTS: usize = NR_IO_OPS * NR_KINDS;
/// Calls, bytes and messages per slot.
pub const IO_TOT_LEN: usize = 3 * IO_SLOTS;
pub const IO_HIST_LEN: usize = IO_SLOTS * NR_SIZE_BUCKETS;

/// The class of every syscall number, for the program's `sys_class` array.
pub fn sys_classes() -> [u8; MAX_SYSCALLS] {
    let mut classes = [0u8; MAX_SYSCALLS];
    let mut set = |name: &str, class: u8| {
        let nr = names::syscall_number(name)
            .unwrap_or_else(|| panic!("syscall {name} is missing from the name table"));
        classes[nr as usize] = class;
    };
    for (i, (name, _)) in IO_OPS.iter().enumerate() {
        set(name, CLS_IO + i as u8);
    }
    for (i, name) in WAIT_OPS.iter().enumerate() {
        set(name, CLS_WAIT + i as u8);
    }
    set("close", CLS_CLOSE);
    set("ioctl", CLS_IOCTL);
    set("epoll_ctl", CLS_EPOLL_CTL);
    set("mmap", CLS_MMAP);
    set("munmap", CLS_MUNMAP);
    set("accept", CLS_ACCEPT);
    set("accept4", CLS_ACCEPT);
    set("rt_sigreturn", CLS_NO_ERRORS);
    set("shutdown", CLS_SHUTDOWN);
    set("open", CLS_OPEN);
    set("openat", CLS_OPENAT);
    set("openat2", CLS_OPENAT);
    set("connect", CLS_CONNECT);
    classes
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    /// reqcost.h's `#define NAME number` lines.
    fn c_numbers() -> HashMap<&'static str, usize> {
        include_str!("bpf/reqcost.h")
            .lines()
            .filter_map(|l| {
                let mut words = l.strip_prefix("#define ")?.split_whitespace();
                Some((words.next()?, words.next()?.parse().ok()?))
            })
            .collect()
    }

    /// The name tables mirror #defines the program indexes by: a reordered or renamed entry on
    /// either side would count one syscall or fd kind under another's name, at the same sizes.
    #[test]
    fn name_tables_follow_the_c_numbering() {
        let c = c_numbers();
        let same = |prefix: &str, names: Vec<String>, count: &str| {
            for (i, name) in names.iter().enumerate() {
                let define = format!("{prefix}{}", name.to_uppercase());
                assert_eq!(c.get(define.as_str()), Some(&i), "{define}");
            }
            assert_eq!(c[count], names.len(), "{count}");
        };
        same(
            "OP_",
            IO_OPS.iter().map(|(n, _)| n.to_string()).collect(),
            "NR_IO_OPS",
        );
        same(
            "WAIT_",
            WAIT_OPS.iter().map(|n| n.to_string()).collect(),
            "NR_WAIT_OPS",
        );
        same(
            "KIND_",
            KINDS.iter().map(|k| format!("{k:?}")).collect(),
            "NR_KINDS",
        );
        assert_eq!(KINDS[KIND_SOCKET], FdKind::Socket);
        assert_eq!(KINDS[KIND_UDP], FdKind::Udp);
        for (name, value) in [
            ("MAX_SYSCALLS", MAX_SYSCALLS),
            ("NR_SIZE_BUCKETS", NR_SIZE_BUCKETS),
            ("WAIT_FIELDS", WAIT_FIELDS),
            ("NR_RUNQ_BUCKETS", NR_RUNQ_BUCKETS),
            ("SYS_COUNT", SYS_COUNT),
            ("SYS_TIME_NS", SYS_TIME_NS),
            ("SYS_ERRORS", SYS_ERRORS),
            ("SYS_FIELDS", SYS_FIELDS),
            ("TLS_LIBS", TLS_LIBS),
            ("OPEN_PATH_LEN", OPEN_PATH_LEN),
            ("TLS_LIB_SHIFT", TLS_LIB_SHIFT as usize),
        ] {
            assert_eq!(c[name], value, "{name}");
        }
    }

    #[test]
    fn classified_syscalls_get_their_class() {
        let classes = sys_classes();
        let set: Vec<u8> = classes.iter().copied().filter(|&c| c != 0).collect();
        assert_eq!(set.len(), NR_IO_OPS + NR_WAIT_OPS + 13);
        assert_eq!(
            classes[names::syscall_number("write").unwrap() as usize],
            CLS_IO + 8
        );
        assert_eq!(
            classes[names::syscall_number("splice").unwrap() as usize],
            CLS_IO + 17
        );
        assert_eq!(
            classes[names::syscall_number("select").unwrap() as usize],
            CLS_WAIT + 5
        );
        assert_eq!(
            classes[names::syscall_number("accept").unwrap() as usize],
            CLS_ACCEPT
        );
    }
}
