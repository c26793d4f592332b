//! The analysis document's schema, checked on the document of a real record (the busy-wait
//! testbed server, main and slow-client phases): every field with its JSON type, no field
//! beyond them, and each of them described in docs/analysis.md.

use reqcost_analysis::document::{Analysis, ClientCost, ClientSplit, FORMAT, VERSION};
use reqcost_analysis::findings::diagnose;
use reqcost_record::{CpuSplit, CpuTimes, ExternalLoad, Profile, RunRecord, SampleTag};
use serde_json::Value;

use crate::schema::{assert_documented, assert_shape, each, Schema};
use crate::util::{approx, edited, fixture};

const ANALYSIS: Schema = &[
    ("format", "string"),
    ("version", "integer"),
    ("run_id", "string"),
    ("server", "string"),
    ("outcome", "object"),
    ("phases", "array"),
    ("kernel_split", "object?"),
    ("class_code", "array?"),
    ("costliest_code", "array?"),
    ("findings", "array"),
    ("notes", "array"),
];
const KERNEL_SPLIT: Schema = &[
    ("samples", "integer"),
    ("kernel_samples", "integer"),
    ("kernel_share", "number"),
    ("subsystems", "array"),
];
const SUBSYSTEM: Schema = &[
    ("id", "string"),
    ("label", "string"),
    ("samples", "integer"),
    ("share", "number"),
];
const PHASE: Schema = &[
    ("name", "string"),
    ("client_model", "string?"),
    ("requests_ok", "integer"),
    ("units", "number"),
    ("units_per_s", "number?"),
    ("errors", "object"),
    ("throughput_rps", "number?"),
    ("served_per_s", "number?"),
    ("latency_us", "object?"),
    ("per_request", "object"),
    ("cpu_windows", "object?"),
    ("cpu_split", "object?"),
    ("kernel", "object?"),
    ("requests", "object?"),
    ("stack", "object?"),
    ("missing", "object"),
];
const CPU_WINDOWS: Schema = &[
    ("probed_cpu_us", "number?"),
    ("probe_cost_ratio", "number?"),
    ("probed_percent", "number"),
    ("elapsed_s", "number"),
];
const CPU_SPLIT: Schema = &[
    ("from", "string"),
    ("ticks", "integer?"),
    ("cpu_us", "number?"),
    ("trust", "string?"),
];
const KERNEL: Schema = &[
    ("per_unit", "bool"),
    ("syscalls", "number"),
    ("syscall_time_us", "number"),
    ("by_syscall", "array"),
    ("other_syscalls", "object?"),
    ("io", "array"),
    ("ioctls", "array"),
    ("epoll_ctl", "object?"),
    ("waits", "array"),
    ("sched", "object"),
    ("memory", "object"),
    ("accepted", "number"),
    ("sockets_closed", "number"),
    ("udp", "object?"),
    ("tree", "object?"),
    ("lost_events", "integer"),
    ("probe_cost", "object?"),
];
const KERNEL_SYSCALL: Schema = &[
    ("name", "string"),
    ("calls", "number"),
    ("time_us", "number"),
    ("failed", "array"),
];
const KERNEL_IO: Schema = &[
    ("syscall", "string"),
    ("direction", "string"),
    ("fd_kind", "string"),
    ("calls", "number"),
    ("bytes_each", "number"),
    ("sizes", "array"),
];
const KERNEL_SIZE: Schema = &[
    ("min_bytes", "integer"),
    ("max_bytes", "integer"),
    ("count", "integer"),
    ("calls", "number"),
];
const KERNEL_WAIT: Schema = &[
    ("syscall", "string"),
    ("returns", "number"),
    ("nothing_ready", "number"),
    ("ready_per_return", "number"),
    ("asked_per_call", "number"),
];
const KERNEL_SCHED: Schema = &[
    ("wakeups", "number"),
    ("voluntary_switches", "number"),
    ("involuntary_switches", "number"),
    ("runqueue", "object?"),
];
const KERNEL_MEMORY: Schema = &[
    ("page_faults_user", "number"),
    ("page_faults_kernel", "number"),
    ("mapping_calls", "array"),
    ("mapped_bytes", "number"),
    ("unmapped_bytes", "number"),
];
const LATENCY: Schema = &[
    ("min_us", "number"),
    ("mean_us", "number"),
    ("p50_us", "number"),
    ("p90_us", "number"),
    ("p99_us", "number"),
    ("p999_us", "number"),
    ("max_us", "number"),
];
const PER_REQUEST: Schema = &[
    ("cpu_us", "number?"),
    ("cpu_user_us", "number?"),
    ("cpu_system_us", "number?"),
    ("syscalls", "number?"),
    ("read_calls", "number?"),
    ("write_calls", "number?"),
    ("calls_from_procfs", "bool"),
    ("context_switches", "number?"),
    ("wakeups", "number?"),
    ("bytes_received", "number?"),
    ("syscalls_by_name", "array?"),
];
const REQUESTS: Schema = &[
    ("requests", "integer"),
    ("connections", "integer"),
    ("no_request", "integer"),
    ("cpu", "object?"),
    ("cpu_per_request_ns", "object"),
    ("unattributed_cpu_share", "number"),
    ("unattributed_made_of", "string"),
    ("unreliable", "string?"),
    ("by_class", "array"),
    ("by_client", "array"),
    ("by_speed", "array"),
    ("costliest", "array"),
    ("events_dropped", "integer"),
    ("key_cap", "integer"),
    ("classes_over_cap", "integer?"),
    ("clients_over_cap", "integer?"),
    ("upstream_calls", "integer?"),
    ("upstream_call_cpu_ns", "number?"),
];
const REQUESTS_CPU: Schema = &[
    ("total_ns", "integer"),
    ("attributed_pct", "number"),
    ("unattributed_pct", "number"),
    ("ended_pct", "number"),
    ("in_flight_pct", "number"),
];
const DISTRIBUTION: Schema = &[
    ("mean", "number"),
    ("p50", "integer"),
    ("p90", "integer"),
    ("p99", "integer"),
    ("max", "integer"),
    ("stddev", "number?"),
];
const GROUP: Schema = &[
    ("name", "string"),
    ("requests", "integer"),
    ("cpu_ns", "integer"),
    ("cpu_share_pct", "number"),
    ("no_request", "integer"),
    ("cpu_per_request", "object"),
    ("syscalls_per_request", "number"),
    ("bytes_in_per_request", "number"),
    ("bytes_out_per_request", "number"),
    ("clients", "array?"),
    ("by_hop", "array?"),
    ("stack_cpu_ns", "integer?"),
];
const HOP_COST: Schema = &[
    ("hop", "integer"),
    ("cpu_ns", "integer"),
    ("requests", "integer"),
    ("classes", "array?"),
];
const HOP_CLASS: Schema = &[
    ("name", "string"),
    ("requests", "integer"),
    ("cpu_ns", "integer"),
];
const STACK: Schema = &[
    ("cpu_ns", "integer"),
    ("for_front_cpu_ns", "integer"),
    ("for_front_share", "number"),
    ("hops", "array"),
    ("classes", "array"),
    ("costliest", "array"),
    ("code", "array?"),
];
const UPSTREAM_CODE: Schema = &[
    ("hop", "integer"),
    ("name", "string"),
    ("class", "string"),
    ("cpu_ns", "integer"),
    ("caused_by", "string"),
    ("front_class", "string?"),
    ("code", "object"),
];
const STACK_HOP: Schema = &[
    ("hop", "integer"),
    ("name", "string"),
    ("via", "string?"),
    ("cpu_ns", "integer?"),
    ("for_front_cpu_ns", "integer"),
    ("not_for_front_cpu_ns", "integer"),
    ("not_for_front_share", "number"),
    ("own_cpu_ns", "integer?"),
    ("unlinked_cpu_ns", "integer?"),
    ("requests", "object?"),
];
const STACK_CLASS: Schema = &[
    ("class", "string"),
    ("requests", "integer"),
    ("cpu_per_request_ns", "number"),
    ("parts", "array"),
    ("dearest_hop", "integer"),
    ("dearest_code", "object?"),
];
const STACK_PART: Schema = &[
    ("hop", "integer"),
    ("name", "string"),
    ("cpu_per_request_ns", "number"),
    ("requests_per_request", "number"),
    ("share", "number"),
    ("classes", "array?"),
];
const STACK_COSTLY: Schema = &[
    ("id", "string"),
    ("class", "string"),
    ("client", "string"),
    ("cpu_ns", "integer"),
    ("parts", "array"),
];
const GROUP_CODE: Schema = &[
    ("name", "string"),
    ("samples", "integer"),
    ("sampled_ns", "integer"),
    ("probe_samples", "integer"),
    ("by_self", "array"),
    ("by_total", "array"),
];
const HOT_FUNCTION: Schema = &[
    ("function", "string"),
    ("module", "string"),
    ("kernel", "bool"),
    ("samples", "integer"),
    ("share", "number"),
    ("callers", "array?"),
];
pub const FINDING: Schema = &[
    ("id", "string"),
    ("title", "string"),
    ("evidence", "array"),
    ("cpu_share", "number"),
    ("phase", "string"),
    ("fix", "string"),
    ("confidence", "string"),
    ("major", "bool"),
    ("carriers", "array?"),
    ("server", "string?"),
];

/// The phase's kernel figures, which the busy-wait record has (its probes ran).
fn kernel_shape(k: &Value) {
    assert_shape(k, KERNEL, "kernel");
    for s in each(k, "by_syscall") {
        assert_shape(s, KERNEL_SYSCALL, "by_syscall");
    }
    for io in each(k, "io") {
        assert_shape(io, KERNEL_IO, "io");
        for size in each(io, "sizes") {
            assert_shape(size, KERNEL_SIZE, "sizes");
        }
    }
    for w in each(k, "waits") {
        assert_shape(w, KERNEL_WAIT, "waits");
    }
    assert_shape(&k["sched"], KERNEL_SCHED, "sched");
    assert_shape(&k["memory"], KERNEL_MEMORY, "memory");
}

fn document() -> (Value, Analysis) {
    let analysis = Analysis::of(&fixture("busy-wait.json"));
    let text = serde_json::to_string_pretty(&analysis).unwrap();
    (serde_json::from_str(&text).unwrap(), analysis)
}

#[test]
fn a_real_document_has_the_documented_fields_and_types() {
    let (doc, _) = document();
    assert_shape(&doc, ANALYSIS, "analysis");
    assert_eq!(doc["format"], FORMAT);
    assert_eq!(doc["version"], VERSION);
    for phase in each(&doc, "phases") {
        assert_shape(phase, PHASE, "phase");
        assert_shape(&phase["latency_us"], LATENCY, "latency_us");
        assert_shape(&phase["per_request"], PER_REQUEST, "per_request");
        assert_shape(&phase["cpu_split"], CPU_SPLIT, "cpu_split");
        if !phase["cpu_windows"].is_null() {
            assert_shape(&phase["cpu_windows"], CPU_WINDOWS, "cpu_windows");
        }
        kernel_shape(&phase["kernel"]);
        let requests = &phase["requests"];
        assert_shape(requests, REQUESTS, "requests");
        assert_shape(&requests["cpu"], REQUESTS_CPU, "requests.cpu");
        assert_shape(
            &requests["cpu_per_request_ns"],
            DISTRIBUTION,
            "cpu_per_request_ns",
        );
        for table in ["by_class", "by_client", "by_speed"] {
            for group in each(requests, table) {
                assert_shape(group, GROUP, table);
                assert_shape(&group["cpu_per_request"], DISTRIBUTION, table);
            }
        }
    }
    assert_shape(&doc["kernel_split"], KERNEL_SPLIT, "kernel_split");
    for sub in each(&doc["kernel_split"], "subsystems") {
        assert_shape(sub, SUBSYSTEM, "subsystem");
    }
    let findings = each(&doc, "findings");
    assert!(!findings.is_empty(), "the busy-wait record has findings");
    for f in findings {
        assert_shape(f, FINDING, "finding");
    }
}

#[test]
fn the_document_carries_the_records_figures_and_findings() {
    let rec = fixture("busy-wait.json");
    let (doc, analysis) = document();
    assert_eq!(doc["run_id"], rec.id.as_str());
    assert_eq!(analysis.findings, diagnose(&rec));
    assert_eq!(analysis.findings[0].id, "busy-wait");
    let main = analysis.main_phase().unwrap();
    let recorded = rec.main_phase().unwrap();
    assert_eq!(main.per_request.cpu_us, recorded.per_request.cpu_total_us);
    let requests = main.requests.as_ref().unwrap();
    assert_eq!(
        requests.by_client,
        recorded.requests.as_ref().unwrap().by_client
    );
    // JSON keeps floats to the last digit or so: the figures are compared above, the shape here.
    let back: Analysis = serde_json::from_value(doc).expect("the document reads back");
    assert_eq!(back.findings.len(), analysis.findings.len());
    assert_eq!(back.phases.len(), analysis.phases.len());
}

/// The busy-wait record with its samples tagged: even stacks class `(empty)`, odd ones
/// `(unattributed)`, and the first three stacks the main phase's costliest request's.
fn tagged() -> RunRecord {
    let mut rec = fixture("busy-wait.json");
    let id = "41/7/0";
    let main = rec.phases.iter_mut().find(|p| p.name == "main").unwrap();
    main.requests.as_mut().unwrap().costliest[0].id = id.into();
    let p = rec.profile.as_mut().unwrap();
    let tag = |class: &str, request: &str| SampleTag {
        class: class.into(),
        phase: "main".into(),
        request: request.into(),
        ..SampleTag::default()
    };
    p.tags = vec![
        tag("(empty)", ""),
        tag("(unattributed)", ""),
        tag("(empty)", id),
    ];
    for (i, s) in p.stacks.iter_mut().enumerate() {
        s.tag = Some(if i < 3 { 2 } else { (i % 2) as u32 });
    }
    rec
}

#[test]
fn tagged_samples_give_each_class_and_costliest_request_its_code() {
    let rec = tagged();
    let doc = serde_json::to_value(Analysis::of(&rec)).unwrap();
    assert_shape(&doc, ANALYSIS, "analysis");
    let classes = each(&doc, "class_code");
    let names: Vec<&str> = classes
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 2);
    assert!(names.contains(&"(empty)") && names.contains(&"(unattributed)"));
    let costliest = each(&doc, "costliest_code");
    assert_eq!(costliest.len(), 1);
    assert_eq!(costliest[0]["name"], "41/7/0");
    let p = rec.profile.as_ref().unwrap();
    let own: u64 = p.stacks[..3].iter().map(|s| s.count).sum();
    assert_eq!(costliest[0]["samples"], own);
    for g in classes.iter().chain(costliest) {
        assert_shape(g, GROUP_CODE, "group code");
        for f in each(g, "by_self").iter().chain(each(g, "by_total")) {
            assert_shape(f, HOT_FUNCTION, "hot function");
        }
    }
    let untagged = serde_json::to_value(Analysis::of(&fixture("busy-wait.json"))).unwrap();
    assert!(untagged.get("class_code").is_none());
}

#[test]
fn every_field_is_documented() {
    assert_documented(
        "analysis.md",
        &[
            ANALYSIS,
            PHASE,
            LATENCY,
            PER_REQUEST,
            REQUESTS,
            REQUESTS_CPU,
            DISTRIBUTION,
            GROUP,
            FINDING,
            CPU_WINDOWS,
            CPU_SPLIT,
            KERNEL,
            KERNEL_SYSCALL,
            KERNEL_IO,
            KERNEL_SIZE,
            KERNEL_WAIT,
            KERNEL_SCHED,
            KERNEL_MEMORY,
            KERNEL_SPLIT,
            SUBSYSTEM,
            GROUP_CODE,
            HOT_FUNCTION,
            HOP_COST,
            HOP_CLASS,
            STACK,
            STACK_HOP,
            STACK_CLASS,
            STACK_PART,
            STACK_COSTLY,
            UPSTREAM_CODE,
        ],
    );
}

#[test]
fn a_stack_document_has_the_documented_fields_and_types() {
    let mut rec = crate::stack::record();
    let db = rec.phases[0].hops[1].requests.clone().unwrap();
    rec.profile = Some(reqcost_testkit::stack::profile(&db.costliest[0].id));
    let doc = serde_json::to_value(Analysis::of(&rec)).unwrap();
    let phase = &each(&doc, "phases")[0];
    assert_shape(phase, PHASE, "phase");
    let requests = &phase["requests"];
    assert_shape(requests, REQUESTS, "requests");
    for group in each(requests, "by_class") {
        assert_shape(group, GROUP, "by_class");
        for hop in each(group, "by_hop") {
            assert_shape(hop, HOP_COST, "by_hop");
            for class in each(hop, "classes") {
                assert_shape(class, HOP_CLASS, "by_hop.classes");
            }
        }
    }
    let stack = &phase["stack"];
    assert_shape(stack, STACK, "stack");
    for hop in each(stack, "hops") {
        assert_shape(hop, STACK_HOP, "stack.hops");
        if !hop["requests"].is_null() {
            assert_shape(&hop["requests"], REQUESTS, "stack.hops.requests");
        }
    }
    for class in each(stack, "classes") {
        assert_shape(class, STACK_CLASS, "stack.classes");
        for part in each(class, "parts") {
            assert_shape(part, STACK_PART, "stack.classes.parts");
        }
    }
    for costly in each(stack, "costliest") {
        assert_shape(costly, STACK_COSTLY, "stack.costliest");
    }
    let code = each(stack, "code");
    assert_eq!(code.len(), 1);
    assert_shape(&code[0], UPSTREAM_CODE, "stack.code");
    assert_shape(&code[0]["code"], GROUP_CODE, "stack.code.code");
    assert_eq!(each(stack, "hops").len(), 3);
    for f in each(&doc, "findings") {
        assert_shape(f, FINDING, "finding");
    }
}

/// A phase per MiB says why it has no CPU per MiB: without the probes and a client of reqcost's
/// own, nothing counted the bytes.
#[test]
fn a_phase_without_units_says_why_in_its_unit() {
    let rec = crate::util::edited(|r| {
        let main = crate::util::main(r);
        main.server.kernel = None;
        main.requests = None;
        // As with --load: reqcost's own client received nothing either.
        main.client.bytes_received = 0;
    });
    let per_mib = reqcost_analysis::reading::Reading::of(&rec, Some(reqcost_record::Unit::MiB));
    let main = per_mib.analysis.main_phase().unwrap();
    assert_eq!(main.per_request.cpu_us, None);
    assert_eq!(
        main.cpu_missing(),
        "no MiB counted: the eBPF probes count them, and they were off"
    );
    assert_eq!(main.units_text(), "0.00 MiB");
    assert_eq!(main.units_per_s, None);
    let per_request = Analysis::of(&rec);
    assert_eq!(per_request.phases[0].units_text(), "100 requests");
}

/// The clean fixture (100 requests) driven by a `--load` command whose tree used `total_ns` of
/// CPU, the kernel's ticks (4 ms each) counting `user_ticks` in user mode and `system_ticks` in
/// the kernel, sampled as `profile` says.
fn loaded(
    total_ns: u64,
    user_ticks: u64,
    system_ticks: u64,
    profile: Option<Profile>,
) -> ClientCost {
    let rec = edited(|r| {
        r.workload.load = Some(ExternalLoad {
            command: "client".into(),
            cpu: Some(CpuTimes {
                total_ns,
                user_ns: user_ticks * 4_000_000,
                system_ns: system_ticks * 4_000_000,
                source: "cgroup cpuacct".into(),
                split: CpuSplit::Ticks,
            }),
            profile,
            ..Default::default()
        });
    });
    Analysis::of(&rec).client.expect("the client's cost")
}

/// A short client whose 2 ticks both fell in the kernel has no user/system split (it read
/// "user 0 µs" before); with 100 ticks the ticks split it.
#[test]
fn a_clients_split_needs_enough_ticks() {
    let short = loaded(9_000_000, 0, 2, None);
    assert_eq!(short.cpu_us, 90.0);
    assert_eq!((short.cpu_user_us, short.cpu_system_us), (None, None));
    assert_eq!(short.split, ClientSplit::Unknown { ticks: 2 });

    let long = loaded(400_000_000, 25, 75, None);
    assert_eq!(long.split, ClientSplit::Ticks { ticks: 100 });
    assert_eq!(
        (long.cpu_user_us, long.cpu_system_us),
        (Some(1000.0), Some(3000.0))
    );
    let json = serde_json::to_value(&short).unwrap();
    assert_eq!(
        json["split"],
        serde_json::json!({"from": "unknown", "ticks": 2})
    );
    assert!(json.get("cpu_user_us").is_none(), "{json}");
}

/// Too few ticks but a sampled client: its samples split it (30 samples, 9 in the kernel).
#[test]
fn a_short_sampled_clients_split_comes_from_its_samples() {
    let mut profile = fixture("profile-run.json").profile.unwrap();
    for s in &mut profile.stacks {
        s.count *= 3;
    }
    profile.samples *= 3;
    let client = loaded(9_000_000, 0, 2, Some(profile));
    assert_eq!(
        client.split,
        ClientSplit::Samples {
            ticks: 2,
            samples: 30
        }
    );
    approx(client.cpu_user_us.unwrap(), 90.0 * 0.7);
    approx(client.cpu_system_us.unwrap(), 90.0 * 0.3);
}
