//! `ui/src/types.ts` is generated from the Rust types the app sends and receives
//! (ts-rs): this test regenerates it and fails when the committed file differs, so
//! the front end's types cannot drift from the records.
//!
//! After changing a record: `MEMWALL_UPDATE_TYPES=1 cargo test --release -p
//! memwall-app --test types_ts`, then commit `ui/src/types.ts`.

use std::any::TypeId;
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use ts_rs::{Config, TS, TypeVisitor};

/// Collects the declaration of every type reachable from the roots.
struct Collect<'a> {
    cfg: &'a Config,
    seen: HashSet<TypeId>,
    decls: BTreeMap<String, String>,
}

impl TypeVisitor for Collect<'_> {
    fn visit<T: TS + 'static + ?Sized>(&mut self) {
        // Built-in types (numbers, strings, arrays, options) have no declaration.
        if T::output_path().is_none() || !self.seen.insert(TypeId::of::<T>()) {
            return;
        }
        let name = T::ident(self.cfg);
        let decl = format!(
            "{}export {}\n",
            T::docs().unwrap_or_default(),
            T::decl(self.cfg)
        );
        if let Some(other) = self.decls.insert(name.clone(), decl) {
            panic!("two Rust types are both called {name} in TypeScript:\n{other}");
        }
        T::visit_dependencies(self);
    }
}

fn generate() -> String {
    use memwall_app::{events, job, state};
    use memwall_core::{experiments, present, probe, store};
    // JavaScript numbers hold integers exactly up to 2^53: far above any count,
    // id or byte size memwall sends, so 64-bit integers are plain numbers.
    let cfg = Config::new().with_large_int("number");
    let mut c = Collect {
        cfg: &cfg,
        seen: HashSet::new(),
        decls: BTreeMap::new(),
    };
    // What the commands return or take, and what the channels stream.
    c.visit::<state::MachineView>();
    c.visit::<state::ModelItem>();
    c.visit::<state::BenchRequest>();
    c.visit::<state::ChatRequest>();
    c.visit::<state::Exported>();
    c.visit::<state::ReportExport>();
    c.visit::<job::JobKind>();
    c.visit::<events::Progress>();
    c.visit::<events::ChatEvent>();
    c.visit::<events::FetchProgress>();
    c.visit::<experiments::bench::job::BenchOutcome>();
    c.visit::<experiments::chat::ChatStats>();
    c.visit::<memwall_app::speculative::SpecGateRequest>();
    c.visit::<memwall_app::speculative::SpecBenchRequest>();
    c.visit::<experiments::speculative::job::SpecProgress>();
    c.visit::<experiments::speculative::job::GateOutcome>();
    c.visit::<experiments::speculative::job::SpecBenchOutcome>();
    c.visit::<present::views::BenchRow>();
    c.visit::<present::views::TrayStatus>();
    c.visit::<present::views::CompareRow>();
    c.visit::<present::views::RooflineView>();
    c.visit::<present::views::FrontierView>();
    c.visit::<present::chart::app::AppChart>();
    c.visit::<store::RunSummary>();
    c.visit::<store::RunFilter>();
    c.visit::<probe::hw::HostInfo>();
    c.visit::<memwall_app::serve::ServeRequest>();
    c.visit::<memwall_app::serve::LoadtestRequest>();
    c.visit::<events::LoadProgress>();
    c.visit::<events::UrlChatEvent>();
    c.visit::<experiments::loadtest::url_chat::UrlChatRequest>();
    c.visit::<experiments::loadtest::view::LoadView>();
    c.visit::<experiments::serve::session::ServeLive>();
    c.visit::<experiments::serve::job::ServeSummary>();
    let mut out = String::from(
        "// Generated from memwall's Rust types by src-tauri/tests/types_ts.rs (ts-rs): do not\n\
         // edit. After changing a record: MEMWALL_UPDATE_TYPES=1 cargo test --release -p\n\
         // memwall-app --test types_ts\n\
         // Units are in the names: _gbps = 1e9 B/s, _tps = tokens/s, _ns, _bytes; a value\n\
         // that was not measured is null.\n\n",
    );
    // ts-rs writes a `#[serde(flatten)]` struct's fields out again in the outer type;
    // BenchRow is a BenchRecord plus its test label, so it says exactly that.
    c.visit::<store::record::BenchRecord>();
    c.decls.insert(
        "BenchRow".into(),
        format!(
            "{}export type BenchRow = BenchRecord & {{ \n/**\n * llama-bench's test label.\n */\ntest: string, }};\n",
            <present::views::BenchRow as TS>::docs().unwrap_or_default()
        ),
    );
    for decl in c.decls.values() {
        out.push_str(decl);
        out.push('\n');
    }
    out.push_str(&format!(
        "/** The broadcast event sent after the store changed (`events::STORE_CHANGED`). */\n\
         export const STORE_CHANGED = {:?};\n",
        events::STORE_CHANGED
    ));
    out
}

#[test]
fn ui_types_ts_is_generated_from_the_rust_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui/src/types.ts");
    let want = generate();
    if std::env::var("MEMWALL_UPDATE_TYPES").as_deref() == Ok("1") {
        std::fs::write(&path, &want).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        eprintln!("wrote {}", path.display());
        return;
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    if have != want {
        let first = have
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| have.lines().count().min(want.lines().count()));
        panic!(
            "{} is not what the Rust types generate (first difference at line {}):\n  committed: {:?}\n  generated: {:?}\nregenerate it with MEMWALL_UPDATE_TYPES=1 cargo test --release -p memwall-app --test types_ts",
            path.display(),
            first + 1,
            have.lines().nth(first).unwrap_or("<end of file>"),
            want.lines().nth(first).unwrap_or("<end of file>"),
        );
    }
}

#[test]
fn the_generated_types_follow_the_json_the_records_serialize_to() {
    let ts = generate();
    let decl = |name: &str| -> String {
        let start = ts
            .find(&format!("export type {name} = "))
            .unwrap_or_else(|| panic!("no {name} in:\n{ts}"));
        ts[start..start + ts[start..].find(";\n").unwrap()].to_string()
    };
    // A non-finite measurement serializes as null, and its type says so.
    let rec = memwall_core::store::record::BenchRecord {
        avg_ts: f64::NAN,
        ..memwall_core::store::record::BenchRecord::example()
    };
    assert_eq!(
        serde_json::to_value(&rec).unwrap()["avg_ts"],
        serde_json::Value::Null
    );
    assert!(decl("BenchRecord").contains("avg_ts: number | null"));
    // The row the tables show is core's label beside the record's own fields.
    let row = decl("BenchRow");
    assert!(
        row.starts_with("export type BenchRow = BenchRecord & {") && row.contains("test: string")
    );
    let json = serde_json::to_value(memwall_core::present::views::BenchRow::from(
        memwall_core::store::record::BenchRecord::example(),
    ))
    .unwrap();
    assert!(json["test"].is_string() && json["n_seqs"].is_number() && json["n_depth"].is_number());
    // 64-bit ids are numbers, not bigint; tagged enums keep serde's tag.
    assert!(decl("RunSummary").contains("id: number"));
    assert!(!ts.contains("bigint"));
    assert!(
        decl("Progress").contains("\"event\": \"test_started\""),
        "{}",
        decl("Progress")
    );
    assert_eq!(
        decl("JobKind"),
        "export type JobKind = \"stream\" | \"bench\" | \"chat\" | \"fetch\" | \"spec_gate\" | \"spec_bench\" | \"loadtest\""
    );
}
