//! Compiles the BPF program and generates its libbpf-rs skeleton (x86_64 targets only: the
//! committed vmlinux.h describes x86_64 kernel types).

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

const SRC: &str = "src/bpf/reqcost.bpf.c";

fn main() {
    println!("cargo:rerun-if-changed={SRC}");
    println!("cargo:rerun-if-changed=src/bpf/reqcost.h");
    println!("cargo:rerun-if-changed=src/bpf/tree.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/conns.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/attribution.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/tls.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/gotls.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/h2.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/client.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/lua.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/held_tags.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/http3.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/wire.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/stack.bpf.h");
    println!("cargo:rerun-if-changed=src/bpf/vmlinux.h");
    if env::var("CARGO_CFG_TARGET_ARCH").as_deref() != Ok("x86_64") {
        return;
    }
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    if let Err(e) = SkeletonBuilder::new()
        .source(SRC)
        // v3: atomic and/or on the tracked bitmap (Linux 5.12+).
        .clang_args(["-Wall", "-Werror", "-mcpu=v3", "-Isrc/bpf"])
        .build_and_generate(out.join("reqcost.skel.rs"))
    {
        panic!("building {SRC} failed (needs clang; scripts/bootstrap installs it): {e:#}");
    }
}
