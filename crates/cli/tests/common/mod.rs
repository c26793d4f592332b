//! Shared helpers for reqcost's integration tests: the binary, the testbed, scratch dirs.
#![allow(dead_code)] // each test binary uses its own subset

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Once;

use reqcost_record::RunRecord;

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn testbed() -> PathBuf {
    static BUILD: Once = Once::new();
    let dir = repo_root().join("testbed");
    BUILD.call_once(|| {
        let status = Command::new("make")
            .args(["-s", "-C"])
            .arg(&dir)
            .status()
            .expect("make runs");
        assert!(status.success(), "building the testbed failed");
    });
    dir
}

pub fn testbed_server(name: &str, port: u16) -> Vec<String> {
    let dir = testbed();
    vec![
        dir.join("build").join(name).display().to_string(),
        "--port".into(),
        port.to_string(),
        "--root".into(),
        dir.join("content").display().to_string(),
    ]
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A scratch directory removed when dropped.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "reqcost-test-{tag}-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn reqcost(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_reqcost"))
        .args(args)
        .current_dir(std::env::temp_dir())
        .output()
        .expect("reqcost runs")
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `reqcost run` with `-o` into `scratch` and returns the output and the saved record.
pub fn run_saved(
    scratch: &Scratch,
    args: &[&str],
    server: &[String],
) -> (Output, Option<RunRecord>) {
    let record_path = scratch.path("run.json");
    let mut argv: Vec<&str> = vec!["run", "-o", record_path.to_str().unwrap()];
    argv.extend_from_slice(args);
    argv.push("--");
    argv.extend(server.iter().map(String::as_str));
    let out = reqcost(&argv);
    (out, RunRecord::load(&record_path).ok())
}

/// True if any live process has `marker` in its command line.
pub fn process_alive_with(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
            .unwrap_or(false)
    })
}

/// One line, non-zero exit, no panic: what every bad input must produce.
pub fn assert_clean_failure(out: &Output, expect: &str) {
    let err = stderr(out);
    assert!(
        !out.status.success(),
        "expected failure, got success; stderr: {err}"
    );
    assert!(!err.contains("panicked"), "reqcost panicked: {err}");
    let error_lines: Vec<&str> = err.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(
        error_lines.len(),
        1,
        "expected exactly one error line: {err}"
    );
    assert!(
        error_lines[0].contains(expect),
        "error line should mention {expect:?}: {err}"
    );
}
