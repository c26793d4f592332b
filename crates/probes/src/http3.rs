//! HTTP/3 requests inside QUIC, counted in the library that answers them: the server tree's
//! libnghttp3 (ngtcp2's servers, Debian's `gtlsserver`), found in /proc/PID/maps when the
//! probes attach (docs/tls.md, "QUIC").

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::tls::mapped_files;

/// The function called once per request stream answered.
pub const RESPONSE_FUNCTION: &str = "nghttp3_conn_submit_response";

/// The libnghttp3 files the processes `pids` map, each once: the file as reqcost opens it
/// (through /proc/PID/root), and its path as the tree names it.
pub fn find(pids: &[u32]) -> Vec<(PathBuf, String)> {
    let mut found = Vec::new();
    let mut seen = BTreeSet::new();
    for &pid in pids {
        let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        for path in mapped_files(&maps) {
            let is_nghttp3 = Path::new(path)
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("libnghttp3.so"));
            let file = Path::new(&format!("/proc/{pid}/root")).join(path.trim_start_matches('/'));
            match fs::metadata(&file) {
                Ok(meta) if is_nghttp3 && seen.insert((meta.dev(), meta.ino())) => {
                    found.push((file, path.to_string()));
                }
                _ => {}
            }
        }
    }
    found
}
