//! Files reqcost writes besides its terminal output, one format per module behind one trait.
//! The CLI adds a (format, path) pair per output option to an [`ExportManager`] and writes
//! them all with one call; a format that cannot export what it is given says why.

#[cfg(test)]
mod agreement;
mod diff_flamegraph;
mod flamegraph;
mod folded;
mod frame_colors;
mod html;
mod openmetrics;
mod pprof;
mod pyroscope;
mod sweep_chart;

use std::fmt;
use std::path::{Path, PathBuf};

use reqcost_analysis::compare::Comparison;
use reqcost_analysis::profile::folded_lines;
use reqcost_analysis::reading::Reading;
use reqcost_analysis::sweep::SweepReport;
use reqcost_analysis::tagged::{self, TagFilter};
use reqcost_record::{Profile, RunRecord};

use flamegraph::flamegraph_svg;
use folded::folded_bytes;
pub use pyroscope::{push, PyroscopeUrl};

/// What is being exported.
#[derive(Clone, Copy)]
pub enum Subject<'a> {
    /// One run record, as the command read it.
    Run(&'a Reading<'a>),
    /// Every repetition of configuration A against every repetition of B, and the command's
    /// comparison of them.
    Compare {
        a: &'a [RunRecord],
        b: &'a [RunRecord],
        comparison: &'a Comparison,
    },
    /// A sweep: every level's runs and their statistics.
    Sweep {
        report: &'a SweepReport,
        title: &'a str,
    },
}

impl<'a> Subject<'a> {
    /// The sampled call chains of a run, or why there are none to export.
    fn profile(&self) -> Result<&'a Profile, String> {
        match self {
            Subject::Run(reading) => reading.profile.ok_or_else(|| {
                format!(
                    "run {} has no sampled call chains (see its notes)",
                    reading.analysis.run_id
                )
            }),
            _ => Err(self.refuse("one run's call chains")),
        }
    }

    /// The runs of A and of B.
    fn comparison(&self) -> Result<(&'a [RunRecord], &'a [RunRecord]), String> {
        match self {
            Subject::Compare { a, b, .. } => Ok((a, b)),
            _ => Err(self.refuse("a comparison of two sets of runs")),
        }
    }

    /// The sweep and the title of its chart.
    fn sweep(&self) -> Result<(&'a SweepReport, &'a str), String> {
        match self {
            Subject::Sweep { report, title } => Ok((report, title)),
            _ => Err(self.refuse("a sweep")),
        }
    }

    fn refuse(&self, wanted: &str) -> String {
        let given = match self {
            Subject::Run(_) => "a run",
            Subject::Compare { .. } => "a comparison",
            Subject::Sweep { .. } => "a sweep",
        };
        format!("this format exports {wanted}, not {given}")
    }
}

/// The file formats reqcost exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Folded stacks, one line per call chain (flamegraph.pl, inferno, speedscope).
    Folded,
    /// An interactive flame graph SVG of one run.
    Flamegraph,
    /// A gzipped pprof profile (go tool pprof, Pyroscope).
    Pprof,
    /// A differential flame graph SVG: B against A, per request.
    DiffFlamegraph,
    /// CPU per request against concurrency, as SVG.
    SweepChart,
    /// A self-contained HTML report of one run, a comparison or a sweep.
    Html,
    /// One run's analysis as OpenMetrics gauges (node exporter textfile, Pushgateway).
    OpenMetrics,
}

impl Format {
    fn exporter(self) -> &'static dyn Exporter {
        match self {
            Format::Folded => &folded::Folded,
            Format::Flamegraph => &flamegraph::Flamegraph,
            Format::Pprof => &pprof::Pprof,
            Format::DiffFlamegraph => &diff_flamegraph::DiffFlamegraph,
            Format::SweepChart => &sweep_chart::SweepChart,
            Format::Html => &html::Html,
            Format::OpenMetrics => &openmetrics::OpenMetrics,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Folded => "folded stacks",
            Format::Flamegraph => "flame graph",
            Format::Pprof => "pprof profile",
            Format::DiffFlamegraph => "differential flame graph",
            Format::SweepChart => "sweep chart",
            Format::Html => "HTML report",
            Format::OpenMetrics => "OpenMetrics file",
        }
    }
}

/// One export format.
trait Exporter {
    /// The file's contents for `subject`, or why this format cannot export it.
    fn serialize(&self, subject: &Subject) -> Result<Vec<u8>, String>;
}

/// An export that could not be written, naming its file.
#[derive(Debug)]
pub struct ExportError {
    pub format: Format,
    pub path: PathBuf,
    pub reason: Reason,
}

#[derive(Debug)]
pub enum Reason {
    /// The format cannot export this subject (no call chains, no samples, ...).
    Refused(String),
    /// The file could not be written.
    Io(std::io::Error),
}

impl fmt::Display for ExportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (name, path) = (self.format.name(), self.path.display());
        match &self.reason {
            Reason::Refused(why) => write!(f, "cannot write {name} {path}: {why}"),
            Reason::Io(e) => write!(f, "cannot write {name} {path}: {e} (check the directory)"),
        }
    }
}

impl std::error::Error for ExportError {}

/// Which samples the folded stacks and the flame graph draw (docs/profile.md, "Per request
/// class"): those whose tags match every filter, in the file named, or one file per value of
/// `by`, named `STEM.VALUE.EXT`.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub filters: Vec<TagFilter>,
    pub by: Option<String>,
}

impl Selection {
    fn is_all(&self) -> bool {
        self.filters.is_empty() && self.by.is_none()
    }

    /// Each file to write for `path`, with the samples it draws and what they are.
    fn files(&self, p: &Profile, path: &Path) -> Result<Vec<(PathBuf, Profile, String)>, String> {
        let chosen = tagged::select(p, &self.filters)?;
        let what: Vec<String> = self
            .filters
            .iter()
            .map(|f| format!("{} {}", f.key, f.value))
            .collect();
        let Some(key) = &self.by else {
            return Ok(vec![(path.to_path_buf(), chosen, what.join(", "))]);
        };
        Ok(tagged::split(&chosen, key)?
            .into_iter()
            .map(|(value, group)| {
                let mut of = what.clone();
                of.push(format!("{key} {value}"));
                (group_path(path, &value), group, of.join(", "))
            })
            .collect())
    }
}

/// `STEM.VALUE.EXT` beside `path`, the value's characters other than letters, digits, `-` and
/// `.` turned into `_` (`flame.svg`, class `/blog` → `flame._blog.svg`).
fn group_path(path: &Path, value: &str) -> PathBuf {
    let safe: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}.{safe}.{}", ext.to_string_lossy()),
        None => format!("{stem}.{safe}"),
    };
    path.with_file_name(name)
}

/// The exports one command asked for, written together.
#[derive(Default)]
pub struct ExportManager {
    exports: Vec<(Format, PathBuf)>,
    selection: Selection,
}

impl ExportManager {
    pub fn add(&mut self, format: Format, path: impl Into<PathBuf>) {
        self.exports.push((format, path.into()));
    }

    /// Adds `format` when its output option was given.
    pub fn add_if_given(&mut self, format: Format, path: Option<&Path>) {
        if let Some(path) = path {
            self.add(format, path);
        }
    }

    /// Draws only the samples `selection` chooses in the folded stacks and flame graph.
    pub fn select(&mut self, selection: Selection) {
        self.selection = selection;
    }

    /// Writes every export of `subject` in the order they were added, stopping at the first
    /// that fails. A refused export leaves no file behind.
    pub fn write(&self, subject: &Subject) -> Result<(), ExportError> {
        for (format, path) in &self.exports {
            let error = |reason| ExportError {
                format: *format,
                path: path.clone(),
                reason,
            };
            let selected =
                matches!(format, Format::Folded | Format::Flamegraph) && !self.selection.is_all();
            if !selected {
                let bytes = format
                    .exporter()
                    .serialize(subject)
                    .map_err(|why| error(Reason::Refused(why)))?;
                std::fs::write(path, bytes).map_err(|e| error(Reason::Io(e)))?;
                continue;
            }
            let files = subject
                .profile()
                .and_then(|p| self.selection.files(p, path))
                .map_err(|why| error(Reason::Refused(why)))?;
            for (file, p, of) in files {
                let bytes = match format {
                    Format::Folded => folded_bytes(&p),
                    _ => flamegraph_svg(&p, &format!(", {of}"))
                        .map_err(|why| error(Reason::Refused(format!("{of}: {why}"))))?,
                };
                std::fs::write(&file, bytes).map_err(|e| ExportError {
                    format: *format,
                    path: file.clone(),
                    reason: Reason::Io(e),
                })?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{profile_run, sample_profile};

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("reqcost-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn every_run_format_writes_its_file() {
        let dir = scratch("export-run");
        let rec = profile_run();
        let mut exports = ExportManager::default();
        exports.add(Format::Folded, dir.join("f.txt"));
        exports.add(Format::Flamegraph, dir.join("f.svg"));
        exports.add(Format::Pprof, dir.join("f.pb.gz"));
        exports
            .write(&Subject::Run(&Reading::of(&rec, None)))
            .unwrap();
        let folded = std::fs::read_to_string(dir.join("f.txt")).unwrap();
        assert_eq!(folded, folded_lines(&sample_profile()).join("\n") + "\n");
        let svg = std::fs::read_to_string(dir.join("f.svg")).unwrap();
        assert!(svg.starts_with("<?xml") && svg.contains("memcpy"));
        let gz = std::fs::read(dir.join("f.pb.gz")).unwrap();
        assert_eq!(&gz[..2], &[0x1f, 0x8b]);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn folded_and_flame_graphs_per_class() {
        let dir = scratch("export-by-class");
        let mut rec = profile_run();
        let p = rec.profile.as_mut().unwrap();
        p.tags = ["/blog", "/feed"]
            .map(|c| reqcost_record::SampleTag {
                class: c.into(),
                ..Default::default()
            })
            .to_vec();
        for (i, s) in p.stacks.iter_mut().enumerate() {
            s.tag = Some((i % 2) as u32);
        }
        let lines = folded_lines(p);
        let mut exports = ExportManager::default();
        exports.add(Format::Folded, dir.join("f.txt"));
        exports.add(Format::Flamegraph, dir.join("f.svg"));
        exports.select(Selection {
            filters: vec![],
            by: Some("class".into()),
        });
        exports
            .write(&Subject::Run(&Reading::of(&rec, None)))
            .unwrap();
        let blog = std::fs::read_to_string(dir.join("f._blog.txt")).unwrap();
        let even: Vec<&String> = lines.iter().step_by(2).collect();
        assert_eq!(blog.lines().collect::<Vec<_>>(), even);
        assert!(dir.join("f._feed.txt").exists());
        let svg = std::fs::read_to_string(dir.join("f._feed.svg")).unwrap();
        assert!(svg.contains("on-CPU call chains, class /feed"));

        let mut exports = ExportManager::default();
        exports.add(Format::Folded, dir.join("w.txt"));
        exports.select(Selection {
            filters: vec!["class=/feed".parse().unwrap()],
            by: None,
        });
        exports
            .write(&Subject::Run(&Reading::of(&rec, None)))
            .unwrap();
        let feed = std::fs::read_to_string(dir.join("w.txt")).unwrap();
        let odd: Vec<&String> = lines.iter().skip(1).step_by(2).collect();
        assert_eq!(feed.lines().collect::<Vec<_>>(), odd);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn refusals_name_the_file_and_leave_none() {
        let dir = scratch("export-refused");
        let mut rec = profile_run();
        rec.profile = None;
        let mut exports = ExportManager::default();
        exports.add(Format::Pprof, dir.join("none.pb.gz"));
        let e = exports
            .write(&Subject::Run(&Reading::of(&rec, None)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.pb.gz"), "{e}");
        assert!(
            e.contains("run fixture-profile has no sampled call chains"),
            "{e}"
        );

        rec.profile = Some(Profile::default());
        let mut exports = ExportManager::default();
        exports.add(Format::Flamegraph, dir.join("empty.svg"));
        let e = exports
            .write(&Subject::Run(&Reading::of(&rec, None)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no samples"), "{e}");
        assert!(!dir.join("empty.svg").exists());

        let mut exports = ExportManager::default();
        exports.add(Format::SweepChart, dir.join("chart.svg"));
        let e = exports
            .write(&Subject::Run(&Reading::of(&rec, None)))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a run"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
