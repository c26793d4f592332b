//! The record invariants (`reqcost_analysis::invariants`): they hold on a real busy-wait
//! record, and a record broken on purpose fails each one, by name.

use reqcost_analysis::invariants::{check, Violation};
use reqcost_record::{GroupCost, RequestStats, RunRecord};

use crate::util::{fixture, main};

/// The busy-wait fixture (a real record), its main phase's CPU set to what the probes counted.
/// Taken before the probes charged steal time apart, that phase's probes and cgroup differ
/// by 19 % (see `an_old_records_cpu_gap_is_a_violation`).
fn holding() -> RunRecord {
    let mut rec = fixture("busy-wait.json");
    let r = requests(&mut rec);
    let sum = r.attributed_cpu_ns + r.unattributed_cpu_ns;
    main(&mut rec).server.cpu.as_mut().unwrap().total_ns = sum;
    let p = main(&mut rec);
    p.per_request = reqcost_record::PerRequest::from_totals(&p.server, p.units());
    rec
}

fn requests(rec: &mut RunRecord) -> &mut RequestStats {
    main(rec).requests.as_mut().unwrap()
}

fn broken(change: impl FnOnce(&mut RunRecord)) -> Vec<Violation> {
    let mut rec = holding();
    change(&mut rec);
    check(&rec)
}

/// The invariants a list of violations names, once each.
fn named(violations: &[Violation]) -> Vec<&'static str> {
    let mut names: Vec<_> = violations.iter().map(|v| v.invariant).collect();
    names.dedup();
    names
}

#[test]
fn a_real_record_holds_them() {
    assert_eq!(check(&holding()), []);
    assert_eq!(check(&fixture("clean.json")), []);
}

#[test]
fn an_old_records_cpu_gap_is_a_violation() {
    let v = check(&fixture("busy-wait.json"));
    assert_eq!(named(&v), ["cpu-total"]);
    assert_eq!(
        v[0].to_string(),
        "phase main: cpu-total: attributed 15314946 + unattributed 6824060 = 22139006 ns, the \
         phase's CPU 27466240 ns (5327234 ns apart, 2000000 allowed)"
    );
}

#[test]
fn attributed_and_unattributed_must_make_the_cpu() {
    let more_cpu = |ns: u64| {
        move |rec: &mut RunRecord| {
            let p = main(rec);
            p.server.cpu.as_mut().unwrap().total_ns += ns;
            p.per_request = reqcost_record::PerRequest::from_totals(&p.server, p.units());
        }
    };
    assert_eq!(named(&broken(more_cpu(3_000_000))), ["cpu-total"]);
    // Within the tolerance: 2 ms on this 22 ms phase.
    assert_eq!(broken(more_cpu(1_900_000)), []);
}

/// What the probes charged while the server's CPU was read is allowed beside the tolerance,
/// and no more.
#[test]
fn the_cpu_charged_while_the_servers_cpu_was_read_is_allowed() {
    let skewed = |gap: u64, skew: u64| {
        move |rec: &mut RunRecord| {
            requests(rec).cpu_reading_skew_ns = skew;
            let p = main(rec);
            p.server.cpu.as_mut().unwrap().total_ns += gap;
            p.per_request = reqcost_record::PerRequest::from_totals(&p.server, p.units());
        }
    };
    assert_eq!(broken(skewed(5_000_000, 3_100_000)), []);
    assert_eq!(named(&broken(skewed(5_000_000, 2_900_000))), ["cpu-total"]);
}

/// CPU held before the phase and charged in it (a Redis timer's turns between the warm-up and
/// main, claimed by main's first request) is in attributed + unattributed but not in the
/// phase's CPU: taken off, and no more.
#[test]
fn the_cpu_held_before_the_phase_is_taken_off() {
    let held = |before: u64| {
        move |rec: &mut RunRecord| {
            requests(rec).held_before_cpu_ns = before;
            let p = main(rec);
            p.server.cpu.as_mut().unwrap().total_ns -= 3_400_000;
            p.per_request = reqcost_record::PerRequest::from_totals(&p.server, p.units());
        }
    };
    assert_eq!(broken(held(3_400_000)), []);
    assert_eq!(named(&broken(held(0))), ["cpu-total"]);
    let v = broken(held(7_000_000));
    assert_eq!(
        v[0].to_string(),
        "phase main: cpu-total: attributed 15314946 + unattributed 6824060 - held before the \
         phase 7000000 = 15139006 ns, the phase's CPU 18739006 ns (3600000 ns apart, 2000000 \
         allowed)"
    );
}

#[test]
fn a_class_share_not_of_the_phases_cpu_is_a_violation() {
    // The finding: a class given its share of the classes' sum, not of the phase.
    let v = broken(|rec| requests(rec).by_class[0].cpu_share_pct = 97.0);
    assert_eq!(named(&v), ["class-shares"]);
    // Classes whose CPU does not add up to the requests tallied.
    let v = broken(|rec| {
        requests(rec).by_class.push(GroupCost {
            name: "/ghost".into(),
            ..GroupCost::default()
        });
        requests(rec).by_class[1].cpu_ns = 1_000_000;
        let total = 22_139_006.0;
        requests(rec).by_class[1].cpu_share_pct = 1_000_000.0 * 100.0 / total;
    });
    assert_eq!(named(&v), ["class-shares"]);
}

#[test]
fn a_share_over_100_is_a_violation() {
    let v = broken(|rec| {
        let r = requests(rec);
        r.by_client[0].cpu_ns = 2 * (r.attributed_cpu_ns + r.unattributed_cpu_ns);
        r.by_client[0].cpu_share_pct = 200.0;
    });
    assert_eq!(named(&v), ["share-over-100"]);
}

#[test]
fn a_costliest_list_without_the_top_request_is_a_violation() {
    // Out of order.
    let v = broken(|rec| requests(rec).costliest.swap(0, 1));
    assert_eq!(named(&v), ["costliest"]);
    // The class's costliest request left out (the "left out 6 costly requests").
    let v = broken(|rec| {
        requests(rec).costliest.remove(0);
    });
    assert_eq!(named(&v), ["costliest"]);
}

#[test]
fn top_syscalls_that_miss_the_largest_are_a_violation() {
    // The request: 843 954 syscalls listed as epoll_ctl 421936, sendto 51, newfstatat
    // 8; the ioctl, about 421 900, in no slot.
    let v = broken(|rec| {
        let c = &mut requests(rec).costliest[0];
        c.syscalls = 843_954;
        c.top_syscalls = vec![
            ("epoll_ctl".into(), 421_936),
            ("sendto".into(), 51),
            ("newfstatat".into(), 8),
        ];
    });
    assert_eq!(named(&v), ["top-syscalls"]);
    let v = broken(|rec| requests(rec).costliest[0].top_syscalls.reverse());
    assert_eq!(named(&v), ["top-syscalls"]);
}

#[test]
fn top_syscalls_bounded_by_the_probes_prove_themselves_with_many_left_out() {
    // 20 syscalls of 10 calls each beside ioctl and epoll_ctl: 40 calls left out, more than
    // the third listed, but none of them made more than 10 times.
    let listed = |rec: &mut RunRecord, max| {
        let c = &mut requests(rec).costliest[0];
        c.syscalls = 1000 + 500 + 14 * 10 + 40;
        c.top_syscalls = vec![("ioctl".into(), 1000), ("epoll_ctl".into(), 500)];
        c.top_syscalls
            .extend((0..14).map(|i| (format!("call{i}"), 10)));
        c.unlisted_max = Some(max);
    };
    assert_eq!(named(&broken(|rec| listed(rec, 10))), Vec::<&str>::new());
    // One left out made more often than a listed one.
    assert_eq!(named(&broken(|rec| listed(rec, 11))), ["top-syscalls"]);
    // A bound over what was left out at all.
    let v = broken(|rec| {
        listed(rec, 10);
        requests(rec).costliest[0].syscalls = 1000 + 500 + 14 * 10 + 5;
    });
    assert_eq!(named(&v), ["top-syscalls"]);
}

#[test]
fn a_per_request_figure_over_another_count_is_a_violation() {
    // CPU per request divided by another count than the phase's requests.
    let v = broken(|rec| {
        let p = main(rec);
        let per = p.per_request.cpu_total_us.unwrap();
        p.per_request.cpu_total_us = Some(per * 3000.0 / 2998.0);
    });
    assert_eq!(named(&v), ["per-unit-count"]);
}
