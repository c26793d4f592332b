//! Samples a freshly compiled C program built without frame pointers and checks that the hot
//! function and its callers are named, in a thread, a forked child, and that child after exec.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use reqcost_profile::{SampleOptions, Sampler};
use reqcost_record::Profile;
use reqcost_testkit::TempDir;

const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

volatile uint64_t sink;

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) uint64_t hot_spin(uint64_t n) {
    uint64_t x = 0;
    for (uint64_t i = 0; i < n; i++) {
        x = x * 6364136223846793005ULL + i;
        __asm__ volatile("" : "+r"(x));
    }
    return x;
}

/* Each worker burns 0.3 s of its own CPU time, whatever the machine's load. */
__attribute__((noinline)) void outer_caller(void) {
    double end = cpu_seconds() + 0.3;
    while (cpu_seconds() < end) sink += hot_spin(200000);
}

__attribute__((noinline)) void child_branch(void) {
    double end = cpu_seconds() + 0.3;
    while (cpu_seconds() < end) sink += hot_spin(200000);
}

__attribute__((noinline)) void *thread_branch(void *arg) {
    double end = cpu_seconds() + 0.3;
    while (cpu_seconds() < end) sink += hot_spin(200000);
    return arg;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "child") == 0) {
        child_branch();
        return 0;
    }
    char c;
    if (read(0, &c, 1) != 1) return 1;
    pid_t p = fork();
    if (p == 0) {
        execl("/proc/self/exe", argv[0], "child", (char *)0);
        _exit(127);
    }
    pthread_t t;
    pthread_create(&t, 0, thread_branch, 0);
    outer_caller();
    pthread_join(t, 0);
    waitpid(p, 0, 0);
    return 0;
}
"#;

/// Compiles `source` without frame pointers, with `flags`, into `dir/name`.
fn compile(dir: &TempDir, name: &str, source: &str, flags: &[&str]) -> PathBuf {
    let src = dir.write(&format!("{name}.c"), source.as_bytes());
    let bin = dir.join(name);
    let st = Command::new("cc")
        .args(["-O2", "-fomit-frame-pointer"])
        .args(flags)
        .arg("-o")
        .arg(&bin)
        .arg(&src)
        .status()
        .expect("run cc (install gcc)");
    assert!(st.success(), "cc failed");
    bin
}

fn assert_root() {
    if unsafe { libc::geteuid() } != 0 {
        panic!("this test samples with perf_event_open and must run as root");
    }
}

/// Names of the chain of a stack, leaf first.
fn chains(p: &Profile) -> Vec<(Vec<&str>, u64)> {
    p.stacks
        .iter()
        .map(|s| {
            (
                s.frames
                    .iter()
                    .map(|&f| p.frames[f as usize].function.as_str())
                    .collect(),
                s.count,
            )
        })
        .collect()
}

/// The five first chains with their counts, one a line, for failure messages.
fn top_chains(p: &Profile) -> String {
    let top: Vec<String> = chains(p)
        .iter()
        .take(5)
        .map(|(c, n)| format!("{n} {}", c.join(";")))
        .collect();
    top.join("\n")
}

fn samples_with_prefix(p: &Profile, prefix: &[&str]) -> u64 {
    chains(p)
        .iter()
        .filter(|(c, _)| c.starts_with(prefix))
        .map(|(_, n)| n)
        .sum()
}

#[test]
fn names_hot_function_and_callers_without_frame_pointers() {
    assert_root();
    let dir = TempDir::new("profile");
    let bin = compile(&dir, "spin", PROGRAM, &["-pthread"]);
    let mut child = Command::new(&bin).stdin(Stdio::piped()).spawn().unwrap();
    let sampler =
        Sampler::start(child.id(), SampleOptions { freq_hz: 499 }).expect("start sampler");
    // The program forks, execs and starts its thread only now, after sampling began.
    child.stdin.take().unwrap().write_all(b"x").unwrap();
    assert!(child.wait().unwrap().success());
    let (p, _) = sampler.finish();

    let top = top_chains(&p);
    assert!(p.samples > 0, "no samples:\n{p:?}");
    for caller in ["outer_caller", "child_branch", "thread_branch"] {
        let n = samples_with_prefix(&p, &["hot_spin", caller]);
        assert!(
            n >= 10,
            "few samples of hot_spin <- {caller} ({n}); top chains:\n{top}"
        );
    }
    // The full chain to the program's entry: main, then libc's start code.
    assert!(
        samples_with_prefix(&p, &["hot_spin", "outer_caller", "main"]) > 0,
        "{top}"
    );
    assert!(
        samples_with_prefix(&p, &["hot_spin", "child_branch", "main"]) > 0,
        "{top}"
    );
    let hot = p.frames.iter().find(|f| f.function == "hot_spin").unwrap();
    assert_eq!(hot.module, "spin");
    assert!(!hot.kernel && hot.resolved);
    assert!(!p.event.is_empty());
    assert_eq!(p.samples, p.stacks.iter().map(|s| s.count).sum::<u64>());
}

/// A "JIT": machine code written into an anonymous executable mapping and named only by
/// /tmp/perf-PID.map, as Node's --perf-basic-prof does. It keeps frame pointers, as JIT code does,
/// and its caller is ordinary C without them.
#[cfg(target_arch = "x86_64")]
const JIT_PROGRAM: &str = r#"
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static const unsigned char code[] = {
    0x55,             /* push %rbp */
    0x48, 0x89, 0xe5, /* mov %rsp,%rbp */
    0x48, 0x89, 0xf9, /* mov %rdi,%rcx */
    0x48, 0xff, 0xc9, /* 1: dec %rcx */
    0x75, 0xfb,       /* jnz 1b */
    0x5d,             /* pop %rbp */
    0xc3,             /* ret */
};

static double cpu_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

__attribute__((noinline)) void call_jit(void (*f)(uint64_t)) {
    double end = cpu_seconds() + 0.4;
    while (cpu_seconds() < end) f(2000000);
}

int main(void) {
    char c;
    if (read(0, &c, 1) != 1) return 1;
    void *p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    memcpy(p, code, sizeof code);
    char path[64];
    snprintf(path, sizeof path, "/tmp/perf-%d.map", getpid());
    FILE *m = fopen(path, "w");
    if (!m) return 1;
    fprintf(m, "%lx %zx jit_spin\n", (unsigned long)p, sizeof code);
    fclose(m);
    call_jit((void (*)(uint64_t))p);
    return 0;
}
"#;

#[cfg(target_arch = "x86_64")]
#[test]
fn names_jit_code_from_perf_map_and_unwinds_through_it() {
    assert_root();
    let dir = TempDir::new("profile-jit");
    let bin = compile(&dir, "jit", JIT_PROGRAM, &[]);
    let mut child = Command::new(&bin).stdin(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let sampler = Sampler::start(pid, SampleOptions { freq_hz: 499 }).expect("start sampler");
    child.stdin.take().unwrap().write_all(b"x").unwrap();
    assert!(child.wait().unwrap().success());
    let (p, _) = sampler.finish();
    std::fs::remove_file(format!("/tmp/perf-{pid}.map")).ok();

    let n = samples_with_prefix(&p, &["jit_spin", "call_jit", "main"]);
    assert!(
        n >= 10,
        "few samples of jit_spin <- call_jit <- main ({n}):\n{}",
        top_chains(&p)
    );
    let jit = p.frames.iter().find(|f| f.function == "jit_spin").unwrap();
    assert_eq!(jit.module, "[jit]");
}
