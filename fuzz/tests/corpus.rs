//! The kept fuzz corpus (seeds, what the fuzzer found new coverage with, and every input that
//! once crashed) replayed through the same code as the fuzz targets: none may panic.

use std::path::Path;

fn replay(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    let mut inputs = 0;
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let outcome = std::panic::catch_unwind(|| run(&data));
        assert!(outcome.is_ok(), "{} panics", path.display());
        inputs += 1;
    }
    assert!(inputs > 0, "no corpus in {}", dir.display());
}

#[test]
fn requests_file_corpus() {
    replay("requests_file", reqcost_fuzz::requests_file);
    reqcost_fuzz::remove_scratch_file();
}

#[test]
fn response_corpus() {
    replay("response", reqcost_fuzz::response);
}

#[test]
fn record_corpus() {
    replay("record", reqcost_fuzz::record);
}

#[test]
fn wire_corpus() {
    replay("wire", reqcost_fuzz::wire);
}
