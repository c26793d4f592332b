//! `reqcost demo`: the testbed's stories, measured on this machine.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use reqcost_record::RunRecord;
use reqcost_target::free_loopback_port;
use reqcost_workload::WorkloadArgs;

use crate::collect::{default_record_path, Collect, TargetSpec};
use crate::{DemoArgs, Failure};

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

/// Measures one testbed server with a gopher workload and saves its record under `out_dir`.
pub fn measure_testbed_server(
    dir: &Path,
    server: &str,
    requests: u64,
    out_dir: &Path,
) -> Result<RunRecord, Failure> {
    let port =
        free_loopback_port().map_err(|e| Failure::run(format!("no free loopback port: {e}")))?;
    let plan = workload_args(&[
        "--url",
        &format!("gopher://127.0.0.1:{port}/"),
        "-n",
        &requests.to_string(),
        "-c",
        "2",
    ])
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
        plan: &plan,
        target: TargetSpec::Launch(command),
        pin: true,
        startup_timeout: Duration::from_secs(10),
        progress: true,
        slow_clients: true,
    }
    .run()?;
    let path = out_dir.join(
        default_record_path(&record)
            .file_name()
            .expect("record paths have a file name"),
    );
    record
        .save(&path)
        .map_err(|e| Failure::run(format!("cannot save {}: {e}", path.display())))?;
    Ok(record)
}

/// Workload options written as on the command line, so built-in runs take the same defaults
/// as a user's.
pub fn workload_args(args: &[&str]) -> WorkloadArgs {
    #[derive(clap::Parser)]
    struct Wrapper {
        #[command(flatten)]
        workload: WorkloadArgs,
    }
    let argv = std::iter::once("reqcost").chain(args.iter().copied());
    <Wrapper as clap::Parser>::try_parse_from(argv)
        .expect("built-in workload options are valid")
        .workload
}

pub fn demo(args: &DemoArgs) -> Result<(), Failure> {
    let dir = testbed_dir();
    build_testbed(&dir)?;
    println!("reqcost demo: two gopher servers serve the same 100-line menu.");
    println!("  clean         reads the file and sends it with one large write");
    println!("  small-writes  sends every line with its own write(2), as in the seeds/001 story\n");
    let mut records = Vec::new();
    for server in ["clean", "small-writes"] {
        let record = measure_testbed_server(&dir, server, args.requests, &args.out_dir)?;
        print!("{}", reqcost_report::summary(&record));
        println!();
        records.push(record);
    }
    println!("{}", reqcost_report::side_by_side(&records));
    println!("records saved under {}", args.out_dir.display());
    Ok(())
}
