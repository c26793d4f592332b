use std::fmt::Write;

use comfy_table::Cell;
use reqcost_analysis::cost_table::CostTable;
use reqcost_analysis::document::{
    BudgetFigures, ClientCost, ClientSplit, PerRequestFigures, PhaseAnalysis, ServerSplit,
    TickTrust, WindowsFigures, SPLIT_MIN_TICKS,
};
use reqcost_analysis::reading::{PhaseRecord, Reading, WindowsRecord};
use reqcost_analysis::replay::ReplayedFigure;
use reqcost_record::{CpuMethod, Outcome, RunRecord, TargetMode, LIVE_PROTOCOL};

use crate::findings::findings_section;
use crate::format::{
    fmt_bytes, fmt_count, fmt_duration_ns, fmt_duration_us, fmt_metric, right, table,
};
use crate::kernel::{kernel_section, probe_cost_line};
use crate::profile::profile_section;
use crate::profile_classes::costliest_section;
use crate::requests::requests_section;
use crate::stack::stack_section;

/// The terminal summary of a run, as `run` prints it and `report` reprints it: the record's
/// description, then the reading's phases (per the unit it was made in), profile and findings.
pub fn summary(reading: &Reading) -> String {
    let run = reading.run;
    let doc = &reading.analysis;
    let mut out = String::new();
    let status = match &doc.outcome {
        Outcome::Completed => "completed".to_string(),
        Outcome::ServerDied { detail } => format!("PARTIAL: server died ({detail})"),
        Outcome::Interrupted => "PARTIAL: interrupted".to_string(),
        Outcome::Failed { detail } => format!("FAILED: {detail}"),
    };
    // The command that took the record: attach watches live traffic, run drives the server.
    let command = match run.workload.protocol == LIVE_PROTOCOL {
        true => "attach",
        false => "run",
    };
    let _ = writeln!(out, "reqcost {command} {} · {status}", doc.run_id);
    let target = match (&run.target.mode, &run.target.command) {
        (TargetMode::Launch, Some(cmd)) => format!("{} (pid {})", cmd.join(" "), run.target.pid),
        _ => format!("{} (pid {}, attached)", run.target.comm, run.target.pid),
    };
    let _ = writeln!(out, "  server    {target}");
    if let Some(exit) = &run.target.exit {
        let _ = writeln!(out, "  ended     {exit}");
    }
    let w = &run.workload;
    let mut load = if w.protocol == LIVE_PROTOCOL {
        format!("{} · the server's own clients, reqcost sent nothing", w.url)
    } else if let Some(l) = &w.load {
        format!(
            "load command `{}` · {}",
            l.command,
            l.exit.as_deref().unwrap_or("stopped before its end")
        )
    } else {
        format!("{} · {} connection(s)", w.url, w.concurrency)
    };
    if let Some(f) = &w.requests_file {
        let _ = write!(load, " · requests from {f}");
    }
    let _ = writeln!(out, "  workload  {load}");
    let pin = &run.pinning;
    let pinning = if pin.enabled {
        let list = |c: &[u32]| c.iter().map(u32::to_string).collect::<Vec<_>>().join(",");
        let server = if pin.server_cpus.is_empty() {
            "server not pinned".to_string()
        } else {
            format!("server on CPU {}", list(&pin.server_cpus))
        };
        format!("{server}, load generator on CPU {}", list(&pin.client_cpus))
    } else {
        "off".to_string()
    };
    let _ = writeln!(out, "  pinning   {pinning}");
    if let Some(note) = &pin.note {
        let _ = writeln!(out, "            ({note})");
    }
    let _ = writeln!(
        out,
        "  machine   {} · {} · {} CPUs",
        run.machine.hostname, run.machine.kernel, run.machine.cpus
    );

    for (phase, figures) in reading.phase_pairs() {
        out.push('\n');
        phase_block(&mut out, phase, figures, run.workload.duration_s);
    }
    if let Some(c) = &doc.client {
        let _ = writeln!(out, "  client       {}", client_cost_text(c));
        if let Some(split) = &c.kernel_split {
            let _ = writeln!(out, "  client kernel by subsystem: {}", split.parts_text());
        }
    }
    if doc.phases.len() > 1 {
        out.push('\n');
        out.push_str(&cost_table(&reading.cost_table));
        out.push('\n');
    }
    if !doc.replay.is_empty() {
        out.push('\n');
        out.push_str(&replay_section(&doc.replay));
    }
    if let Some(profile) = reading.profile {
        out.push('\n');
        out.push_str(&profile_section(
            profile,
            reading.sampled_requests,
            doc.kernel_split.as_ref(),
        ));
        out.push_str(&costliest_section(&doc.costliest_code, &doc.phases));
    }
    out.push('\n');
    out.push_str(&findings_section(&doc.findings, &reading.not_evaluated));
    if !doc.notes.is_empty() {
        out.push_str("\nnotes\n");
        for n in &doc.notes {
            let _ = writeln!(out, "  - {n}");
        }
    }
    out
}

/// The replay against its log, a line per figure, and what it could not reproduce.
fn replay_section(rows: &[ReplayedFigure]) -> String {
    let mut out = String::from("replay vs the log\n");
    let _ = writeln!(out, "  {:<24} {:>24} {:>24}", "", "logged", "replayed");
    for r in rows {
        let mark = if r.reproduced { "" } else { "  ≠" };
        let _ = writeln!(
            out,
            "  {:<24} {:>24} {:>24}{mark}",
            r.figure, r.logged, r.replayed
        );
    }
    for r in rows.iter().filter(|r| !r.reproduced) {
        if let Some(why) = &r.why {
            let _ = writeln!(out, "  not reproduced: {}: {why}", r.figure);
        }
    }
    out
}

/// One phase: its `figures` from the reading, and what `p` recorded beside them; `window_s` is
/// the run's length, which a phase without a load generator (attach) takes its request rate
/// from. Why its count may be wrong follows the count.
fn phase_block(out: &mut String, p: &PhaseRecord, figures: &PhaseAnalysis, window_s: Option<f64>) {
    let c = &p.client;
    let model = p.client_model.as_deref().unwrap_or("unlimited clients");
    let _ = writeln!(out, "phase {} ({model})", p.name);
    if figures.unit.is_request() || figures.requests.is_some() || c.requests > 0 {
        let _ = writeln!(
            out,
            "  requests     {}",
            requests_line(p, figures.served_per_s, window_s)
        );
    } else {
        let rate = figures
            .units_per_s
            .map(|r| format!(" · {r:.1} {}", figures.unit.rate()))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "  work         {} over {:.2} s{rate}",
            figures.units_text(),
            c.elapsed_s
        );
    }
    for caveat in &figures.count_caveats {
        let _ = writeln!(out, "  count!       {}", caveat.text);
    }
    if let Some(line) = other_traffic_line(p) {
        let _ = writeln!(out, "  others       {line}");
    }
    if let Some(resumed) = c.tls_resumed {
        let _ = writeln!(
            out,
            "  tls          {resumed} of {} connections resumed a session",
            c.connections
        );
    }
    if !c.skipped.is_empty() {
        let kinds: Vec<String> = c.skipped.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(out, "  skipped      {}", kinds.join(", "));
    }
    if c.ok > 0 {
        let l = &c.latency;
        let _ = writeln!(
            out,
            "  latency      p50 {} · p90 {} · p99 {} · p99.9 {} · max {}",
            fmt_duration_us(l.p50_us),
            fmt_duration_us(l.p90_us),
            fmt_duration_us(l.p99_us),
            fmt_duration_us(l.p999_us),
            fmt_duration_us(l.max_us)
        );
    }
    let r = &figures.per_request;
    let _ = write!(out, "  per {}  CPU ", figures.unit.label());
    match (r.cpu_us, r.cpu_user_us, r.cpu_system_us) {
        (Some(t), Some(u), Some(s)) => {
            let _ = writeln!(
                out,
                "{} (user {}, system {}{})",
                fmt_duration_us(t),
                fmt_duration_us(u),
                fmt_duration_us(s),
                tick_split_note(figures.cpu_split)
            );
        }
        (Some(t), None, None) => {
            let _ = writeln!(out, "{} (user/system split unknown)", fmt_duration_us(t));
        }
        _ => {
            let _ = writeln!(out, "not measured: {}", figures.cpu_missing());
        }
    }
    if let (Some(w), Some(wf)) = (&p.cpu_windows, &figures.cpu_windows) {
        out.push_str(&windows_line(w, wf, figures.units));
        if let Some(b) = &wf.budget {
            out.push_str(&budget_lines(b, wf.probed_percent));
        }
    }
    calls_line(out, &figures.per_request);
    if let Some(k) = &figures.kernel {
        out.push_str(&kernel_section(k, figures.unit.name()));
        if let Some(cost) = &k.probe_cost {
            out.push_str(&probe_cost_line(cost, figures.unit.name()));
        }
    }
    if let Some(r) = &figures.requests {
        out.push_str(&requests_section(r, figures.units));
    } else if let Some(why) = &figures.requests_not_visible {
        let _ = writeln!(out, "  requests as the server served them: {why}");
    }
    if let Some(stack) = &figures.stack {
        out.push_str(&stack_section(stack));
    }
    for (field, reason) in &figures.missing {
        if field != "cpu" {
            let _ = writeln!(out, "  not measured {field}: {reason}");
        }
    }
}

/// Where the counts come from: the probed part's own request count is named only where it is
/// not the phase's `units`, which every per-request figure divides by.
fn counts_from(what: &str, probed: u64, units: f64) -> String {
    if probed as f64 == units {
        format!("counts from {what}")
    } else {
        format!("counts from {what}, which finished {probed} requests (the figures divide by the phase's {units:.0})")
    }
}

/// How the CPU figure above was measured, and the probes' cost as a ratio when both kinds of
/// window ran; the phase's count is the header's, the others are said as what they are.
fn windows_line(w: &WindowsRecord, figures: &WindowsFigures, units: f64) -> String {
    let probed = match (figures.probed_cpu_us, figures.probe_cost_ratio) {
        (Some(us), Some(ratio)) => {
            format!(" (with the probes {}, {ratio:.2}x)", fmt_duration_us(us))
        }
        _ => String::new(),
    };
    let scaled = if w.count_scale == 1.0 {
        String::new()
    } else {
        format!(", scaled x{:.2} to the phase's {units:.0}", w.count_scale)
    };
    match (w.method, w.pass_factor) {
        (CpuMethod::UnprobedWindows, _) => format!(
            "               CPU measured without the probes: {} windows, {} requests{probed}; \
             counts from {} probed windows, {} requests{scaled}\n",
            w.unprobed.windows, w.unprobed.requests, w.probed.windows, w.probed.requests
        ),
        (CpuMethod::UnprobedPass, Some(factor)) => format!(
            "               CPU measured without the probes: the command run a second time \
             ({:.2} s), about {} requests by the server's reads and writes (x{:.3} the first \
             run's){probed}; {}\n",
            w.unprobed.elapsed_s,
            w.unprobed.requests,
            factor,
            counts_from("the probed run", w.probed.requests, units)
        ),
        (CpuMethod::UnprobedPass, None) => format!(
            "               CPU measured without the probes: an unprobed pass of {} requests \
             ({:.2} s){probed}; {}\n",
            w.unprobed.requests,
            w.unprobed.elapsed_s,
            counts_from("the probed pass", w.probed.requests, units)
        ),
        (CpuMethod::Probed, _) => format!(
            "               CPU includes the probes' cost: {}{probed}\n",
            w.reason
        ),
        (CpuMethod::Sampled, _) => format!(
            "  sampled      probes on {:.0} % of the time ({:.1} s of {:.1} s): requests and \
             counts scaled x{:.2}; CPU is the whole window's\n",
            figures.probed_percent, w.probed.elapsed_s, figures.elapsed_s, w.count_scale
        ),
    }
}

/// What the probes cost against their budget, how, and whether the budget held.
fn budget_lines(f: &BudgetFigures, probed_percent: f64) -> String {
    let b = &f.measured;
    let [low, high] = f.cost_interval_percent;
    let mut out = format!(
        "  budget       probes' cost {:.1} % of the server's CPU ({low:.1}–{high:.1} %), budget \
         {:.1} %: probes on {probed_percent:.1} % of the time (duty {:.1}–{:.1} % over {} \
         cycles)\n",
        f.cost_percent, f.budget_percent, f.duty_low_percent, f.duty_high_percent, b.cycles
    );
    let measured = match b.measured_ns {
        Some(ns) => format!(
            "; on/off turns measure {} (per byte received)",
            fmt_duration_ns(ns as f64)
        ),
        None => "; no on/off measurement (no TCP bytes in both kinds of window)".into(),
    };
    let _ = writeln!(
        out,
        "               cost accounted {}: programs {}, slow syscall path {} ({:.0} ns x {} \
         syscalls), uretprobe syscalls {}{measured}",
        fmt_duration_ns(b.accounted_ns as f64),
        fmt_duration_ns(b.program_ns as f64),
        fmt_duration_ns(b.syscall_trap_ns as f64),
        b.trap_ns,
        b.syscalls,
        fmt_duration_ns(b.uretprobe_ns as f64)
    );
    if let Some(over) = f.over_points {
        let _ = writeln!(
            out,
            "  budget not held: at the least duty ({:.0} %) the probes cost {:.1} % of the \
             server's CPU, {over:.1} points over the {:.1} % budget",
            f.min_duty_percent, f.floor_percent, f.budget_percent
        );
    }
    out
}

/// Marks a user/system split that comes from scheduler ticks (the total is exact, the split is
/// not), and one the analysis judged too coarse to trust.
fn tick_split_note(split: Option<ServerSplit>) -> String {
    match split {
        Some(ServerSplit::Ticks {
            trust: TickTrust::Enough,
            ..
        }) => "; split by scheduler ticks".into(),
        Some(ServerSplit::Ticks { cpu_us, .. }) => format!(
            "; split by scheduler ticks over {} of CPU: too few ticks to trust, run longer",
            fmt_duration_us(cpu_us)
        ),
        Some(ServerSplit::Reported) | None => String::new(),
    }
}

/// The load generator's count and errors; in a phase it did not drive, the requests the server
/// served (at `served_per_s` over the run's `window_s`), so that no client figure of reqcost's
/// own stands for the server's clients.
fn requests_line(p: &PhaseRecord, served_per_s: Option<f64>, window_s: Option<f64>) -> String {
    let c = &p.client;
    if let Some(served) = p.served {
        let rate = served_per_s
            .zip(window_s)
            .map(|(rate, s)| format!(" · {rate:.0} req/s over {s:.2} s"))
            .unwrap_or_default();
        return format!("{served:.0} served, counted on the server side (reqcost sent none){rate}");
    }
    let mut line = format!(
        "{} ok · {} errors · {:.0} req/s over {:.2} s",
        c.ok,
        c.error_count(),
        c.throughput_rps,
        c.elapsed_s
    );
    if !c.errors.is_empty() {
        let kinds: Vec<String> = c.errors.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = write!(line, " ({})", kinds.join(", "));
    }
    if let Some(n) = c.load_threads {
        let _ = write!(line, " · {n} load thread{}", if n == 1 { "" } else { "s" });
    }
    line
}

/// The traffic of an attached server's other clients in a phase reqcost loaded, when it had
/// any: the per-request figures divide by it too.
fn other_traffic_line(p: &PhaseRecord) -> Option<String> {
    let other = p.other_traffic?;
    let bytes = match (other.bytes_in, other.bytes_out) {
        (Some(i), Some(o)) => format!(" ({} in, {} out)", fmt_bytes(i as f64), fmt_bytes(o as f64)),
        _ => String::new(),
    };
    Some(format!(
        "{} requests{bytes} from the server's other clients besides reqcost's {}: figures per \
         request divide by all {} it served",
        other.requests, p.client.ok, p.units
    ))
}

/// The phases of several runs side by side, each column named after its server (and phase,
/// beyond main).
pub fn side_by_side(records: &[RunRecord]) -> String {
    cost_table(&CostTable::of_runs(records))
}

/// Call counts per request: the probes' when they ran, else /proc's, said to be so.
fn calls_line(out: &mut String, r: &PerRequestFigures) {
    let figures = [
        ("read calls", r.read_calls),
        ("write calls", r.write_calls),
        ("context switches", r.context_switches),
    ];
    let calls: Vec<String> = figures
        .iter()
        .filter_map(|(name, v)| Some(format!("{name} {}", fmt_count((*v)?))))
        .collect();
    if calls.is_empty() {
        return;
    }
    let _ = writeln!(out, "               {}", calls.join(" · "));
    if r.calls_from_procfs {
        // /proc/PID/io counts read(2)/write(2)-family calls only: a server using send/recv on
        // its sockets would look as if it wrote nothing.
        let _ = writeln!(
            out,
            "               (read/write from /proc/PID/io: socket send*/recv* calls are not counted there)"
        );
    }
}

/// Phases side by side, so a slow-client or per-class phase reads against the main one.
fn cost_table(c: &CostTable) -> String {
    let mut t = table();
    let mut header = vec![Cell::new(format!("per {}", c.unit.name()))];
    header.extend(c.columns.iter().map(Cell::new));
    t.set_header(header);
    let mut requests = vec![Cell::new(format!("{}s", c.unit.name()))];
    requests.extend(c.units.iter().map(|u| right(fmt_count(*u))));
    t.add_row(requests);
    for r in &c.rows {
        let mut row = vec![Cell::new(r.name)];
        row.extend(r.cells.iter().map(|cell| {
            let value = cell
                .value
                .map_or_else(|| "-".into(), |v| fmt_metric(v, r.unit));
            let mark = if cell.from_procfs { " ¹" } else { "" };
            right(format!("{value}{mark}"))
        }));
        t.add_row(row);
    }
    let mut out = t.to_string();
    if c.any_from_procfs() {
        out.push_str(
            "\n¹ from /proc/PID/io, the probes being off: socket send*/recv* calls are not counted",
        );
    }
    out
}

/// The client's CPU (and syscalls) per unit, as the summary and the HTML report say it.
pub fn client_cost_text(c: &ClientCost) -> String {
    let core = c
        .percent_of_core
        .map(|p| format!(" · {p:.0} % of a core"))
        .unwrap_or_default();
    let syscalls = c
        .syscalls
        .map(|n| {
            let top: Vec<String> = c
                .syscalls_by_name
                .iter()
                .take(4)
                .map(|(name, v)| format!("{name} {}", fmt_count(*v)))
                .collect();
            format!(
                " · {} syscalls per {} ({})",
                fmt_count(n),
                c.unit.name(),
                top.join(", ")
            )
        })
        .unwrap_or_default();
    format!(
        "{}: CPU per {} {} ({}){core}{syscalls}",
        c.generator.label(),
        c.unit.name(),
        fmt_duration_us(c.cpu_us),
        client_split_text(c)
    )
}

/// `user 40 µs, system 120 µs`, with where the split comes from when not from enough ticks.
fn client_split_text(c: &ClientCost) -> String {
    let split = match (c.cpu_user_us, c.cpu_system_us) {
        (Some(user), Some(system)) => format!(
            "user {}, system {}",
            fmt_duration_us(user),
            fmt_duration_us(system)
        ),
        _ => "user/system split unknown".into(),
    };
    match c.split {
        ClientSplit::Ticks { .. } => split,
        ClientSplit::Samples { ticks, samples } => format!(
            "{split}, from its {samples} samples: {ticks} scheduler tick(s) too few to split by"
        ),
        ClientSplit::Unknown { ticks } => format!(
            "{split}: {ticks} scheduler tick(s) and fewer than {SPLIT_MIN_TICKS} samples, too \
             few to split by"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqcost_record::{
        ClientStats, CpuSplit, FdKind, IoDirection, IoStat, KernelStats, PerRequest, Phase,
    };

    /// 100 requests; /proc counted 2 write(2) calls per request, the probes (when on) 5 sends.
    fn phase(name: &str, probes: bool) -> Phase {
        let kernel = KernelStats {
            io: vec![IoStat {
                syscall: "sendto".into(),
                direction: IoDirection::Write,
                fd_kind: FdKind::Socket,
                calls: 500,
                bytes: 5000,
                sizes: vec![],
            }],
            ..Default::default()
        };
        let mut p = Phase {
            name: name.into(),
            client_model: None,
            client: ClientStats {
                ok: 100,
                ..Default::default()
            },
            server: Default::default(),
            per_request: PerRequest {
                write_syscalls: Some(2.0),
                ..Default::default()
            },
            missing: Default::default(),
            requests: None,
            other_traffic: None,
            cpu_windows: None,
            unit: Default::default(),
            hops: vec![],
        };
        p.server.kernel = probes.then_some(kernel);
        p
    }

    /// The phase's block with `total_ns` of CPU over its 100 requests, split as `split` says.
    fn cpu_block(total_ns: u64, split: CpuSplit) -> String {
        let mut p = phase("main", true);
        p.server.cpu = Some(reqcost_record::CpuTimes {
            total_ns,
            user_ns: total_ns,
            system_ns: 0,
            source: "fixture".into(),
            split,
        });
        p.per_request = PerRequest::from_totals(&p.server, p.client.ok as f64);
        let mut block = String::new();
        phase_block(
            &mut block,
            &PhaseRecord::of(&p),
            &PhaseAnalysis::of(&p),
            None,
        );
        block
    }

    /// The phase's "per request" line, as [`cpu_block`] makes it.
    fn cpu_line(total_ns: u64, split: CpuSplit) -> String {
        cpu_block(total_ns, split)
            .lines()
            .find(|l| l.contains("per request  CPU"))
            .unwrap()
            .to_string()
    }

    /// Under 20 ticks (80 ms at 250 Hz) the split is left out with why, as the client's is: a
    /// server phase of 27 ms read "user 275 µs, system 0.0 µs" before; under a second it is
    /// marked as coarse.
    #[test]
    fn a_tick_based_split_is_marked_and_distrusted_on_short_phases() {
        let ticks = CpuSplit::Ticks;
        let block = cpu_block(27_466_240, ticks);
        assert!(
            block.contains("  per request  CPU 275 µs (user/system split unknown)\n"),
            "{block}"
        );
        assert!(
            block.contains(
                "  not measured cpu_user_system: the kernel splits CPU into user and system time \
                 by its scheduler ticks, each charged whole to the mode it interrupted, and the \
                 phase's CPU spans about 6 of them (fewer than 20): too few to split by\n"
            ),
            "{block}"
        );
        assert_eq!(
            cpu_line(400_000_000, ticks),
            "  per request  CPU 4.00 ms (user 4.00 ms, system 0.0 µs; split by scheduler ticks \
             over 400.00 ms of CPU: too few ticks to trust, run longer)"
        );
        assert!(
            cpu_line(2_000_000_000, ticks).ends_with("system 0.0 µs; split by scheduler ticks)")
        );
        assert!(cpu_line(27_466_240, CpuSplit::Reported).ends_with("system 0.0 µs)"));
    }

    #[test]
    fn write_calls_are_the_probes_figure_and_procfs_says_so() {
        let (on, off) = (phase("probes", true), phase("no-probes", false));
        let text = cost_table(&CostTable::of(&[
            ("probes".into(), &on),
            ("no-probes".into(), &off),
        ]));
        let row = text.lines().find(|l| l.contains("write calls")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[3..], ["5", "2", "¹", "│"], "{text}");
        assert!(text.contains("¹ from /proc/PID/io"), "{text}");

        let mut block = String::new();
        calls_line(&mut block, &PhaseAnalysis::of(&on).per_request);
        assert!(block.contains("write calls 5"), "{block}");
        assert!(!block.contains("/proc"), "{block}");
        block.clear();
        calls_line(&mut block, &PhaseAnalysis::of(&off).per_request);
        assert!(block.contains("write calls 2"), "{block}");
        assert!(block.contains("from /proc/PID/io"), "{block}");
    }

    #[test]
    fn the_probed_passs_count_is_named_only_where_it_is_not_the_phases() {
        assert_eq!(
            counts_from("the probed pass", 3000, 3000.0),
            "counts from the probed pass"
        );
        assert_eq!(
            counts_from("the probed pass", 1997, 3000.0),
            "counts from the probed pass, which finished 1997 requests (the figures divide by \
             the phase's 3000)"
        );
    }

    #[test]
    fn requests_line_says_how_many_load_threads_sent_them() {
        let mut p = phase("main", true);
        p.client.requests = 100;
        let line = |p: &Phase| requests_line(&PhaseRecord::of(p), None, None);
        assert!(!line(&p).contains("load thread"), "{}", line(&p));
        p.client.load_threads = Some(1);
        assert!(line(&p).ends_with(" · 1 load thread"), "{}", line(&p));
        p.client.load_threads = Some(2);
        assert!(line(&p).ends_with(" · 2 load threads"), "{}", line(&p));
    }
}
