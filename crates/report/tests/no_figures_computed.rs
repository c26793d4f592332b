//! Renderers print the analysis's figures, they do not compute them: every figure an output
//! shows is a field of `reqcost_analysis::reading::Reading`, computed once, so the terminal, the
//! JSON, the HTML and the exporters cannot disagree. This scans the report crate's code (tests
//! aside) for arithmetic: any `/`, binary `+ - *`, compound assignment, `.sum()` or
//! `.product()`. Files that still compute are listed with their count of such lines, exact, so
//! that a new computation fails here and a removed one asks for its count to come down.

use std::fs;
use std::path::{Path, PathBuf};

/// (file under src/, lines with arithmetic, why they stay). Layout geometry (SVG pixels, bar
/// widths) and number formatting are the renderers' own; the rest is to move into the
/// analysis.
const STILL_COMPUTING: &[(&str, usize, &str)] = &[
    (
        "format.rs",
        15,
        "number formatting: rounding, unit scales, size labels",
    ),
    (
        "kernel.rs",
        1,
        "layout: how many size buckets are not listed",
    ),
    ("export/folded.rs", 1, "a string concatenation"),
    ("export/html/chart.rs", 16, "SVG geometry"),
    ("export/sweep_chart.rs", 6, "chart geometry"),
    ("export/frame_colors.rs", 2, "colour mixing"),
    (
        "export/pprof.rs",
        4,
        "protobuf ids (1-based), a stack's last frame",
    ),
    (
        "export/pyroscope.rs",
        3,
        "the push window, the series cap (the last one for the rest), the answer's read limit",
    ),
    (
        "export/agreement.rs",
        1,
        "the exporters' agreement check, comparing them",
    ),
    ("sweep.rs", 1, "layout: a repetition's 1-based number"),
    (
        "live_metrics.rs",
        3,
        "the OpenMetrics histogram: its bucket array, cumulative counts, ns to s",
    ),
    (
        "export/diff_flamegraph.rs",
        1,
        "inferno's differential line: the BEFORE that makes its AFTER − BEFORE read B − A",
    ),
    (
        "export/html/mod.rs",
        7,
        "layout: bar widths (the CPU split, the calls, the groups' shares), the charts' values \
         in µs, a repetition's 1-based number",
    ),
];

/// `text` with comments, string and char literals emptied, newlines kept.
fn code_only(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let skip_to = |out: &mut String, from: usize, end: &str| -> usize {
        let rest: String = chars[from..].iter().collect();
        let len = rest.find(end).map_or(rest.len(), |at| at + end.len());
        out.extend(rest[..len].chars().filter(|c| *c == '\n'));
        from + rest[..len].chars().count()
    };
    while i < chars.len() {
        let next = chars.get(i + 1).copied();
        match chars[i] {
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if next == Some('*') => i = skip_to(&mut out, i, "*/"),
            'r' if matches!(next, Some('#' | '"')) && !ident_before(&chars, i) => {
                let hashes = chars[i + 1..].iter().take_while(|c| **c == '#').count();
                let close = format!("\"{}", "#".repeat(hashes));
                out.push_str("\"\"");
                i = skip_to(&mut out, i + 2 + hashes, &close);
            }
            '"' => {
                out.push_str("\"\"");
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    // An escape may be a line continuation: its newline is kept too.
                    i += usize::from(chars[i] == '\\');
                    if chars.get(i) == Some(&'\n') {
                        out.push('\n');
                    }
                    i += 1;
                }
                i += 1;
            }
            '\'' if next == Some('\\') => {
                let close = chars[i + 3..].iter().position(|c| *c == '\'').unwrap_or(0);
                out.push_str("' '");
                i += close + 4;
            }
            '\'' if chars.get(i + 2) == Some(&'\'') => {
                out.push_str("' '");
                i += 3;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}

fn ident_before(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

const ARITHMETIC: &[&str] = &[
    "/",
    " + ",
    " - ",
    " * ",
    "+=",
    "-=",
    "*=",
    ".sum(",
    ".sum::",
    ".product(",
    ".product::",
];

/// The lines of `text` (its tests cut off) that do arithmetic, numbered from 1.
fn arithmetic_lines(text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]\nmod tests").next().unwrap_or(text);
    code_only(code)
        .lines()
        .zip(code.lines())
        .enumerate()
        .filter(|(_, (stripped, _))| ARITHMETIC.iter().any(|op| stripped.contains(op)))
        .map(|(n, (_, line))| format!("{}: {}", n + 1, line.trim()))
        .collect()
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn renderers_compute_no_figure() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    files.sort();
    let mut wrong: Vec<String> = STILL_COMPUTING
        .iter()
        .filter(|(file, _, _)| !src.join(file).exists())
        .map(|(file, _, _)| format!("src/{file} is gone: take it out of STILL_COMPUTING"))
        .collect();
    for path in files {
        let name = path
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if name == "testing.rs" {
            continue;
        }
        let lines = arithmetic_lines(&fs::read_to_string(&path).unwrap());
        let allowed = STILL_COMPUTING
            .iter()
            .find(|(file, _, _)| *file == name)
            .map_or(0, |(_, n, _)| *n);
        if lines.len() != allowed {
            wrong.push(format!(
                "src/{name}: {} lines compute, {allowed} allowed{}\n  {}",
                lines.len(),
                if lines.len() > allowed {
                    ": a figure belongs in the analysis document (crates/analysis), computed once"
                } else {
                    ": lower its count in STILL_COMPUTING"
                },
                lines.join("\n  ")
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_scan_sees_arithmetic_and_not_text() {
    let text = "let a = b / c; // a / b\nlet s = \"x / y - z\";\nlet t = v.iter().sum::<u64>();\n\
                let u = 'a';\nlet w = x * y;\nlet r = r#\"1 + 2\"#;\nfn f<'a>(x: &'a str) {}\n\
                #[cfg(test)]\nmod tests { let z = 1 / 2; }\n";
    let lines = arithmetic_lines(text);
    assert_eq!(
        lines,
        [
            "1: let a = b / c; // a / b",
            "3: let t = v.iter().sum::<u64>();",
            "5: let w = x * y;"
        ]
    );
}
