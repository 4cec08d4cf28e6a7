//! The crate's layout rules, checked on the source text (what `lib.rs` states):
//!
//! 1. Stages run `probe → measure → store → present → experiments`; a file in one
//!    stage folder never names a later stage (`crate::<later>`), outside its
//!    `#[cfg(test)]` module.
//! 2. `roofline.rs` names only `crate::probe::model`, `crate::probe::gguf` (tensor
//!    types) and `crate::units`; `units.rs` and `util.rs` name no other module.
//! 3. SQL runs only in store modules: `sqlx` appears only under `store/` or in a
//!    slice's own `store.rs`.
//! 4. The CLI's `cmd/*` and the app's `src-tauri/src` hold no SQL, no engine or
//!    instrument calls and no orchestration (guards, run records): they call jobs
//!    (`memwall_core::experiments::…`) and print or serialize what comes back.
//! 5. `lib.rs` declares exactly the modules its map names, and every folder under
//!    `src/` is one of them.
//!
//! Each rule is also run on a planted violation, so a rule that cannot fail fails.

use std::path::{Path, PathBuf};

const STAGES: [&str; 5] = ["probe", "measure", "store", "present", "experiments"];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The text before the file's `#[cfg(test)]` module (tests may reach anything),
/// without `//` comments (doc links name modules without importing them).
fn code_of(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("#[cfg(test)]") {
            break;
        }
        let code = match line.find("//") {
            Some(i) => &line[..i],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// Every `crate::a::b` path in `code` as (`a`, `b`); `use crate::{a, b::c}` groups
/// are expanded to their first segments.
fn crate_paths(code: &str) -> Vec<(String, String)> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue; // `memwall_crate::` or `$crate::`-like: not this crate's root
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let item = item.trim();
                let first = ident(item);
                let second = item
                    .strip_prefix(&first)
                    .and_then(|r| r.strip_prefix("::"))
                    .map(ident)
                    .unwrap_or_default();
                if !first.is_empty() {
                    out.push((first, second));
                }
            }
            continue;
        }
        let first = ident(rest);
        let second = rest[first.len()..]
            .strip_prefix("::")
            .map(ident)
            .unwrap_or_default();
        out.push((first, second));
    }
    out
}

fn stage_of(rel: &Path) -> Option<usize> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    STAGES.iter().position(|s| *s == first)
}

/// Rule 1 and 2 on one file: the violations, as lines.
fn import_violations(rel: &Path, text: &str) -> Vec<String> {
    let code = code_of(text);
    let paths = crate_paths(&code);
    let name = rel.to_string_lossy().replace('\\', "/");
    let mut bad = Vec::new();
    if let Some(stage) = stage_of(rel) {
        for (a, _) in &paths {
            if let Some(target) = STAGES.iter().position(|s| s == a)
                && target > stage
            {
                bad.push(format!(
                    "{name}: stage `{}` names later stage `crate::{a}`",
                    STAGES[stage]
                ));
            }
            if matches!(a.as_str(), "testing" | "fuzz") {
                bad.push(format!(
                    "{name}: names test support `crate::{a}` outside tests"
                ));
            }
        }
    }
    match name.as_str() {
        "roofline.rs" => {
            for (a, b) in &paths {
                let ok = a == "units" || (a == "probe" && (b == "model" || b == "gguf"));
                if !ok {
                    bad.push(format!(
                        "roofline.rs: names `crate::{a}::{b}` (only model facts and units)"
                    ));
                }
            }
        }
        "units.rs" | "util.rs" => {
            for (a, _) in &paths {
                if a != "units" && a != "util" {
                    bad.push(format!("{name}: a leaf names `crate::{a}`"));
                }
            }
        }
        _ => {}
    }
    bad
}

/// Rule 3 on one file.
fn sql_violation(rel: &Path, text: &str) -> Option<String> {
    let name = rel.to_string_lossy().replace('\\', "/");
    let in_store = name.starts_with("store/") || name.ends_with("/store.rs");
    (!in_store && code_of(text).contains("sqlx"))
        .then(|| format!("{name}: runs SQL (`sqlx`) outside a store module"))
}

/// Rule 4 on one adapter file (CLI command or app module).
fn adapter_violations(name: &str, text: &str) -> Vec<String> {
    // SQL, engines and instruments belong to core; so does orchestration: opening a
    // guard, building or inserting a run. Instruments are matched however they are
    // imported (`stream::run(` after `use …::measure::stream`).
    const FORBIDDEN: [&str; 11] = [
        "sqlx",
        "measure::engine",
        "LlamaModelHandle",
        "rusqlite",
        "stream::run(",
        "peak::measure",
        "Guard::begin",
        "NewRun {",
        "insert_run",
        "insert_stream_run",
        "store_kv_run",
    ];
    let code = code_of(text);
    FORBIDDEN
        .iter()
        .filter(|f| code.contains(**f))
        .map(|f| format!("{name}: an adapter reaches past the jobs (`{f}`)"))
        .collect()
}

#[test]
fn stages_never_import_a_later_stage_and_roofline_stays_pure() {
    let root = src();
    let mut bad = Vec::new();
    let files = rs_files(&root);
    assert!(
        files.len() > 50,
        "found only {} files under {}",
        files.len(),
        root.display()
    );
    for f in &files {
        let rel = f.strip_prefix(&root).unwrap();
        let text = std::fs::read_to_string(f).unwrap();
        bad.extend(import_violations(rel, &text));
        bad.extend(sql_violation(rel, &text));
    }
    assert!(bad.is_empty(), "layout rules broken:\n{}", bad.join("\n"));
}

#[test]
fn cli_commands_and_app_commands_are_adapters() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut bad = Vec::new();
    let mut n = 0;
    for dir in ["crates/memwall-cli/src", "src-tauri/src"] {
        for f in rs_files(&repo.join(dir)) {
            n += 1;
            let text = std::fs::read_to_string(&f).unwrap();
            bad.extend(adapter_violations(&f.display().to_string(), &text));
        }
    }
    assert!(n > 10, "found only {n} adapter files");
    assert!(
        bad.is_empty(),
        "adapters reach past the jobs:\n{}",
        bad.join("\n")
    );
}

#[test]
fn lib_rs_declares_exactly_the_mapped_modules() {
    let root = src();
    let lib = std::fs::read_to_string(root.join("lib.rs")).unwrap();
    let declared: Vec<String> = lib
        .lines()
        .filter_map(|l| l.strip_prefix("pub mod "))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect();
    let mapped = [
        "units",
        "util",
        "roofline",
        "probe",
        "measure",
        "store",
        "present",
        "experiments",
        "fuzz",
        "testing",
    ];
    let mut d = declared.clone();
    d.sort();
    let mut m: Vec<String> = mapped.iter().map(|s| s.to_string()).collect();
    m.sort();
    assert_eq!(d, m, "lib.rs declares other modules than its map");
    // The map names each stage in flow order.
    let map_line = lib
        .lines()
        .find(|l| l.contains("probe ─→ measure"))
        .expect("lib.rs has the flow line");
    let order: Vec<usize> = STAGES.iter().map(|s| map_line.find(s).expect(s)).collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "flow line out of order: {map_line}"
    );
    for e in std::fs::read_dir(&root).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            assert!(
                STAGES.contains(&n.as_str()),
                "src/{n}/ is not a stage folder"
            );
        }
    }
}

#[test]
fn each_rule_catches_a_planted_violation() {
    // Rule 1: a probe file naming the store; a group import naming experiments.
    let v = import_violations(Path::new("probe/model.rs"), "use crate::store::Store;\n");
    assert_eq!(v.len(), 1, "{v:?}");
    let v = import_violations(
        Path::new("measure/x.rs"),
        "use crate::{units::Bytes, experiments::bench};\n",
    );
    assert_eq!(v.len(), 1, "{v:?}");
    // …but not inside its test module, nor in a comment.
    let ok =
        "// see crate::store\nfn f() {}\n#[cfg(test)]\nmod tests { use crate::store::Store; }\n";
    assert!(import_violations(Path::new("probe/model.rs"), ok).is_empty());
    // An earlier stage is fine.
    assert!(import_violations(Path::new("present/x.rs"), "use crate::store::Store;").is_empty());
    // Rule 2.
    assert_eq!(
        import_violations(Path::new("roofline.rs"), "use crate::measure::peak;").len(),
        1
    );
    assert!(
        import_violations(
            Path::new("roofline.rs"),
            "use crate::probe::model::ModelFacts;"
        )
        .is_empty()
    );
    assert_eq!(
        import_violations(Path::new("units.rs"), "use crate::probe::hw;").len(),
        1
    );
    // Rule 3.
    assert!(sql_violation(Path::new("present/views.rs"), "sqlx::query(\"SELECT 1\")").is_some());
    assert!(
        sql_violation(
            Path::new("experiments/frontier/store.rs"),
            "sqlx::query(\"\")"
        )
        .is_none()
    );
    assert!(sql_violation(Path::new("store/mod.rs"), "sqlx::query(\"\")").is_none());
    // Rule 4.
    assert_eq!(
        adapter_violations("cmd/x.rs", "use memwall_core::measure::engine::Engine;").len(),
        1
    );
    assert!(
        adapter_violations("cmd/x.rs", "memwall_core::experiments::roof::stream_job").is_empty()
    );
}
