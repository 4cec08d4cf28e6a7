//! The Speculative page's operations, called on an `AppState` over a temporary
//! store (the `spec_gate` / `spec_bench` commands are one-line adapters to these).
//! Bad options and a busy slot are refused before any model is read; on a real
//! model (SmolLM2-135M with the n-gram drafter; skipped loudly when absent, holding
//! the engine lock) a bench without a gate is refused, the gate is stored, and the
//! bench it unlocks stores its rows and writes its results files.

use memwall_app::job::JobKind;
use memwall_app::speculative::{SpecBenchRequest, SpecGateRequest};
use memwall_app::state::AppState;
use memwall_core::experiments::speculative::gate::DrafterKind;
use memwall_core::experiments::speculative::job::{
    GateJobOptions, SpecBenchJobOptions, SpecProgress,
};
use memwall_core::experiments::speculative::prompts::Category;
use memwall_core::store::RunFilter;
use memwall_testkit as testing;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

fn state() -> (tempfile::TempDir, AppState) {
    let d = tempfile::tempdir().unwrap();
    let s = AppState::new(d.path().join("t.db"), d.path().join("exports"));
    (d, s)
}

#[test]
fn a_request_as_the_ui_sends_it_takes_core_defaults_for_the_rest() {
    let r: SpecGateRequest = serde_json::from_str(
        r#"{"target": "a", "draft": "b", "options": {"ks": [4], "max_new": 8, "drafters": ["ngram"]}}"#,
    )
    .unwrap();
    assert_eq!(
        r.options,
        GateJobOptions {
            ks: vec![4],
            max_new: 8,
            drafters: vec![DrafterKind::Ngram],
            ..Default::default()
        }
    );
    let r: SpecBenchRequest = serde_json::from_str(r#"{"target": "a", "draft": "b"}"#).unwrap();
    assert_eq!(r.options, SpecBenchJobOptions::default());
}

#[tokio::test]
async fn bad_options_unknown_models_and_a_busy_slot_are_refused_before_any_model_is_read() {
    let (d, s) = state();
    let gate = |target: &str, options: GateJobOptions| SpecGateRequest {
        target: target.into(),
        draft: target.into(),
        options,
    };
    let e = s
        .spec_gate(
            gate(
                "no-such-model",
                GateJobOptions {
                    ks: vec![0],
                    ..Default::default()
                },
            ),
            |_| {},
        )
        .await
        .unwrap_err();
    assert_eq!(e.to_string(), "-k 0: draft lengths must be 1..=16");
    let e = s
        .spec_gate(gate("no-such-model", Default::default()), |_| {})
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "no model named \"no-such-model\" in the catalogue; `memwall models list` shows the names"
    );
    // One measurement at a time: a running bench refuses the speculative jobs.
    let g = s.start_job(JobKind::Bench).unwrap();
    let e = s
        .spec_bench(
            SpecBenchRequest {
                target: "no-such-model".into(),
                draft: "no-such-model".into(),
                options: Default::default(),
            },
            |_| {},
        )
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "bench is running: wait for it to finish or cancel it before starting spec_bench"
    );
    drop(g);
    // `cancel_job` reaches a speculative job by its kind.
    let g = s.start_job(JobKind::SpecGate).unwrap();
    assert!(!s.cancel(JobKind::SpecBench));
    assert!(s.cancel(JobKind::SpecGate));
    assert!(g.cancel.load(Ordering::Relaxed));
    drop(g);
    assert!(s.runs(&RunFilter::default()).await.unwrap().is_empty());
    assert!(!d.path().join("exports").exists());
}

#[tokio::test]
async fn a_gate_on_a_real_model_is_stored_and_unlocks_the_bench() {
    let name = "smollm2-135m-q4_1";
    if testing::model(name).is_none() {
        return;
    }
    let _lock = testing::engine_lock();
    let (d, s) = state();
    let bench = || SpecBenchRequest {
        target: name.into(),
        draft: name.into(),
        options: SpecBenchJobOptions {
            ks: vec![1],
            auto: false,
            drafters: vec![DrafterKind::Ngram],
            categories: vec![Category::Code],
            per_category: 1,
            reps: 2,
            max_new: 4,
            calib_max_new: 8,
            timing_reps: 1,
            ..Default::default()
        },
    };
    // No gate yet: refused before any timing, nothing stored or written.
    let e = s.spec_bench(bench(), |_| {}).await.unwrap_err().to_string();
    assert!(
        e.contains("no gate unlocks this bench")
            && e.contains("ngram ngram:1-3 k=1: no gate run stored"),
        "{e}"
    );
    assert!(s.runs(&RunFilter::default()).await.unwrap().is_empty());
    assert!(!d.path().join("exports/results").exists());

    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let gate = s
        .spec_gate(
            SpecGateRequest {
                target: name.into(),
                draft: name.into(),
                options: GateJobOptions {
                    ks: vec![1],
                    drafters: vec![DrafterKind::Ngram],
                    max_new: 4,
                    sampling_trials: 0,
                    ..Default::default()
                },
            },
            move |p| s2.lock().unwrap().push(p),
        )
        .await
        .unwrap();
    // The whole built-in set, one row for the one configuration.
    assert!(!gate.partial);
    assert!(gate.n_prompts_set > 3, "{}", gate.n_prompts_set);
    assert_eq!(gate.prompts.len(), gate.n_prompts_set);
    assert_eq!(gate.greedy.len(), 1);
    assert_eq!(
        (gate.greedy[0].k, gate.greedy[0].n_prompts),
        (1, gate.n_prompts_set)
    );
    assert_eq!(gate.passed(), gate.greedy[0].passed(), "{:?}", gate.failed);
    assert!(gate.sampling.is_empty() && gate.draft_file.is_none());
    let seen = seen.lock().unwrap().clone();
    assert!(
        matches!(&seen[0], SpecProgress::Loading { draft: None, .. }),
        "{seen:?}"
    );
    let prompts = seen
        .iter()
        .filter(|p| matches!(p, SpecProgress::GatePrompt { .. }))
        .count();
    assert_eq!(prompts, gate.n_prompts_set);
    assert_eq!(
        seen.last(),
        Some(&SpecProgress::GateDone {
            total: gate.n_prompts_set
        })
    );
    let runs = s.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(Some(runs[0].id), gate.run_id);
    assert_eq!(runs[0].kind, "spec-gate");
    assert_eq!(
        runs[0].command,
        "app: spec gate --target smollm2-135m-q4_1 --draft smollm2-135m-q4_1 -k 1 -n 4 --sampling-trials 0"
    );

    if !gate.passed() {
        // A failed gate is stored but unlocks nothing.
        eprintln!(
            "the gate failed on {name} ({}): checking that it unlocks no bench",
            gate.greedy[0].line()
        );
        let e = s.spec_bench(bench(), |_| {}).await.unwrap_err().to_string();
        assert!(e.contains("no gate unlocks this bench"), "{e}");
        return;
    }
    let out = s.spec_bench(bench(), |_| {}).await.unwrap();
    let runs = s.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 2);
    assert!(
        runs.iter()
            .any(|r| Some(r.id) == out.run_id && r.kind == "spec-bench")
    );
    // Target-only and ngram k=1 rows; the speedup row names the gate that unlocked it.
    assert!(out.rows.iter().any(|r| r.k == 0));
    let spec = out.rows.iter().find(|r| r.k == 1).expect("a k=1 row");
    assert!(spec.gate_id.is_some(), "{spec:?}");
    let dir = out.results_dir.clone().expect("a results folder");
    assert!(
        dir.starts_with(d.path().join("exports/results")),
        "{}",
        dir.display()
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("spec.md")).unwrap(),
        out.report_md
    );
    assert!(out.files.iter().all(|f| f.is_file()), "{:?}", out.files);
    assert!(!out.charts.is_empty());
}
