//! The catalog as the registry declares it: docs/findings.md's rule sections are generated from
//! `RULES` and each rule's module docs, and every rule has its table test here.

use std::path::{Path, PathBuf};

use reqcost_analysis::findings::{CarriedBy, Needs, Rule, RULES};

const BEGIN: &str = "<!-- catalog: generated from RULES, do not edit by hand -->\n";
const END: &str = "<!-- end of catalog -->\n";

fn crate_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The rule's file name without `.rs`, in src/findings/ and in this folder alike.
fn module(rule: &Rule) -> String {
    rule.id.replace('-', "_")
}

/// The rule's module docs (`//!` lines), as markdown.
fn docs(rule: &Rule) -> String {
    let path = crate_dir()
        .join("src/findings")
        .join(module(rule))
        .with_extension("rs");
    let source = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: a rule is declared in its own file",
            path.display()
        )
    });
    let lines: Vec<&str> = source
        .lines()
        .map_while(|l| l.strip_prefix("//!"))
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .collect();
    assert!(!lines.is_empty(), "{}: no module docs", path.display());
    lines.join("\n")
}

fn needs(rule: &Rule) -> String {
    let names: Vec<&str> = rule
        .needs
        .iter()
        .map(|n| match n {
            Needs::Kernel => "eBPF figures",
            Needs::Profile => "call chains",
            Needs::Requests => "requests counted",
        })
        .collect();
    names.join(", ")
}

fn carried_by(rule: &Rule) -> &'static str {
    match rule.carried_by {
        CarriedBy::SlowClients => "slow clients",
        CarriedBy::CpuClasses => "classes by CPU",
        CarriedBy::SyscallClasses => "classes by syscalls",
    }
}

/// The generated part of docs/findings.md: a table of the rules, then each rule's section.
fn catalog() -> String {
    let mut out = String::from("| rule | seed | needs | carried by |\n|---|---|---|---|\n");
    for rule in RULES {
        out += &format!(
            "| {} | {} | {} | {} |\n",
            rule.id,
            rule.seed.unwrap_or("—"),
            needs(rule),
            carried_by(rule)
        );
    }
    for rule in RULES {
        let heading = match rule.seed {
            Some(seed) => format!("{} — {seed}", rule.id),
            None => rule.id.to_string(),
        };
        out += &format!("\n### {heading}\n\n{}\n", docs(rule));
    }
    out
}

#[test]
fn docs_findings_md_lists_the_registry() {
    let path: PathBuf = crate_dir().join("../../docs/findings.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text
        .find(BEGIN)
        .expect("docs/findings.md: catalog start marker")
        + BEGIN.len();
    let end = start
        + text[start..]
            .find(END)
            .expect("docs/findings.md: catalog end marker");
    let wanted = catalog();
    if std::env::var_os("REQCOST_BLESS").is_some() {
        std::fs::write(&path, format!("{}{wanted}{}", &text[..start], &text[end..])).unwrap();
        return;
    }
    assert!(
        text[start..end] == wanted,
        "docs/findings.md's catalog differs from the registry: regenerate it with \
         REQCOST_BLESS=1 cargo test -p reqcost-analysis --test analysis findings::catalog"
    );
}

#[test]
fn every_rule_has_an_id_of_its_own_and_a_table_test() {
    let tests = crate_dir().join("tests/analysis/findings");
    let declared = std::fs::read_to_string(tests.join("mod.rs")).unwrap();
    for (i, rule) in RULES.iter().enumerate() {
        assert!(
            RULES[..i].iter().all(|r| r.id != rule.id),
            "{} is listed twice",
            rule.id
        );
        let name = module(rule);
        assert!(
            tests.join(format!("{name}.rs")).exists() && declared.contains(&format!("mod {name};")),
            "{}: its table test belongs in tests/analysis/findings/{name}.rs",
            rule.id
        );
    }
}
