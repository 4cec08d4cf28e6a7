//! Tests of every command's operation, called directly on an `AppState` over a
//! temporary store (the `#[tauri::command]` functions are one-line adapters to these).
//! The engine tests (bench, chat) need the SmolLM2 model: they skip loudly when it is
//! absent (fail under MEMWALL_REQUIRE_MODELS=1) and hold the engine lock.

use memwall_app::error::AppError;
use memwall_app::job::JobKind;
use memwall_app::state::{AppState, BenchRequest, ChatRequest};
use memwall_core::experiments::bench::Progress;
use memwall_core::experiments::chat::{ChatEvent, ChatMessage, StopReason};
use memwall_core::measure::engine::EngineKind;
use memwall_core::present::chart::app::AppChart;
use memwall_core::store::RunFilter;
use std::sync::{Arc, Mutex};

fn state() -> (tempfile::TempDir, AppState) {
    let d = tempfile::tempdir().unwrap();
    let s = AppState::new(d.path().join("t.db"), d.path().join("exports"));
    (d, s)
}

#[tokio::test]
async fn an_empty_store_shows_dashes_not_numbers() {
    let (_d, s) = state();
    let m = s.machine().await.unwrap();
    assert!(m.streams.is_empty() && m.peaks.is_empty());
    assert!(
        m.tray.bandwidth.starts_with("Bandwidth now: ")
            && m.tray
                .bandwidth
                .ends_with(" · ceiling — (STREAM never measured)"),
        "{}",
        m.tray.bandwidth
    );
    // Every counter is listed, available or with its reason; the live chart has
    // the machine page's read.
    let names: Vec<&str> = m.counters.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cpu_package_energy",
            "dram_energy",
            "cpu_temperature",
            "cpu_frequency",
            "memory",
            "cpu_time",
            "swap",
            "dram_bandwidth",
            "gpu_power",
            "gpu_energy",
            "gpu_temperature",
            "gpu_clocks",
            "gpu_memory_utilisation",
            "gpu_other_processes",
        ]
    );
    assert!(m.counters.iter().all(|c| c.available != c.reason.is_some()));
    assert_eq!(m.live_series.len(), 1);
    assert!(m.live_chart_svg.starts_with("<svg"));
    assert_eq!(m.spec_gbps, None);
    assert!(m.host.cores_logical >= 1);
    assert!(
        s.tray_status()
            .await
            .unwrap()
            .bandwidth
            .ends_with("ceiling — (STREAM never measured)")
    );
    assert!(s.runs(&RunFilter::default()).await.unwrap().is_empty());
    let r = s.roofline(None).await.unwrap();
    assert!(r.points.is_empty() && r.roofs.is_empty());
    assert!(s.frontier().await.unwrap().rows.is_empty());
    let e = s
        .chart_svg(AppChart::Roofline, None)
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no rows to draw"), "{e}");
}

#[tokio::test]
async fn a_second_measuring_job_is_refused_and_cancel_reaches_the_running_one() {
    let (_d, s) = state();
    let g = s.start_job(JobKind::Bench).unwrap();
    let e = s.start_job(JobKind::Bench).err().unwrap();
    assert!(matches!(e, AppError::Busy { .. }));
    assert_eq!(
        e.to_string(),
        "bench is running: wait for it to finish or cancel it before starting bench"
    );
    assert!(s.measure_bandwidth().await.is_err());
    assert!(s.delete_run(1).await.is_err());
    assert!(!s.cancel(JobKind::Chat));
    assert!(s.cancel(JobKind::Bench));
    assert!(g.cancel.load(std::sync::atomic::Ordering::Relaxed));
    drop(g);
    assert_eq!(s.running(), None);
    assert!(s.start_job(JobKind::Chat).is_ok());
}

#[tokio::test]
async fn measure_now_stores_a_triad_the_tray_shows_and_history_deletes() {
    let (_d, s) = state();
    let out = s.measure_bandwidth().await.unwrap();
    let triad = out.results[0]
        .kernels
        .iter()
        .find(|k| k.kernel == memwall_core::measure::stream::Kernel::Triad)
        .unwrap();
    let shown = s.tray_status().await.unwrap().bandwidth;
    assert!(
        shown.contains(&format!(
            " · ceiling {:.1} GB/s (STREAM triad, ",
            triad.best_gbps.0
        )),
        "{shown}"
    );
    assert!(shown.ends_with("s ago)"), "{shown}");
    let m = s.machine().await.unwrap();
    assert!(
        m.streams
            .iter()
            .any(|x| x.kernel == "triad" && x.run_id == out.run_id)
    );
    let runs = s.runs(&RunFilter::default()).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].kind, "stream");
    // a model filter keeps only runs with matching bench rows
    let f = RunFilter {
        model: Some("smollm".into()),
        ..Default::default()
    };
    assert!(s.runs(&f).await.unwrap().is_empty());
    s.delete_run(out.run_id).await.unwrap();
    assert!(s.runs(&RunFilter::default()).await.unwrap().is_empty());
    let e = s.delete_run(out.run_id).await.unwrap_err().to_string();
    assert!(e.contains("no run with id"), "{e}");
}

#[tokio::test]
async fn bad_requests_name_the_problem() {
    let (_d, s) = state();
    let req = BenchRequest {
        models: vec![],
        n_prompt: vec![16],
        n_gen: vec![],
        n_depth: vec![],
        n_seqs: vec![],
        n_threads: vec![1],
        reps: 1,
        reuse_stream: true,
        engines: vec![],
    };
    assert_eq!(
        s.plan(&req).unwrap_err().to_string(),
        "pick at least one model"
    );
    let e = s
        .plan(&BenchRequest {
            models: vec!["nope".into()],
            ..req.clone()
        })
        .unwrap_err();
    assert!(e.to_string().contains("no model named \"nope\""), "{e}");
    for bad in ["../x.csv", "a/b.csv", ".csv"] {
        let e = s.export_rows(None, bad).await.unwrap_err().to_string();
        assert!(
            e.contains("is not allowed") || e.contains("must end in"),
            "{bad}: {e}"
        );
    }
    let e = s.export_rows(None, "x.exe").await.unwrap_err().to_string();
    assert!(e.contains("rows export as .csv, .json or .md"), "{e}");
    let e = s
        .export_chart(AppChart::Roofline, None, "x.csv")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("charts export as .png or .svg"), "{e}");
    let chat = ChatRequest {
        model: "smollm2-135m".into(),
        messages: vec![],
        max_tokens: 4,
    };
    assert!(
        s.chat(chat, |_| {})
            .await
            .unwrap_err()
            .to_string()
            .contains("1+ messages")
    );
    let e = s.fetch_model("nope", |_| {}).await.unwrap_err().to_string();
    assert!(e.contains("no model named \"nope\""), "{e}");
    // models lists the catalogue with fetched state
    let models = s.models().unwrap();
    assert!(models.iter().any(|m| m.default));
}

fn smollm() -> Option<String> {
    let s = AppState::new("unused.db".into(), "unused".into());
    // Neither an unreadable catalogue nor a missing entry is a reason to skip.
    let m = s
        .models()
        .expect("the app lists the catalogue")
        .into_iter()
        .find(|m| m.name.contains("135m"))
        .expect("the catalogue has SmolLM2-135M");
    if m.present {
        return Some(m.name);
    }
    memwall_testkit::skip_or_fail(
        memwall_testkit::Requirement::Models,
        &format!("model {}", m.name),
        &format!("run `memwall models fetch {}`", m.name),
    );
    None
}

#[test]
fn a_bench_request_fills_the_rest_with_llama_bench_defaults() {
    let Some(model) = smollm() else { return };
    let (_d, s) = state();
    let req = BenchRequest {
        models: vec![model],
        n_prompt: vec![64],
        n_gen: vec![16],
        n_depth: vec![],
        n_seqs: vec![],
        n_threads: vec![2],
        reps: 3,
        reuse_stream: true,
        engines: vec![],
    };
    let p = s.plan(&req).unwrap();
    // llama-bench's cmd_params_defaults (tools/llama-bench/llama-bench.cpp): -d 0,
    // -b 2048, -ub 512, f16 caches, flash attention auto, all layers offloaded (its
    // -1; memwall's unsigned 999); one sequence per tg test; memwall's seed 42.
    assert_eq!((p.n_depth.clone(), p.n_seqs.clone()), (vec![0], vec![1]));
    assert_eq!((p.n_batch, p.n_ubatch, p.n_gpu_layers), (2048, 512, 999));
    assert_eq!(p.flash_attn, None);
    assert_eq!(p.seed, 42);
    // …and what the page sent.
    assert_eq!(
        (
            p.n_prompt.clone(),
            p.n_gen.clone(),
            p.n_threads.clone(),
            p.reps
        ),
        (vec![64], vec![16], vec![2], 3)
    );
    let p = s
        .plan(&BenchRequest {
            n_seqs: vec![1, 4],
            ..req.clone()
        })
        .unwrap();
    assert_eq!(p.n_seqs, [1, 4]);
    // The page's engine choice, spelled as `memwall bench --engine`; none: llama.cpp.
    assert!(p.engines.is_empty());
    let p = s
        .plan(&BenchRequest {
            engines: vec!["llama".into(), "mlx".into(), "mlx-8bit".into()],
            ..req.clone()
        })
        .unwrap();
    assert_eq!(
        p.engines,
        [EngineKind::Llama, EngineKind::Mlx4bit, EngineKind::Mlx8bit]
    );
    let e = s
        .plan(&BenchRequest {
            engines: vec!["tpu".into()],
            ..req.clone()
        })
        .unwrap_err();
    assert!(e.to_string().contains("--engine \"tpu\""), "{e}");
    let e = s
        .plan(&BenchRequest {
            n_seqs: vec![0],
            ..req
        })
        .unwrap_err();
    assert!(
        e.to_string().contains("--n-seqs (parallel sequences)"),
        "{e}"
    );
}

#[tokio::test]
async fn bench_from_the_app_streams_rows_and_exports_a_png_of_the_chart_size() {
    let Some(model) = smollm() else { return };
    let _lock = memwall_testkit::engine_lock();
    let (d, s) = state();
    s.measure_bandwidth().await.unwrap();
    let req = BenchRequest {
        models: vec![model],
        n_prompt: vec![32],
        n_gen: vec![8],
        n_depth: vec![0],
        n_seqs: vec![1],
        n_threads: vec![2],
        reps: 2,
        reuse_stream: true,
        engines: vec![],
    };
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let out = s
        .run_bench(req, move |p| s2.lock().unwrap().push(p))
        .await
        .unwrap();
    assert_eq!(out.records.len(), 2);
    let done = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|p| matches!(p, Progress::TestDone { .. }))
        .count();
    assert_eq!(done, 2);
    let tg = out.records.iter().find(|r| r.is_decode()).unwrap();
    assert!(tg.avg_ts > 0.0 && tg.ceiling_ts.is_some_and(|c| c > 0.0));
    let e = s
        .export_chart(AppChart::DecodeVsDepth, Some(out.run_id), "dvd.png")
        .await
        .unwrap();
    let b = std::fs::read(&e.path).unwrap();
    assert_eq!(&b[..8], b"\x89PNG\r\n\x1a\n");
    assert_eq!(
        u32::from_be_bytes(b[16..20].try_into().unwrap()),
        memwall_core::present::chart::WIDTH
    );
    assert_eq!(
        u32::from_be_bytes(b[20..24].try_into().unwrap()),
        memwall_core::present::chart::HEIGHT
    );
    assert!(e.path.starts_with(d.path().join("exports")));
    let csv = s.export_rows(Some(out.run_id), "rows.csv").await.unwrap();
    let text = std::fs::read_to_string(csv.path).unwrap();
    assert_eq!(text.lines().count(), 3, "header + 2 rows");
    let v = s.roofline(Some(out.run_id)).await.unwrap();
    assert_eq!(v.points.len(), 2);
    assert!(
        s.chart_svg(AppChart::Roofline, Some(out.run_id))
            .await
            .unwrap()
            .contains("<svg")
    );
    // The table's rows carry core's label.
    let shown = s.bench_rows(Some(out.run_id)).await.unwrap();
    let labels: Vec<&str> = shown.iter().map(|r| r.test.as_str()).collect();
    assert_eq!(labels, ["pp32", "tg8"]);
    let cmp = s.compare(out.run_id, out.run_id).await.unwrap();
    assert!(cmp.iter().all(|c| c.change_pct == Some(0.0)));
}

#[tokio::test]
async fn fetching_a_verified_model_reports_done_without_downloading() {
    let Some(model) = smollm() else { return };
    let (_d, s) = state();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    let p = s
        .fetch_model(&model, move |e| s2.lock().unwrap().push(e))
        .await
        .unwrap();
    assert!(p.is_file());
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert!(matches!(
        seen[0],
        memwall_core::probe::catalog::FetchProgress::Done { .. }
    ));
}

#[tokio::test]
async fn chat_streams_tokens_with_ttft_and_stops_within_one_token() {
    let Some(model) = smollm() else { return };
    let _lock = memwall_testkit::engine_lock();
    let (_d, s) = state();
    let s = Arc::new(s);
    let msg = vec![ChatMessage {
        role: "user".into(),
        content: "Count from 1 to 50.".into(),
    }];
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev2 = events.clone();
    let req = ChatRequest {
        model: model.clone(),
        messages: msg.clone(),
        max_tokens: 12,
    };
    let st = s
        .chat(req, move |e| ev2.lock().unwrap().push(e))
        .await
        .unwrap();
    assert!(st.n_gen >= 1 && st.ttft_ms.unwrap() > 0.0 && st.prefill_tps.unwrap() > 0.0);
    // no STREAM stored in this fresh store: the % of ceiling is unknown, not invented
    assert_eq!(st.pct_of_ceiling, None);
    let text: String = events
        .lock()
        .unwrap()
        .iter()
        .filter_map(|e| match e {
            ChatEvent::Token { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect();
    assert!(!text.trim().is_empty(), "no text streamed");
    // The app coalesces tokens (one event per CHAT_EMIT_EVERY), so cancel at the first
    // event carrying 3 or more tokens: the turn then ends with exactly that many tokens,
    // no further decode step runs after the cancel.
    let s2 = s.clone();
    let req = ChatRequest {
        model,
        messages: msg,
        max_tokens: 200,
    };
    let cancelled_at = Arc::new(Mutex::new(None::<u32>));
    let at2 = cancelled_at.clone();
    let st = s
        .chat(req, move |e| {
            if let ChatEvent::Token { stats, .. } = &e {
                let mut at = at2.lock().unwrap();
                if stats.n_gen >= 3 && at.is_none() {
                    assert!(s2.cancel(JobKind::Chat));
                    *at = Some(stats.n_gen);
                }
            }
        })
        .await
        .unwrap();
    let at = cancelled_at
        .lock()
        .unwrap()
        .expect("no event reached 3 tokens");
    assert!(at < 200, "cancelled only at the end ({at})");
    assert_eq!(st.n_gen, at);
    let _ = StopReason::Cancelled;
}

/// The Serve page and the chat page's URL mode without a model: nothing runs, no
/// run is stored, and bad input is refused with a message naming it.
#[tokio::test(flavor = "multi_thread")]
async fn serve_and_url_chat_refuse_bad_input_and_show_nothing_unmeasured() {
    use memwall_app::serve::{LoadtestRequest, ServeRequest};
    use memwall_core::experiments::loadtest::url_chat::UrlChatRequest;
    let (_d, s) = state();
    assert!(s.serve_live().await.is_none());
    assert!(
        s.serve_stop().await.unwrap().is_none(),
        "stopping nothing is no error"
    );
    assert!(s.loadtest_view(None).await.unwrap().is_none());
    let e = s
        .serve_start(ServeRequest {
            model: "no-such-model".into(),
            parallel: 2,
            queue: 4,
            port: 0,
            ctx_per_slot: None,
            engine: None,
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("no-such-model"), "{e}");
    assert!(s.serve_live().await.is_none());
    let e = s
        .chat_url(
            UrlChatRequest {
                url: "127.0.0.1:8080".into(),
                model: None,
                api_key: None,
                messages: vec![ChatMessage {
                    role: "user".into(),
                    content: "hi".into(),
                }],
                max_tokens: 8,
            },
            |_| {},
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("\"127.0.0.1:8080\"") && e.contains("http://"),
        "{e}"
    );
    assert_eq!(s.running(), None, "the chat slot is free again");
    let e = s
        .loadtest(
            LoadtestRequest {
                url: "http://127.0.0.1:8080".into(),
                model: None,
                api_key: None,
                concurrency: vec![],
                num_requests: 4,
                input_tokens: 16,
                output_tokens: 4,
                model_file: None,
            },
            |_| {},
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("--concurrency"), "{e}");
    assert!(s.runs(&RunFilter::default()).await.unwrap().is_empty());
}
