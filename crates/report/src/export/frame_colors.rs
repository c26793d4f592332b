//! What a flame graph's colours mean, decided in one place from what the record knows about each
//! frame (kernel or user, which module, symbolized or not, named by a perf map), with the legend
//! made from the same table. Colouring by the look of a name misleads: `mod_mpm_event.so+0xc599`
//! has a dot and so looked like Java to inferno's palettes, which drew it as JIT code.

use inferno::flamegraph::color::{Color, PaletteMap};
use reqcost_analysis::profile::{folded_name, is_probe_frame};
use reqcost_record::{Frame, Profile};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    Kernel,
    /// Kernel code of eBPF programs, reqcost's probes first among them: their cost, not the
    /// server's work.
    Probes,
    /// The server's own binary.
    User,
    /// libc and every other shared object (`.so`, the vDSO).
    Library,
    /// An address no symbol covers: `MODULE+0xOFFSET` or `[unknown]`.
    Unresolved,
    /// Code named by a /tmp/perf-PID.map (a JIT or an interpreter that writes one).
    Jit,
    /// The root of each stack: the sampled thread's name.
    Thread,
}

/// One colour class: what it means, its colour, and the colour's name for text legends.
pub struct Class {
    pub kind: FrameKind,
    pub label: &'static str,
    pub rgb: [u8; 3],
    pub colour: &'static str,
}

/// Every class in legend order.
pub const CLASSES: [Class; 7] = [
    Class {
        kind: FrameKind::User,
        label: "server code",
        rgb: [215, 75, 60],
        colour: "red",
    },
    Class {
        kind: FrameKind::Library,
        label: "libc and shared libraries",
        rgb: [220, 190, 50],
        colour: "yellow",
    },
    Class {
        kind: FrameKind::Kernel,
        label: "kernel",
        rgb: [80, 140, 220],
        colour: "blue",
    },
    Class {
        kind: FrameKind::Probes,
        label: "eBPF probes",
        rgb: [40, 170, 170],
        colour: "teal",
    },
    Class {
        kind: FrameKind::Unresolved,
        label: "unresolved address",
        rgb: [160, 160, 160],
        colour: "grey",
    },
    Class {
        kind: FrameKind::Jit,
        label: "JIT (perf map)",
        rgb: [70, 170, 90],
        colour: "green",
    },
    Class {
        kind: FrameKind::Thread,
        label: "thread",
        rgb: [190, 140, 200],
        colour: "violet",
    },
];

/// The class of a frame. Kernel code is kernel code whatever its symbol; a perf map names only
/// JIT code; then an address without a symbol is unresolved wherever it lies.
pub fn kind(f: &Frame) -> FrameKind {
    if f.kernel && is_probe_frame(&f.function) {
        FrameKind::Probes
    } else if f.kernel {
        FrameKind::Kernel
    } else if f.module == "[jit]" {
        FrameKind::Jit
    } else if !f.resolved {
        FrameKind::Unresolved
    } else if f.module.contains(".so") || f.module == "[vdso]" {
        FrameKind::Library
    } else {
        FrameKind::User
    }
}

fn class(kind: FrameKind) -> &'static Class {
    CLASSES
        .iter()
        .find(|c| c.kind == kind)
        .expect("every kind has a class")
}

/// The colour of each name the flame graph of `p` draws (folded names, thread roots too): its
/// class's colour, lightened a little per name so that neighbouring frames stay apart.
pub fn palette(p: &Profile) -> PaletteMap {
    let mut map = PaletteMap::default();
    for f in &p.frames {
        map.insert(folded_name(f), shade(class(kind(f)).rgb, &f.function));
    }
    for s in &p.stacks {
        let thread = s.thread.replace([';', ' '], "_");
        let colour = shade(class(FrameKind::Thread).rgb, &thread);
        map.insert(thread, colour);
    }
    map
}

/// `rgb` mixed with up to a quarter of white, the amount fixed by `name` (FNV-1a).
fn shade(rgb: [u8; 3], name: &str) -> Color {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let t = (hash % 1000) as f64 / 1000.0 * 0.25;
    let mix = |c: u8| (f64::from(c) + (255.0 - f64::from(c)) * t).round() as u8;
    Color {
        r: mix(rgb[0]),
        g: mix(rgb[1]),
        b: mix(rgb[2]),
    }
}

/// The legend as one line of text, for the SVG's subtitle.
pub fn legend_text() -> String {
    CLASSES
        .iter()
        .map(|c| format!("{}: {}", c.colour, c.label))
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, module: &str, kernel: bool, resolved: bool) -> Frame {
        Frame {
            function: function.into(),
            module: module.into(),
            kernel,
            inlined: false,
            resolved,
        }
    }

    #[test]
    fn each_frame_gets_the_class_the_record_supports() {
        let cases = [
            (
                frame("mod_mpm_event.so+0xc599", "mod_mpm_event.so", false, false),
                FrameKind::Unresolved,
            ),
            (frame("[unknown]", "", false, false), FrameKind::Unresolved),
            (
                frame("memcpy", "libc.so.6", false, true),
                FrameKind::Library,
            ),
            (
                frame("apr_palloc", "libapr-1.so.0", false, true),
                FrameKind::Library,
            ),
            (
                frame("__vdso_clock_gettime", "[vdso]", false, true),
                FrameKind::Library,
            ),
            (
                frame("ap_process_request", "apache2", false, true),
                FrameKind::User,
            ),
            (
                frame("tcp_sendmsg", "[kernel.kallsyms]", true, true),
                FrameKind::Kernel,
            ),
            (
                frame("[unknown]", "[kernel.kallsyms]", true, false),
                FrameKind::Kernel,
            ),
            (
                frame(
                    "bpf_prog_c5cf8e71cb3752ac_sys_exit",
                    "[kernel.kallsyms]",
                    true,
                    true,
                ),
                FrameKind::Probes,
            ),
            (
                frame("__bpf_trace_sys_enter", "[kernel.kallsyms]", true, true),
                FrameKind::Probes,
            ),
            (
                frame("LuaJIT trace 12", "[jit]", false, true),
                FrameKind::Jit,
            ),
        ];
        for (f, want) in cases {
            assert_eq!(kind(&f), want, "{}", f.function);
        }
    }

    #[test]
    fn shades_stay_near_their_class() {
        for c in &CLASSES {
            for name in ["a", "memcpy", "mod_mpm_event.so+0xc599"] {
                let s = shade(c.rgb, name);
                for (got, base) in [(s.r, c.rgb[0]), (s.g, c.rgb[1]), (s.b, c.rgb[2])] {
                    assert!(
                        got >= base && f64::from(got - base) <= f64::from(255 - base) * 0.25 + 1.0
                    );
                }
            }
        }
        assert_eq!(shade([0, 0, 0], "x"), shade([0, 0, 0], "x"));
    }

    #[test]
    fn the_legend_names_every_class() {
        let legend = legend_text();
        for c in &CLASSES {
            assert!(
                legend.contains(&format!("{}: {}", c.colour, c.label)),
                "{legend}"
            );
        }
    }
}
