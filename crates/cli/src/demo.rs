//! `reqcost demo`: the testbed's stories, measured on this machine.

use std::path::{Path, PathBuf};
use std::process::Command;

use reqcost_record::RunRecord;
use reqcost_target::free_loopback_port;
use reqcost_workload::WorkloadOptions;

use crate::args::DemoArgs;
use crate::collect::{Collect, MeasureOptions, TargetSpec};
use crate::external::Load;
use crate::print::outln;
use crate::records::save_run;
use crate::Failure;

/// The testbed directory: `REQCOST_TESTBED`, else `testbed/` in the working directory, else
/// the source tree this binary was built from.
pub fn testbed_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("REQCOST_TESTBED") {
        return PathBuf::from(dir);
    }
    let cwd = PathBuf::from("testbed");
    if cwd.join("Makefile").exists() {
        return cwd;
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testbed")
}

/// Builds the testbed servers (make is incremental, so this is cheap once built).
pub fn build_testbed(dir: &Path) -> Result<(), Failure> {
    let status = Command::new("make")
        .arg("-s")
        .arg("-C")
        .arg(dir)
        .status()
        .map_err(|e| Failure::run(format!("cannot run make to build {}: {e} (install make and a C compiler: scripts/bootstrap)", dir.display())))?;
    if status.success() {
        Ok(())
    } else {
        Err(Failure::run(format!(
            "building the testbed in {} failed ({status}); run `make -C {}` to see why",
            dir.display(),
            dir.display()
        )))
    }
}

/// Measures one testbed server with a gopher workload on `selector` and saves its record
/// under `out_dir`.
fn measure_testbed_server(
    dir: &Path,
    server: &str,
    selector: &str,
    requests: u64,
    out_dir: &Path,
) -> Result<RunRecord, Failure> {
    let port =
        free_loopback_port().map_err(|e| Failure::run(format!("no free loopback port: {e}")))?;
    let plan = WorkloadOptions {
        url: format!("gopher://127.0.0.1:{port}/{selector}"),
        count: requests,
        concurrency: 2,
        ..Default::default()
    }
    .plan()
    .map_err(Failure::run)?;
    let command = vec![
        dir.join("build").join(server).display().to_string(),
        "--port".into(),
        port.to_string(),
        "--root".into(),
        dir.join("content").display().to_string(),
    ];
    let record = Collect {
        load: &Load::Engine(Box::new(plan)),
        target: TargetSpec::Launch(command),
        options: &MeasureOptions::default(),
        progress: true,
    }
    .run()?;
    save_run(record, out_dir, "", server)
}

/// One seed story: a pathology server against its clean twin on the same content.
struct Story {
    seed: &'static str,
    told: &'static str,
    pathology: &'static str,
    twin: &'static str,
    selector: &'static str,
}

const STORIES: [Story; 3] = [
    Story {
        seed: "seeds/001",
        told: "A gopher server burns 17 minutes of CPU where a TLS server serving the same \
               content burns 45 seconds. Same 100-line menu, two servers:",
        pathology: "small-writes",
        twin: "clean",
        selector: "",
    },
    Story {
        seed: "seeds/002",
        told: "After buffering, still 5x the CPU: a loop polls the kernel's send queue until the \
               client has read everything. Invisible with fast loopback clients, so reqcost \
               follows the main phase with slow clients:",
        pathology: "busy-wait",
        twin: "clean",
        selector: "",
    },
    Story {
        seed: "seeds/003",
        told: "memcpy tops the profile, \"but it's not clear where all the memcpy calls are \
               happening\". A 200 KB file, binaries without frame pointers:",
        pathology: "copy-heavy",
        twin: "clean",
        selector: "9/200k.bin",
    },
];

pub fn demo(args: &DemoArgs) -> Result<(), Failure> {
    let dir = testbed_dir();
    build_testbed(&dir)?;
    for story in &STORIES {
        outln!("━━ {} ━━", story.seed);
        outln!("{}\n", textwrap(story.told, 96));
        let records = [story.twin, story.pathology]
            .into_iter()
            .map(|server| {
                measure_testbed_server(&dir, server, story.selector, args.requests, &args.out_dir)
            })
            .collect::<Result<Vec<_>, _>>()?;
        outln!("{}", reqcost_report::side_by_side(&records));
        let findings = reqcost_analysis::findings::diagnose(&records[1]);
        outln!(
            "reqcost's findings for {}:\n{}",
            story.pathology,
            reqcost_report::findings_section(&findings)
        );
    }
    outln!(
        "Full summaries: reqcost report {}/<record>.json (records listed above).",
        args.out_dir.display()
    );
    Ok(())
}

/// Wraps prose at word boundaries for the terminal.
fn textwrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = 0;
    for word in text.split_whitespace() {
        if line > 0 && line + 1 + word.len() > width {
            out.push('\n');
            line = 0;
        } else if line > 0 {
            out.push(' ');
            line += 1;
        }
        out.push_str(word);
        line += word.chars().count();
    }
    out
}
