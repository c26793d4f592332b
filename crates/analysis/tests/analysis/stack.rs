//! A stack's request events (nginx -> application -> PostgreSQL, pooled upstream connections,
//! upstream requests ending before and after their front request) -> the tally's figures per
//! front class by hop, each hop's own figures and links, and the record's invariants.

use reqcost_analysis::invariants;
use reqcost_analysis::requests::{RequestTally, StackStats, TallyCounters, TallyOptions};
use reqcost_record::{GroupCost, RequestStats, RunRecord};
use reqcost_testkit::stack::{self, *};

fn counters(hop: usize) -> TallyCounters {
    TallyCounters {
        attributed_ns: stack::attributed_ns()[hop],
        unattributed_ns: UNATTRIBUTED_US[hop] * 1000,
        dropped: 0,
    }
}

/// The front's settings when the probes follow its requests upstream.
fn following() -> TallyOptions {
    TallyOptions {
        follow_hops: true,
        ..TallyOptions::new("http", &[]).unwrap()
    }
}

pub fn tallied() -> StackStats {
    let mut tally = RequestTally::new(following());
    for ev in stack::events() {
        tally.add(&ev);
    }
    tally.finish_stack(counters(0), &[(1, counters(1)), (2, counters(2))])
}

pub fn record() -> RunRecord {
    let s = tallied();
    stack::record(s.front, s.hops)
}

fn class<'a>(r: &'a RequestStats, name: &str) -> &'a GroupCost {
    r.by_class
        .iter()
        .find(|g| g.name == name)
        .unwrap_or_else(|| panic!("no class {name}: {:#?}", r.by_class))
}

fn hop(s: &StackStats, hop: u8) -> &RequestStats {
    s.hops
        .iter()
        .find(|h| h.hop == hop)
        .and_then(|h| h.requests.as_ref())
        .unwrap_or_else(|| panic!("no hop {hop}"))
}

#[test]
fn each_front_class_gets_its_upstream_requests_by_hop_whichever_ends_first() {
    let s = tallied();
    let orders = class(&s.front, "GET /orders");
    assert_eq!(orders.requests, ORDERS);
    let parts: Vec<(u8, u64, u64)> = orders
        .by_hop
        .iter()
        .map(|h| (h.hop, h.requests, h.cpu_ns))
        .collect();
    let db_us: u64 = ORDERS_US.2.iter().sum();
    assert_eq!(
        parts,
        [
            (1, ORDERS, ORDERS * ORDERS_US.1 * 1000),
            (2, 3 * ORDERS, ORDERS * db_us * 1000)
        ]
    );
    // 90 µs + 1 400 µs + 410 µs a request.
    assert_eq!(orders.stack_cpu_ns, ORDERS * 1_900_000);
    let statements: Vec<(&str, u64)> = orders.by_hop[1]
        .classes
        .iter()
        .map(|c| (c.name.as_str(), c.requests))
        .collect();
    assert_eq!(
        statements,
        [
            ("SELECT orders", 4),
            ("SELECT items", 4),
            ("UPDATE stock", 4)
        ]
    );
    let export = class(&s.front, "GET /export");
    assert_eq!(export.cpu_ns, EXPORTS * EXPORT_US.0 * 1000);
    let parts: Vec<(u8, u64, u64)> = export
        .by_hop
        .iter()
        .map(|h| (h.hop, h.requests, h.cpu_ns))
        .collect();
    assert_eq!(
        parts,
        [
            (1, EXPORTS, EXPORTS * EXPORT_US.1 * 1000),
            (2, EXPORTS, EXPORTS * EXPORT_US.2 * 1000)
        ]
    );
}

#[test]
fn each_hop_keeps_its_own_requests_and_says_what_no_front_request_caused() {
    let s = tallied();
    let app = hop(&s, 1);
    // Its requests: the front's 6 and its own health check; nginx's calls are no requests.
    assert_eq!(app.requests, ORDERS + EXPORTS + 1);
    assert_eq!(
        (app.upstream_calls, app.upstream_call_cpu_ns),
        (1, APP_CALL_US * 1000)
    );
    let links = app.front_links.as_ref().unwrap();
    assert_eq!(
        (links.own_requests, links.own_cpu_ns),
        (1, APP_OWN_US * 1000)
    );
    assert_eq!((links.unlinked_requests, links.links_dropped), (0, 0));
    let db = hop(&s, 2);
    assert_eq!(db.requests, 3 * ORDERS + EXPORTS + 2);
    let links = db.front_links.as_ref().unwrap();
    assert_eq!(links.linked_requests, 3 * ORDERS + EXPORTS);
    assert_eq!(
        (links.own_requests, links.own_cpu_ns),
        (1, DB_OWN_US * 1000)
    );
    assert_eq!(
        (links.unlinked_requests, links.unlinked_cpu_ns),
        (1, DB_UNLINKED_US * 1000)
    );
    // The database's classes are its statements, not the front's paths.
    let names: Vec<&str> = db.by_class.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names[0], "SELECT orders", "{names:?}");
    // Its costliest query names the front request and class it served.
    let top = &db.costliest[0];
    assert_eq!(
        (top.request.as_str(), top.front_class.as_str()),
        ("SELECT orders", "GET /orders")
    );
    assert!(top.caused_by.starts_with("100/"), "{top:?}");
    // The front: nginx's call to the application is no request of its classes.
    assert_eq!(s.front.requests, ORDERS + EXPORTS);
    assert_eq!(s.front.no_request, 0);
    assert_eq!(s.front.upstream_calls, 1);
}

#[test]
fn the_costliest_front_requests_carry_their_hops() {
    let s = tallied();
    let top = &s.front.costliest[0];
    assert_eq!(top.class, "GET /export");
    let hops: Vec<(u8, u64, u64)> = top
        .hops
        .iter()
        .map(|h| (h.hop, h.requests, h.cpu_ns))
        .collect();
    assert_eq!(
        hops,
        [(1, 1, EXPORT_US.1 * 1000), (2, 1, EXPORT_US.2 * 1000)]
    );
    let orders = s
        .front
        .costliest
        .iter()
        .find(|c| c.class == "GET /orders")
        .unwrap();
    let db: u64 = ORDERS_US.2.iter().sum();
    let hops: Vec<(u8, u64, u64)> = orders
        .hops
        .iter()
        .map(|h| (h.hop, h.requests, h.cpu_ns))
        .collect();
    assert_eq!(hops, [(1, 1, ORDERS_US.1 * 1000), (2, 3, db * 1000)]);
}

#[test]
fn upstream_costs_waiting_for_a_front_request_are_bounded_and_counted() {
    use reqcost_analysis::requests::stack::PENDING_FRONT;
    let mut tally = RequestTally::new(TallyOptions::default());
    let mut db = stack::events().into_iter().find(|e| e.hop == 2).unwrap();
    let over = 10;
    for conn_id in 0..(PENDING_FRONT + over) as u64 {
        db.caused_by = Some(reqcost_record::RequestRef {
            pid: FRONT_PID,
            conn_id: 1000 + conn_id,
            seq: 0,
        });
        db.seq += 1;
        tally.add(&db);
    }
    let s = tally.finish_stack(TallyCounters::default(), &[]);
    let links = hop(&s, 2).front_links.clone().unwrap();
    assert_eq!(links.links_dropped, over as u64);
    assert_eq!(links.unlinked_requests, (PENDING_FRONT + over) as u64);
    assert_eq!(links.linked_requests, 0);
}

#[test]
fn a_stack_record_keeps_its_invariants() {
    let violations = invariants::check(&record());
    assert!(violations.is_empty(), "{violations:#?}");
}

/// The invariants each edit of a good stack record breaks.
fn broken(change: impl FnOnce(&mut RunRecord)) -> Vec<String> {
    let mut rec = record();
    change(&mut rec);
    invariants::check(&rec)
        .into_iter()
        .map(|v| format!("{}: {}", v.invariant, v.detail))
        .collect()
}

#[test]
fn each_stack_invariant_breaks_on_its_figure() {
    let hop_requests = |rec: &mut RunRecord, hop: usize| {
        rec.phases[0].hops[hop].requests.as_mut().unwrap().clone()
    };
    // A hop's CPU that its counters do not add up to.
    let v = broken(|rec| rec.phases[0].hops[1].cpu.as_mut().unwrap().total_ns += 10_000_000);
    assert!(
        v.len() == 1 && v[0].starts_with("cpu-total: hop 2: "),
        "{v:?}"
    );
    // A hop's events in none of linked, own, unlinked.
    let v = broken(|rec| {
        let mut r = hop_requests(rec, 0);
        r.front_links.as_mut().unwrap().own_cpu_ns += 1_000;
        rec.phases[0].hops[0].requests = Some(r);
    });
    assert!(
        v.len() == 1 && v[0].starts_with("hop-links: hop 1: linked"),
        "{v:?}"
    );
    // The front classes' parts at a hop beyond what was linked there, and beyond its
    // attributed CPU.
    let v = broken(|rec| {
        let r = rec.phases[0].requests.as_mut().unwrap();
        let orders = r
            .by_class
            .iter_mut()
            .find(|g| g.name == "GET /orders")
            .unwrap();
        orders.by_hop[1].cpu_ns += 10_000_000;
        orders.stack_cpu_ns += 10_000_000;
    });
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(
        v[0].starts_with("hop-links: hop 2: the front classes' parts"),
        "{v:?}"
    );
    assert!(v[1].contains("more than its attributed"), "{v:?}");
    // A class's stack figure that is not its parts' sum.
    let v = broken(|rec| {
        let r = rec.phases[0].requests.as_mut().unwrap();
        r.by_class[0].stack_cpu_ns += 1_000;
    });
    assert!(
        v.len() == 1 && v[0].starts_with("stack-sum: class "),
        "{v:?}"
    );
    // A hop without its links.
    let v = broken(|rec| {
        let mut r = hop_requests(rec, 1);
        r.front_links = None;
        rec.phases[0].hops[1].requests = Some(r);
    });
    assert!(
        v.len() == 1 && v[0].starts_with("hop-links: hop 2: no front_links"),
        "{v:?}"
    );
    // A hop's class shares, checked as the front's are.
    let v = broken(|rec| {
        let mut r = hop_requests(rec, 1);
        r.by_class[0].cpu_share_pct += 1.0;
        rec.phases[0].hops[1].requests = Some(r);
    });
    assert!(
        v.len() == 1 && v[0].starts_with("class-shares: hop 2: "),
        "{v:?}"
    );
}

#[test]
fn findings_name_the_tree_their_figures_are_from() {
    let mut rec = crate::util::fixture("busy-wait.json");
    let plain = reqcost_analysis::findings::diagnose(&rec);
    assert!(!plain.is_empty() && plain.iter().all(|f| f.server.is_empty()));
    let s = tallied();
    rec.hops = stack::hops();
    for p in &mut rec.phases {
        p.hops = s.hops.clone();
    }
    let findings = reqcost_analysis::findings::diagnose_stack(&rec);
    // The hops' CPU and requests alone are no evidence any rule fires on: every rule also
    // needs the probes' kernel figures (none here) or the profile, which is the front's.
    assert_eq!(findings.len(), plain.len());
    let server = format!("{} (hop 0)", rec.target.comm);
    assert!(findings.iter().all(|f| f.server == server), "{findings:#?}");
}

/// What the probes count of the PostgreSQL hop's tree: a backend forked and exited for each of
/// `backends` connections, with the calls and page faults that start one.
fn database_tree(backends: u64) -> reqcost_record::KernelStats {
    use reqcost_record::{KernelStats, MemoryStats, SyscallStat, TreeStats};
    let call = |name: &str, count: u64, time_ns: u64| SyscallStat {
        name: name.into(),
        count,
        time_ns,
        ..SyscallStat::default()
    };
    KernelStats {
        syscalls: vec![
            call("recvfrom", 40, 400_000),
            call("sendto", 40, 600_000),
            call("clone", backends, backends * 150_000),
            call("mmap", backends * 5, backends * 20_000),
        ],
        tree: TreeStats {
            processes_forked: backends,
            threads_created: 0,
            processes_exited: backends,
        },
        memory: MemoryStats {
            page_faults_user: backends * 600,
            ..MemoryStats::default()
        },
        ..KernelStats::default()
    }
}

/// A hop's own kernel figures are evidence for the catalog on that hop: a backend forked per
/// application request is found on the postgres hop, named so, and on no other tree; the
/// same hop with a standing pool (no backend forked in the phase) has no such finding.
#[test]
fn a_backend_per_request_is_found_on_the_hop_it_occurs_in() {
    let s = tallied();
    let findings = |backends: u64| {
        let mut rec = stack::record(s.front.clone(), s.hops.clone());
        rec.hops = stack::hops();
        for h in rec.phases.iter_mut().flat_map(|p| p.hops.iter_mut()) {
            if h.hop == 2 {
                h.kernel = Some(database_tree(backends));
            }
        }
        reqcost_analysis::findings::diagnose_stack(&rec)
    };
    let database = hop(&s, 2);
    let per_request = findings(database.requests);
    let carried: Vec<&str> = per_request
        .iter()
        .filter(|f| f.id == "process-per-request")
        .map(|f| f.server.as_str())
        .collect();
    assert_eq!(carried, ["postgres (hop 2)"], "{per_request:#?}");
    let pooled = findings(0);
    assert!(
        pooled.iter().all(|f| f.id != "process-per-request"),
        "{pooled:#?}"
    );
}

#[test]
fn only_the_fronts_requests_count_as_requests_for_the_live_figures() {
    use reqcost_analysis::requests::counts_as_request;
    let mut tally = RequestTally::new(following());
    let counted = stack::events()
        .iter()
        .filter(|ev| {
            let class = tally.add(ev).to_string();
            counts_as_request(ev, &class)
        })
        .count() as u64;
    assert_eq!(counted, ORDERS + EXPORTS);
}

#[test]
fn compare_shows_each_hop_both_sides_followed() {
    use reqcost_analysis::compare::compare;
    use reqcost_analysis::stats::Verdict;
    let a = record();
    let mut b = record();
    b.phases[0].hops[1].cpu.as_mut().unwrap().total_ns *= 2;
    let c = compare(std::slice::from_ref(&a), &[b]);
    let hops: Vec<(u8, &str)> = c.phases[0]
        .hops
        .iter()
        .map(|h| (h.hop, h.name.as_str()))
        .collect();
    assert_eq!(hops, [(1, "gunicorn"), (2, "postgres")]);
    let metric = |hop: usize, name: &str| {
        c.phases[0].hops[hop]
            .metrics
            .iter()
            .find(|m| m.metric == name)
            .unwrap_or_else(|| panic!("no {name}"))
            .clone()
    };
    let db_cpu = metric(1, "CPU");
    assert_eq!(db_cpu.a.mean * 2.0, db_cpu.b.mean);
    let db_requests = metric(1, "requests");
    // 16 queries over the front's 6 requests, on both sides.
    assert_eq!(
        (db_requests.a.mean, db_requests.verdict),
        (16.0 / 6.0, Verdict::Identical)
    );
    let app_cpu = metric(0, "CPU");
    assert_eq!(app_cpu.a.mean, app_cpu.b.mean);
    // A side that followed no hop compares none.
    let mut plain = a.clone();
    plain.hops.clear();
    plain.phases[0].hops.clear();
    assert!(compare(&[a], &[plain]).phases[0].hops.is_empty());
}

#[test]
fn a_stack_scaled_from_probed_windows_keeps_its_invariants() {
    let s = tallied();
    let (count, cpu) = (3.3, 2.7);
    let hops = s
        .hops
        .into_iter()
        .map(|h| reqcost_record::HopPhase {
            requests: h.requests.map(|r| r.scaled(count, cpu)),
            ..h
        })
        .collect();
    let rec = stack::record(s.front.scaled(count, cpu), hops);
    let violations = invariants::check(&rec);
    assert!(violations.is_empty(), "{violations:#?}");
    let db = rec.phases[0].hops[1].requests.as_ref().unwrap();
    let links = db.front_links.as_ref().unwrap();
    assert_eq!(
        links.own_cpu_ns,
        (DB_OWN_US as f64 * 1000.0 * cpu).round() as u64
    );
}

/// A phase whose trees' CPU came from elsewhere than their probed counts (an unprobed pass,
/// unprobed windows): the front's CPU 0.8 of what it attributed, the application's 0.6, the
/// database's 1.3. Each tree keeps its shares of its own CPU, and the front's parts at each hop
/// take that hop's factor: the class's parts stay each hop's linked CPU, and the stack's sums
/// hold. Scaled by the front's factor alone (as before), the parts were 0.8 of the linked.
#[test]
fn a_stack_whose_trees_cpu_was_measured_apart_keeps_each_trees_shares() {
    let mut rec = record();
    let factors = [0.8, 0.6, 1.3];
    let main = &mut rec.phases[0];
    let front = main.requests.as_ref().unwrap();
    let front_cpu = (front.attributed_cpu_ns + front.unattributed_cpu_ns) as f64 * factors[0];
    main.server.cpu = Some(stack::cpu(front_cpu.round() as u64));
    for h in &mut main.hops {
        let r = h.requests.as_ref().unwrap();
        let tree = (r.attributed_cpu_ns + r.unattributed_cpu_ns) as f64 * factors[h.hop as usize];
        h.cpu = Some(stack::cpu(tree.round() as u64));
    }
    main.per_request = reqcost_record::PerRequest::from_totals(&main.server, main.units());
    let before = main.requests.clone().unwrap();
    main.scale_requests_to_cpu(1.0);
    let violations = invariants::check(&rec);
    assert!(violations.is_empty(), "{violations:#?}");
    let main = &rec.phases[0];
    let orders = class(main.requests.as_ref().unwrap(), "GET /orders");
    let was = class(&before, "GET /orders");
    for (part, old) in orders.by_hop.iter().zip(&was.by_hop) {
        let f = factors[part.hop as usize];
        assert!(
            part.cpu_ns.abs_diff((old.cpu_ns as f64 * f).round() as u64) <= 1,
            "hop {}: {} ns from {} ns",
            part.hop,
            part.cpu_ns,
            old.cpu_ns
        );
    }
    let hop_parts: u64 = orders.by_hop.iter().map(|h| h.cpu_ns).sum();
    assert_eq!(orders.stack_cpu_ns, orders.cpu_ns + hop_parts);
}

#[test]
fn a_front_request_forgotten_by_the_join_leaves_its_late_upstream_work_unlinked() {
    use reqcost_analysis::requests::stack::RECENT_FRONT;
    let events = stack::events();
    let first = events.iter().find(|e| e.hop == 0).unwrap().clone();
    let late = events
        .iter()
        .find(|e| e.hop == 2 && e.caused_by == Some(first.reference()))
        .unwrap()
        .clone();
    let mut tally = RequestTally::new(following());
    tally.add(&first);
    let mut other = first.clone();
    for conn_id in 0..RECENT_FRONT as u64 {
        other.conn_id = 10_000 + conn_id;
        tally.add(&other);
    }
    tally.add(&late);
    let s = tally.finish_stack(TallyCounters::default(), &[]);
    let links = hop(&s, 2).front_links.clone().unwrap();
    assert_eq!((links.linked_requests, links.unlinked_requests), (0, 1));
    assert!(s.front.by_class.iter().all(|g| g.by_hop.is_empty()));
}

#[test]
fn a_request_dear_in_the_database_leads_the_costliest_across_the_stack() {
    let events = stack::events();
    let export = events
        .iter()
        .find(|e| e.hop == 0 && e.head.starts_with(b"GET /export"))
        .unwrap()
        .clone();
    let orders = events
        .iter()
        .find(|e| e.hop == 0 && e.head.starts_with(b"GET /orders"))
        .unwrap()
        .clone();
    // A slow query for the orders request, ending after it; the export request costs the
    // front more.
    let slow = reqcost_record::RequestEvent {
        cpu_ns: 9_000_000,
        caused_by: Some(orders.reference()),
        ..events.iter().find(|e| e.hop == 2).unwrap().clone()
    };
    let mut tally = RequestTally::new(TallyOptions {
        costliest: 1,
        ..following()
    });
    for ev in [&orders, &export, &slow] {
        tally.add(ev);
    }
    let s = tally.finish_stack(TallyCounters::default(), &[]);
    assert_eq!(s.front.costliest[0].class, "GET /export");
    let dearest = &s.front.stack_costliest;
    assert_eq!(dearest.len(), 1);
    assert_eq!(
        (
            dearest[0].class.as_str(),
            dearest[0].id.clone(),
            dearest[0].stack_cpu_ns
        ),
        ("GET /orders", orders.id(), orders.cpu_ns + 9_000_000)
    );
    assert_eq!(dearest[0].client, "10.0.0.1");
}

#[test]
fn the_costliest_across_the_stack_break_stack_sum_out_of_order() {
    let v = broken(|rec| {
        let r = rec.phases[0].requests.as_mut().unwrap();
        r.stack_costliest.swap(0, 5);
    });
    assert!(
        v.len() == 1 && v[0].starts_with("stack-sum: the costliest across the stack not by"),
        "{v:?}"
    );
    let v = broken(|rec| {
        let r = rec.phases[0].requests.as_mut().unwrap();
        r.stack_costliest[0].stack_cpu_ns += 1_000;
    });
    assert!(
        v.len() == 1 && v[0].starts_with("stack-sum: request "),
        "{v:?}"
    );
}

#[test]
fn without_follow_hops_the_join_starts_at_the_first_upstream_event() {
    let events = stack::events();
    let caused = |e: &reqcost_record::RequestEvent, front: &reqcost_record::RequestEvent| {
        e.caused_by == Some(front.reference())
    };
    // From the first front request whose upstream requests all end after it.
    let at = (0..events.len())
        .find(|&i| {
            let front = &events[i];
            front.hop == 0
                && !events[..i].iter().any(|e| caused(e, front))
                && events[i + 1..].iter().any(|e| caused(e, front))
        })
        .unwrap();
    let phase = &events[at..];
    let late = phase.iter().filter(|e| caused(e, &events[at])).count() as u64;
    // Upstream requests of front requests outside the slice, the fixture's unlinked query
    // among them: unlinked either way.
    let orphans = phase
        .iter()
        .filter(|e| e.caused_by.is_some())
        .filter(|e| !phase.iter().any(|f| f.hop == 0 && caused(e, f)))
        .count() as u64;
    let unlinked = |follow_hops: bool| -> u64 {
        let mut tally = RequestTally::new(TallyOptions {
            follow_hops,
            ..TallyOptions::new("http", &[]).unwrap()
        });
        for ev in phase {
            tally.add(ev);
        }
        let s = tally.finish_stack(TallyCounters::default(), &[]);
        s.hops
            .iter()
            .filter_map(|h| h.requests.as_ref()?.front_links.as_ref())
            .map(|l| l.unlinked_requests)
            .sum()
    };
    assert!(late > 0 && orphans > 0);
    assert_eq!(unlinked(true), orphans);
    assert_eq!(unlinked(false), orphans + late);
}

#[test]
fn an_upstream_requests_samples_are_its_own_chains_under_its_front_class() {
    let mut rec = record();
    let db = rec.phases[0].hops[1].requests.clone().unwrap();
    let top = &db.costliest[0];
    rec.profile = Some(stack::profile(&top.id));
    let doc = reqcost_analysis::document::Analysis::of(&rec);
    let code = &doc.phases[0].stack.as_ref().unwrap().code;
    assert_eq!(code.len(), 1, "{code:#?}");
    let c = &code[0];
    assert_eq!(
        (
            c.hop,
            c.name.as_str(),
            c.class.as_str(),
            c.front_class.as_str()
        ),
        (2, "postgres", "SELECT orders", "GET /orders")
    );
    assert_eq!(
        (c.caused_by.as_str(), c.code.samples),
        (top.caused_by.as_str(), 9)
    );
    assert_eq!(c.code.by_self[0].function, "ExecSeqScan");
    assert_eq!(
        c.code.by_self[0].callers,
        ["exec_simple_query", "PostgresMain"]
    );
}

#[test]
fn a_front_class_is_named_with_its_dearest_hops_own_code_apart_from_the_fronts() {
    let mut rec = record();
    let db = rec.phases[0].hops[1].requests.clone().unwrap();
    rec.profile = Some(stack::profile(&db.costliest[0].id));
    let doc = reqcost_analysis::document::Analysis::of(&rec);
    let classes = &doc.phases[0].stack.as_ref().unwrap().classes;
    let class = |name: &str| classes.iter().find(|c| c.class == name).unwrap();
    let orders = class("GET /orders");
    assert_eq!(orders.dearest_hop, 1);
    let code = orders
        .dearest_code
        .as_ref()
        .expect("the application's code");
    assert_eq!(
        (code.name.as_str(), code.samples),
        ("GET /orders", 4),
        "{code:#?}"
    );
    assert_eq!(code.by_self[0].function, "render_orders");
    assert_eq!(code.by_self[0].callers, ["handle_request"]);
    // Dearest in the front: its code is the front's, shown with the front's classes.
    assert_eq!(class("GET /export").dearest_code, None);
    // The front's code for the class is the front's samples only, whatever the hops ran.
    let front =
        reqcost_analysis::hot_code::class(rec.profile.as_ref().unwrap(), "GET /orders").unwrap();
    assert_eq!(front.samples, 3);
    assert_eq!(front.by_self[0].function, "ngx_http_proxy_handler");
}

/// The front's tally tells whether an upstream request may be among its own hop's costliest
/// (whose samples keep its id), not the front's: a dear query may, one cheaper than the hop's
/// whole list may not.
#[test]
fn an_upstream_request_may_be_among_its_hops_costliest() {
    let mut tally = RequestTally::new(following());
    let events = stack::events();
    let query = events.iter().find(|e| e.hop == 2).unwrap().clone();
    assert!(tally.may_be_costliest(&query), "no list of the hop's yet");
    for ev in &events {
        tally.add(ev);
    }
    let with_cpu = |cpu_ns| reqcost_record::RequestEvent {
        cpu_ns,
        ..query.clone()
    };
    assert!(tally.may_be_costliest(&with_cpu(10_000_000)));
    assert!(!tally.may_be_costliest(&with_cpu(0)));
}

/// An application that connects per request: PostgreSQL's startup on the new connection is
/// charged to the front request it was opened for, its CPU with the query's, but it is no
/// request there, as at its hop: one query per front request, not two.
#[test]
fn a_connection_set_up_upstream_is_charged_but_no_request() {
    let events = stack::events();
    let front = events.iter().find(|e| e.hop == 0).unwrap().clone();
    let query = events
        .iter()
        .find(|e| e.hop == 2 && e.caused_by == Some(front.reference()))
        .unwrap();
    let params = b"user\0postgres\0database\0postgres\0\0";
    let len = (8 + params.len()) as u32;
    let startup = [&len.to_be_bytes()[..], &196_608u32.to_be_bytes(), params].concat();
    let (conn_id, setup_ns) = (77, 40_000);
    let setup = reqcost_record::RequestEvent {
        conn_id,
        seq: 0,
        bytes_in: startup.len() as u64,
        head: startup,
        cpu_ns: setup_ns,
        ..query.clone()
    };
    let query = reqcost_record::RequestEvent {
        conn_id,
        seq: 1,
        closed: true,
        ..query.clone()
    };
    let mut tally = RequestTally::new(following());
    for ev in [&front, &setup, &query] {
        tally.add(ev);
    }
    let s = tally.finish_stack(TallyCounters::default(), &[]);
    let db = hop(&s, 2);
    assert_eq!((db.requests, db.setup_turns), (1, 1));
    let links = db.front_links.as_ref().unwrap();
    assert_eq!(
        (links.linked_requests, links.linked_cpu_ns),
        (1, setup_ns + query.cpu_ns)
    );
    let parts: Vec<(u8, u64, u64)> = s.front.by_class[0]
        .by_hop
        .iter()
        .map(|h| (h.hop, h.requests, h.cpu_ns))
        .collect();
    assert_eq!(parts, [(2, 1, setup_ns + query.cpu_ns)]);
}
