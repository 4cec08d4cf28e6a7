//! The crate's layout rules, checked on the source text (what `lib.rs` states):
//!
//! 1. Stages run `probe → measure → store → present → experiments`; a file in one
//!    stage folder never names a later stage (`crate::<later>`). Its `#[cfg(test)]`
//!    items are left out (tests may reach anything); code after them is checked.
//! 2. `roofline.rs` names only `crate::probe::model`, `crate::probe::gguf` (tensor
//!    types) and `crate::units`; `units.rs` and `util.rs` name no other module.
//! 3. SQL runs only in store modules: `sqlx` appears only under `store/` or in a
//!    slice's own `store.rs`.
//! 4. The CLI's `cmd/*` and the app's `src-tauri/src` hold no SQL, no engine or
//!    instrument calls and no orchestration (guards, run records): they call jobs
//!    (`memwall_core::experiments::…`) and print or serialize what comes back.
//! 5. `lib.rs` declares exactly the modules its map names, and every folder under
//!    `src/` is one of them.
//! 6. No circles: in memwall-core, the CLI and the app, no two modules import each
//!    other, directly or around a circle (a module and its own submodules excepted).
//! 7. The slices of `experiments/` form a declared order ([`SLICES`]): a slice
//!    names only slices before it; `experiments/mod.rs` names none.
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

/// The file's code without its `#[cfg(test)]` items (tests may reach anything) and
/// without `//` comments (doc links name modules without importing them). A
/// `#[cfg(test)]` item is its one line when that ends in `;` or closes its braces,
/// else every line up to the `}` at the item's own indentation (rustfmt's layout);
/// the code after it is kept and checked like the rest.
fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if let Some(after) = trimmed.strip_prefix("#[cfg(test)]") {
            let indent = &line[..line.len() - trimmed.len()];
            // The item: on the attribute's own line, or after it and any other attributes.
            let mut j = i;
            if after.trim().is_empty() {
                j += 1;
                while j < lines.len() && lines[j].trim_start().starts_with("#[") {
                    j += 1;
                }
            }
            let item = lines.get(j).copied().unwrap_or("").trim_end();
            let item = item.strip_prefix(indent).unwrap_or(item);
            let item = item.strip_prefix("#[cfg(test)]").unwrap_or(item);
            let opens = item.matches('{').count();
            let one_line = item.ends_with(';') || (opens > 0 && opens == item.matches('}').count());
            if !one_line {
                let close = format!("{indent}}}");
                while j < lines.len() && lines[j].trim_end() != close {
                    j += 1;
                }
            }
            i = j + 1;
            continue;
        }
        let code = match line.find("//") {
            Some(k) => &line[..k],
            None => line,
        };
        out.push_str(code);
        out.push('\n');
        i += 1;
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
        }
    }
    match name.as_str() {
        // `roofline.rs` and its own files (`roofline/multi_gpu.rs`).
        n if n == "roofline.rs" || n.starts_with("roofline/") => {
            for (a, b) in &paths {
                let ok = a == "units"
                    || a == "roofline"
                    || (a == "probe" && (b == "model" || b == "gguf"));
                if !ok {
                    bad.push(format!(
                        "{name}: names `crate::{a}::{b}` (only model facts and units)"
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
    let files = sources(&root);
    assert!(
        files.len() > 50,
        "found only {} files under {}",
        files.len(),
        root.display()
    );
    let tests = test_only(&files);
    assert!(
        tests.contains(&vec![
            "experiments".into(),
            "speculative".into(),
            "mock".into()
        ]),
        "{tests:?}"
    );
    for (rel, text) in &files {
        if is_test_only(rel, &tests) {
            continue;
        }
        bad.extend(import_violations(rel, text));
        bad.extend(sql_violation(rel, text));
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
    ];
    let mut d = declared.clone();
    d.sort();
    let mut m: Vec<String> = mapped.iter().map(|s| s.to_string()).collect();
    m.sort();
    assert_eq!(d, m, "lib.rs declares other modules than its map");
    // Test support is no part of the API: the one private module, `testing`, exists
    // only in unit-test builds (the rest lives in the memwall-testkit crate).
    let lines: Vec<&str> = lib.lines().collect();
    let private: Vec<(usize, &str)> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("mod "))
        .map(|(i, l)| (i, *l))
        .collect();
    assert_eq!(
        private.iter().map(|(_, l)| *l).collect::<Vec<_>>(),
        ["mod testing;"],
        "lib.rs's private modules"
    );
    assert!(
        private[0].0 > 0 && lines[private[0].0 - 1] == "#[cfg(test)]",
        "lib.rs: `mod testing;` must be under #[cfg(test)]"
    );
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
            // A stage folder, or the files of a mapped module (`roofline/` beside
            // `roofline.rs`).
            let own_files = mapped.contains(&n.as_str()) && root.join(format!("{n}.rs")).is_file();
            assert!(
                STAGES.contains(&n.as_str()) || own_files,
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
    // Code after a test module is checked like the rest (it escaped every rule when
    // the first `#[cfg(test)]` ended the file), and so is code after `mod mock;`.
    let after = "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::store::Store;\n}\nuse crate::store::Store;\n";
    assert_eq!(
        import_violations(Path::new("probe/model.rs"), after).len(),
        1
    );
    let after_mod =
        "#[cfg(test)]\nmod mock;\npub fn g() -> crate::experiments::JobError {\n    todo!()\n}\n";
    assert_eq!(
        import_violations(Path::new("measure/x.rs"), after_mod).len(),
        1
    );
    let inner = "impl A {\n    #[cfg(test)]\n    fn t() {\n        crate::store::f();\n    }\n    fn g() {\n        crate::store::g();\n    }\n}\n";
    assert_eq!(import_violations(Path::new("probe/a.rs"), inner).len(), 1);
    assert!(
        sql_violation(
            Path::new("present/v.rs"),
            "#[cfg(test)]\nmod tests {}\nfn f() { sqlx::query(\"\"); }\n"
        )
        .is_some()
    );
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
        import_violations(
            Path::new("roofline/multi_gpu.rs"),
            "use crate::measure::peak;"
        )
        .len(),
        1
    );
    assert!(
        import_violations(
            Path::new("roofline/multi_gpu.rs"),
            "use crate::roofline::MachineRoof;\nuse crate::units::Gbps;"
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
        adapter_violations(
            "cmd/x.rs",
            "memwall_core::experiments::machine_roof::stream_job"
        )
        .is_empty()
    );
}

/// The slices of `experiments/`, lowest first: a slice may name only slices before
/// it (the frontier runs bench on each arm, the report reads every slice), never
/// one after it, so no two slices import each other, directly or around a circle.
/// `progress` is not a slice but a shared piece every slice may use. A new slice
/// takes its place here.
const SLICES: [&str; 15] = [
    "progress",
    "evidence",
    "calc",
    "machine_roof",
    "live",
    "bench",
    "chat",
    "serve",
    "loadtest",
    "speculative",
    "agree",
    "mlx_tg",
    "predict",
    "frontier",
    "report",
];

/// Circles that exist and are to be broken, each as [`circles`] lists it: the test
/// fails on any other circle, and on a listed one that is gone (so the list only
/// shrinks). Empty: speculative's bench → store → synth → bench circle was broken by
/// `experiments/speculative/record.rs` (the row types, `AUTO_OFF_*`, `pooled_energy`
/// and the breakdown table below all three).
const KNOWN_CIRCLES: &[&[&str]] = &[];

/// The modules that are test code as a whole: those a file declares
/// `#[cfg(test)] mod name;` (a `mock.rs`, a `tests.rs`, a fixture), files of their own.
fn test_only(files: &[(PathBuf, String)]) -> std::collections::BTreeSet<Vec<String>> {
    let mut out = std::collections::BTreeSet::new();
    for (p, text) in files {
        let lines: Vec<&str> = text.lines().map(str::trim).collect();
        for (i, l) in lines.iter().enumerate() {
            let Some(rest) = l.strip_prefix("#[cfg(test)]") else {
                continue;
            };
            let mut item = rest.trim();
            let mut j = i + 1;
            while item.is_empty() || item.starts_with("#[") {
                match lines.get(j) {
                    Some(next) => item = next,
                    None => break,
                }
                j += 1;
            }
            if let Some(decl) = item.strip_suffix(';')
                && let Some((_, name)) = decl.rsplit_once("mod ")
            {
                let mut m = module_of(p);
                m.push(name.trim().to_string());
                out.insert(m);
            }
        }
    }
    out
}

/// Whether `rel` is in a test-only module of [`test_only`].
fn is_test_only(rel: &Path, tests: &std::collections::BTreeSet<Vec<String>>) -> bool {
    let m = module_of(rel);
    tests.iter().any(|t| m.starts_with(t))
}

/// The module a file under a crate's `src/` is: `lib.rs` or `main.rs` → `[]`,
/// `a/mod.rs` → `[a]`, `a/b.rs` → `[a, b]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut m: Vec<String> = rel
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(m.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        m.pop();
    }
    m
}

/// Every path `code` names from its root (`crate`, `super`, `self`), braces
/// expanded: `use super::{a, b::{c, d}}` gives `super::a`, `super::b::c`,
/// `super::b::d`.
fn named_paths(code: &str) -> Vec<Vec<String>> {
    fn is_ident(c: char) -> bool {
        c.is_ascii_alphanumeric() || c == '_'
    }
    /// Parses a path tree at the start of `s` (after its first `::`), appending
    /// every leaf path under `prefix` to `out`; returns the bytes it read.
    fn tree(s: &str, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
        let mut path = prefix.to_vec();
        let mut i = 0;
        let b = s.as_bytes();
        loop {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < b.len() && b[i] == b'{' {
                i += 1;
                loop {
                    while i < b.len() && (b[i].is_ascii_whitespace() || b[i] == b',') {
                        i += 1;
                    }
                    if i >= b.len() || b[i] == b'}' {
                        return i + 1;
                    }
                    let before = i;
                    i += tree(&s[i..], &path, out);
                    if i == before {
                        // Not a path (`*`): step over it.
                        i += s[i..].chars().next().map_or(1, char::len_utf8);
                    }
                }
            }
            let start = i;
            while i < b.len() && b[i].is_ascii() && is_ident(b[i] as char) {
                i += 1;
            }
            if i == start {
                out.push(path);
                return i;
            }
            path.push(s[start..i].to_string());
            if s[i..].starts_with("::") {
                i += 2;
            } else {
                out.push(path);
                return i;
            }
        }
    }
    let mut out = Vec::new();
    for root in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(k) = code[from..].find(root) {
            let at = from + k;
            from = at + root.len();
            let before = code[..at].chars().last();
            if before.is_some_and(|c| is_ident(c) || c == ':' || c == '$') {
                continue; // inside a longer path (`super::super::`, `a::self::`), or `$crate`
            }
            let head = root.trim_end_matches("::").to_string();
            let read = tree(&code[from..], &[head], &mut out);
            from += read.max(1).min(code.len() - from);
        }
    }
    out
}

/// The module a path names, resolved from module `here`: the longest prefix of it
/// that is a module of `modules`.
fn resolve(here: &[String], path: &[String], modules: &[Vec<String>]) -> Option<Vec<String>> {
    let mut m: Vec<String> = Vec::new();
    let mut rest = path;
    match path.first().map(String::as_str) {
        Some("crate") => rest = &path[1..],
        Some("super") | Some("self") => {
            m = here.to_vec();
            while let Some(seg) = rest.first() {
                match seg.as_str() {
                    "super" => {
                        m.pop()?;
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        _ => return None,
    }
    // The longest prefix that is a module (a folder's `mod.rs` may be absent).
    let mut best = modules.contains(&m).then(|| m.clone());
    for seg in rest {
        m.push(seg.clone());
        if modules.contains(&m) {
            best = Some(m.clone());
        }
    }
    best
}

/// The import graph of a crate's `src/` between modules (outside `#[cfg(test)]`
/// items): an edge `a → b` where a file of module `a` names module `b`, neither
/// inside the other (a module and its own submodules may name each other).
fn module_graph(files: &[(PathBuf, String)]) -> Graph {
    let modules: Vec<Vec<String>> = files.iter().map(|(p, _)| module_of(p)).collect();
    let tests = test_only(files);
    let mut g = std::collections::BTreeMap::new();
    for (p, text) in files {
        if is_test_only(p, &tests) {
            continue;
        }
        let here = module_of(p);
        let edges: &mut std::collections::BTreeSet<Vec<String>> =
            g.entry(here.clone()).or_default();
        for path in named_paths(&code_of(text)) {
            if let Some(to) = resolve(&here, &path, &modules)
                && !to.starts_with(&here)
                && !here.starts_with(&to)
            {
                edges.insert(to);
            }
        }
    }
    g
}

type Graph = std::collections::BTreeMap<Vec<String>, std::collections::BTreeSet<Vec<String>>>;

/// The circles of `g`: its strongly connected components of more than one module
/// (Tarjan's algorithm), each as its sorted module names (`a::b`).
fn circles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: std::collections::BTreeMap<&'a Vec<String>, (usize, usize)>,
        stack: Vec<&'a Vec<String>>,
        on: std::collections::BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a Vec<String>) {
        let n = t.index.len();
        t.index.insert(v, (n, n));
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = t.g.get_key_value(w).map_or(w, |(k, _)| k);
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.index[w].1;
                let e = t.index.get_mut(v).unwrap();
                e.1 = e.1.min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w].0;
                let e = t.index.get_mut(v).unwrap();
                e.1 = e.1.min(iw);
            }
        }
        let (i, low) = t.index[v];
        if i == low {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                c.push(w.join("::"));
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        g,
        index: Default::default(),
        stack: Vec::new(),
        on: Default::default(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

/// The slice rule on a module graph of memwall-core: each `experiments::<slice>`
/// names only slices before it in [`SLICES`], and every slice is listed.
fn slice_violations(g: &Graph) -> Vec<String> {
    let slice = |m: &Vec<String>| -> Option<String> {
        (m.len() >= 2 && m[0] == "experiments").then(|| m[1].clone())
    };
    let mut bad = std::collections::BTreeSet::new();
    for (from, tos) in g {
        let Some(a) = slice(from) else { continue };
        let Some(ia) = SLICES.iter().position(|s| *s == a) else {
            bad.insert(format!(
                "experiments/{a}: a slice missing from SLICES (place it after the slices it uses)"
            ));
            continue;
        };
        for to in tos {
            if let Some(b) = slice(to)
                && b != a
                && SLICES.iter().position(|s| *s == b).is_none_or(|ib| ib > ia)
            {
                bad.insert(format!(
                    "{}: slice `{a}` names `{}`, a later slice (SLICES puts `{b}` after `{a}`)",
                    from.join("::"),
                    to.join("::")
                ));
            }
        }
    }
    bad.into_iter().collect()
}

/// `experiments/mod.rs` (the shared `JobError`, `blocking`) names no slice beyond
/// declaring it: every slice may use it, so it may use none.
fn hub_violations(text: &str) -> Vec<String> {
    let code = code_of(text);
    let mut bad = Vec::new();
    for line in code.lines().map(str::trim) {
        if line.starts_with("pub mod ") || line.starts_with("mod ") {
            continue;
        }
        for s in SLICES {
            let names = line.match_indices(&format!("{s}::")).any(|(i, _)| {
                !line[..i]
                    .chars()
                    .last()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            });
            if names {
                bad.push(format!("experiments/mod.rs: names slice `{s}`: {line}"));
            }
        }
    }
    bad
}

fn sources(dir: &Path) -> Vec<(PathBuf, String)> {
    rs_files(dir)
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f.strip_prefix(dir).unwrap().to_path_buf(), text)
        })
        .collect()
}

#[test]
fn no_circles_between_files_or_slices() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let core = module_graph(&sources(&src()));
    assert!(
        core.values().map(|e| e.len()).sum::<usize>() > 100,
        "the core's import graph has too few edges to be read right"
    );
    let mut bad = slice_violations(&core);
    bad.extend(hub_violations(
        &std::fs::read_to_string(src().join("experiments/mod.rs")).unwrap(),
    ));
    for dir in [
        "crates/memwall-core/src",
        "crates/memwall-cli/src",
        "src-tauri/src",
    ] {
        let g = if dir == "crates/memwall-core/src" {
            core.clone()
        } else {
            module_graph(&sources(&repo.join(dir)))
        };
        let found = circles(&g);
        for c in &found {
            if !KNOWN_CIRCLES.iter().any(|k| c[..] == k[..]) {
                bad.push(format!(
                    "{dir}: modules import each other in a circle: {}",
                    c.join(", ")
                ));
            }
        }
        if dir == "crates/memwall-core/src" {
            for k in KNOWN_CIRCLES {
                if !found.iter().any(|c| c[..] == k[..]) {
                    bad.push(format!(
                        "the known circle {} is gone: remove it from KNOWN_CIRCLES",
                        k.join(", ")
                    ));
                }
            }
        }
    }
    assert!(bad.is_empty(), "layout rules broken:\n{}", bad.join("\n"));
}

#[test]
fn the_circle_and_slice_rules_catch_planted_violations() {
    let files = |v: &[(&str, &str)]| -> Vec<(PathBuf, String)> {
        v.iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_string()))
            .collect()
    };
    // Two files naming each other (one through a group import, one through super).
    let g = module_graph(&files(&[
        ("lib.rs", "pub mod a;\npub mod b;\n"),
        ("a.rs", "use crate::{b::Thing, units};\n"),
        ("b.rs", "use super::a::Other;\n"),
    ]));
    assert_eq!(circles(&g), [["a", "b"]]);
    // …the same without the back edge, or with it only in the test module: no circle.
    let g = module_graph(&files(&[
        ("a.rs", "use crate::b::Thing;\n"),
        (
            "b.rs",
            "fn f() {}\n#[cfg(test)]\nmod tests {\n    use crate::a::Other;\n}\n",
        ),
    ]));
    assert!(circles(&g).is_empty(), "{g:?}");
    // A file declared `#[cfg(test)] mod mock;` is test code: it may name anything.
    let g = module_graph(&files(&[
        ("a.rs", "use crate::b::Thing;\n#[cfg(test)]\nmod mock;\n"),
        ("a/mock.rs", "use crate::b::Other;\n"),
        ("b.rs", "use crate::a::mock::M;\n"),
    ]));
    assert!(circles(&g).is_empty(), "{g:?}");
    let g = module_graph(&files(&[
        ("a.rs", "use crate::b::Thing;\nmod mock;\n"),
        ("a/mock.rs", "use crate::b::Other;\n"),
        ("b.rs", "use crate::a::mock::M;\n"),
    ]));
    assert_eq!(circles(&g), [["a::mock", "b"]]);
    // A module and its own submodule may name each other.
    let g = module_graph(&files(&[
        ("a/mod.rs", "mod b;\npub use b::X;\n"),
        ("a/b.rs", "use super::Y;\n"),
    ]));
    assert!(circles(&g).is_empty(), "{g:?}");
    // A circle of three, through `super::super` from a nested file.
    let g = module_graph(&files(&[
        ("x/mod.rs", ""),
        ("x/p.rs", "use super::q::A;\n"),
        ("x/q.rs", "use crate::x::r::B;\n"),
        ("x/r/mod.rs", "use super::super::x::p::C;\n"),
    ]));
    assert_eq!(circles(&g), [["x::p", "x::q", "x::r"]]);
    let g = module_graph(&files(&[
        ("x/mod.rs", ""),
        ("x/p.rs", "use super::q::A;\n"),
        ("x/q.rs", "use crate::x::r::B;\n"),
        ("x/r/mod.rs", "use super::super::z::p::C;\n"),
    ]));
    assert!(circles(&g).is_empty(), "{g:?}");
    // Slices: a lower slice naming a later one fails; the other way is the rule.
    let up = module_graph(&files(&[
        (
            "experiments/bench/job.rs",
            "use crate::experiments::report::x;\n",
        ),
        ("experiments/report/mod.rs", ""),
    ]));
    assert_eq!(slice_violations(&up).len(), 1, "{up:?}");
    let down = module_graph(&files(&[
        (
            "experiments/report/job.rs",
            "use crate::experiments::bench::job;\n",
        ),
        ("experiments/bench/job.rs", ""),
    ]));
    assert!(slice_violations(&down).is_empty());
    // Through `super::super` from inside a slice folder.
    let up = module_graph(&files(&[
        (
            "experiments/live/job.rs",
            "use super::super::bench::Progress;\n",
        ),
        ("experiments/bench/mod.rs", ""),
    ]));
    assert_eq!(slice_violations(&up).len(), 1, "{up:?}");
    // The shared module naming a slice.
    assert_eq!(
        hub_violations("pub mod bench;\nuse bench::BenchError;\n").len(),
        1
    );
    assert_eq!(
        hub_violations("pub enum E {\n    S(crate::experiments::speculative::SpecError),\n}\n")
            .len(),
        1
    );
    assert!(hub_violations("pub mod bench;\nuse crate::measure::stream;\n").is_empty());
    // An unlisted slice.
    let new = module_graph(&files(&[("experiments/newthing/mod.rs", "")]));
    assert_eq!(slice_violations(&new).len(), 1);
}
