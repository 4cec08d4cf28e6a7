//! The load-test jobs: [`loadtest_job`] (`memwall loadtest --url …`: probe the
//! server, run every load level, add the bandwidth columns, store one `loadtest` run,
//! draw the charts) and [`history_job`] (`memwall loadtest --list`).

use super::metrics::{self, LoadPoint};
use super::plan::Load;
use super::plan::LoadPlan;
use super::run::{self, ServerInfo};
use super::store::{self as lstore, LoadProvenance, StoredPoint};
use super::{LoadtestError, chart, report};
use crate::experiments::{JobError, blocking};
use crate::measure::sampler::MachineSampler;
use crate::measure::sampler::session::{DEFAULT_HZ, EnergySummary, Recording, SamplerSession};
use crate::probe::catalog::Catalog;
use crate::probe::hw;
use crate::probe::model::ModelFacts;
use crate::store::{NewRun, Store};
use crate::util::now_rfc3339;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// What the job reports while it runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ts_rs::TS)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum LoadProgress {
    /// The server answered `GET /v1/models`.
    Server {
        /// Models it lists.
        model_ids: Vec<String>,
    },
    /// A load level starts (0-based `index` of `total`), after its warm-up.
    Level {
        /// `concurrency 4`, `rate 2/s (burstiness 1)`.
        label: String,
        /// 0-based level index.
        index: usize,
        /// Levels.
        total: usize,
        /// Measured requests it will send at most.
        n_requests: usize,
    },
    /// `done` of the level's measured requests have ended.
    Request {
        /// Ended so far.
        done: usize,
        /// At most.
        total: usize,
    },
}

/// What [`loadtest_job`] produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadOutcome {
    /// The stored run.
    pub run_id: i64,
    /// Target and workload.
    pub prov: LoadProvenance,
    /// One per level, in order.
    pub points: Vec<LoadPoint>,
    /// Charts written (PNG and SVG).
    pub charts: Vec<PathBuf>,
    /// The Markdown report: provenance, the table, the definitions.
    pub report: String,
}

/// The model file (for the tokenizer and, with a named KV type, the bandwidth
/// columns): `--model-file`; else the file a memwall serve names in its facts, when
/// it is on this machine; else a fetched catalogue model whose name, file name or
/// file stem is a model id the server lists (memwall serve lists the file stem); with
/// the reason when none.
fn model_file(plan: &LoadPlan, info: &ServerInfo) -> Result<PathBuf, String> {
    if let Some(p) = &plan.model_file {
        return Ok(p.clone());
    }
    if let Some(f) = &info.facts {
        let p = PathBuf::from(&f.model_file);
        if p.is_file() {
            return Ok(p);
        }
    }
    let cat = Catalog::builtin()
        .map_err(|e| format!("no --model-file, and the catalogue did not load: {e}"))?;
    for id in &info.model_ids {
        let base = Path::new(id)
            .file_name()
            .and_then(|f| f.to_str())
            .unwrap_or(id);
        let stem = base.trim_end_matches(".gguf");
        for name in [id.as_str(), base, stem] {
            if let Ok(e) = cat.get(name) {
                let p = e.path();
                if p.exists() {
                    return Ok(p);
                }
            }
        }
        for e in &cat.models {
            let file_stem = e.file.trim_end_matches(".gguf");
            if e.file == base || file_stem.eq_ignore_ascii_case(stem) {
                let p = e.path();
                if p.exists() {
                    return Ok(p);
                }
            }
        }
    }
    Err(format!(
        "no --model-file, and the server's model ids {:?} name no fetched catalogue model",
        info.model_ids
    ))
}

/// The roof the server runs under: the one `memwall serve` publishes, else the one
/// the user named (`--roof GBPS`, or `--roof cpu`: this host's latest STREAM triad),
/// else why it is unknown. Never the client machine's STREAM by default: the server
/// may read its weights from a GPU or another machine.
///
/// # Errors
/// The store's.
async fn server_roof(
    store: &Store,
    plan: &LoadPlan,
    info: &ServerInfo,
    hostname: &str,
) -> Result<Result<metrics::ServerRoof, String>, JobError> {
    use super::plan::RoofChoice;
    if let Some(f) = &info.facts {
        return Ok(match (&f.roof, &f.roof_missing) {
            (Some(r), _) => Ok(metrics::ServerRoof {
                gbps: r.gbps,
                source: format!(
                    "memwall serve's own: {} STREAM {} #{} ({} threads) on {}, measured {}",
                    r.device, r.kernel, r.stream_id, r.threads, r.hostname, r.measured_at
                ),
            }),
            (None, why) => Err(format!(
                "memwall serve publishes no roof: {}",
                why.as_deref().unwrap_or("no reason given")
            )),
        });
    }
    Ok(match plan.roof {
        RoofChoice::Gbps(g) => Ok(metrics::ServerRoof {
            gbps: g,
            source: format!("--roof {g} GB/s (declared by the user)"),
        }),
        RoofChoice::ThisCpu => match store.latest_triad(hostname, None).await? {
            Some(s) => Ok(metrics::ServerRoof {
                gbps: s.best_gbps,
                source: format!(
                    "--roof cpu: this host's STREAM triad #{} ({} threads) on {}, measured {}",
                    s.id, s.threads, s.hostname, s.measured_at
                ),
            }),
            None => Err(format!(
                "--roof cpu: no STREAM triad stored for host {hostname} (run `memwall stream`)"
            )),
        },
        RoofChoice::Unknown => Err(format!(
            "the server's roof is unknown: {} is not memwall serve (no /memwall/facts); pass --roof GB/s (the STREAM triad of the memory its weights stream from) or --roof cpu (it runs on this machine's CPU)",
            plan.target.base()
        )),
    })
}

/// Runs a load test and stores it as one `loadtest` run.
///
/// # Errors
/// [`LoadtestError`] (options, unreachable or non-OpenAI server, a level whose
/// requests all failed, impossible times, an unreadable model file), the store's
/// errors; nothing is stored unless every level produced a point.
pub async fn loadtest_job(
    store: &Store,
    plan: LoadPlan,
    command: &str,
    results_dir: Option<&Path>,
    progress: Arc<dyn Fn(LoadProgress) + Send + Sync>,
) -> Result<LoadOutcome, JobError> {
    plan.validate()?;
    let started_at = now_rfc3339();
    let target = plan.target.clone();
    let mut info = blocking(move || run::probe_server(&target)).await??;
    progress(LoadProgress::Server {
        model_ids: info.model_ids.clone(),
    });
    let model = match (&plan.target.model, info.model_ids.first()) {
        (Some(m), _) => m.clone(),
        (None, Some(m)) => m.clone(),
        (None, None) => {
            return Err(LoadtestError::NotOpenAi {
                url: format!("{}/v1/models", plan.target.base()),
                problem: "it lists no model; pass --model NAME".into(),
            }
            .into());
        }
    };
    let (facts, file, model_missing) = match model_file(&plan, &info) {
        Ok(p) => (
            Some(ModelFacts::open(&p).map_err(LoadtestError::Model)?),
            Some(p),
            String::new(),
        ),
        Err(why) => (None, None, why),
    };
    let host = hw::host_info();
    let roof = server_roof(store, &plan, &info, &host.hostname).await?;
    let served = info.facts.clone();
    let bytes_missing = match (&served, &facts, plan.cache_type) {
        (Some(_), _, _) | (None, Some(_), Some(_)) => String::new(),
        (None, None, _) => model_missing.clone(),
        (None, Some(_), None) => format!(
            "the server's KV-cache type is unknown ({} publishes no /memwall/facts): pass --cache-type (llama-server's -ctk; f16 unless it was started with another)",
            plan.target.base()
        ),
    };
    let counter = token_counter(file.as_deref());
    let n_prompts = (plan.num_requests + plan.warmup).max(1);
    let w = plan.workload.clone();
    // Each level draws its own prompts (one stream from the seed; the shared prefix is
    // the same for all): a server's prefix cache never holds a later level's prompts
    // from an earlier level, so no level is measured on its predecessor's cache.
    let all_prompts = super::plan::synthetic_prompts(
        n_prompts * plan.loads.len().max(1),
        w.input_tokens,
        w.shared_prefix_tokens,
        w.seed,
    );
    let shared = Arc::new(Mutex::new(info.clone()));
    let plan = Arc::new(plan);
    let sampler = plan
        .sampler
        .then(|| SamplerSession::start(MachineSampler::detect(), DEFAULT_HZ));
    if let Some(s) = &sampler {
        // The machine (and a server on it) idle before the first level.
        crate::experiments::live::job::idle_baseline(&s.marker()).await;
    }
    let mut phases = Vec::new();
    let mut points = Vec::new();
    for (index, &load) in plan.loads.iter().enumerate() {
        progress(LoadProgress::Level {
            label: load.label(),
            index,
            total: plan.loads.len(),
            n_requests: plan.num_requests,
        });
        let (plan2, model2, prompts2, shared2, prog2) = (
            plan.clone(),
            model.clone(),
            all_prompts[index * n_prompts..(index + 1) * n_prompts].to_vec(),
            shared.clone(),
            progress.clone(),
        );
        let marker = sampler.as_ref().map(|s| s.marker());
        let phase = level_phase(index, &load);
        phases.push(phase.clone());
        let lr = blocking(move || {
            if let Some(m) = &marker {
                m.mark(&phase);
            }
            let r = run::run_level(
                &plan2,
                &model2,
                load,
                &prompts2,
                &shared2,
                &|done, total| prog2(LoadProgress::Request { done, total }),
            );
            if let Some(m) = &marker {
                // The warm-up is inside the phase, not inside its timed interval.
                m.span(&phase, 0, r.span);
                m.end_phase();
            }
            r
        })
        .await?;
        let cref = counter
            .as_ref()
            .map(|c| c.as_ref() as metrics::TokenCounter);
        let mut p = metrics::summarize(load, lr.samples, lr.duration_s, &plan.slo, cref)?;
        let bytes = match (&served, &facts, plan.cache_type) {
            (Some(f), _, _) => Ok(metrics::BytesFrom::Served(f)),
            (None, Some(m), Some(kv)) => Ok(metrics::BytesFrom::File(m, kv)),
            _ => Err(bytes_missing.as_str()),
        };
        metrics::add_bandwidth(
            &mut p,
            bytes,
            (w.input_tokens + w.shared_prefix_tokens) as u64,
            roof.as_ref().map_err(String::as_str),
        );
        points.push(p);
    }
    let recording = sampler.map(|s| {
        let rec = s.stop();
        for (p, name) in points.iter_mut().zip(&phases) {
            p.energy = level_energy(&rec, name, p);
        }
        rec
    });
    let got = shared.lock().unwrap_or_else(|p| p.into_inner()).clone();
    info.server_header = got.server_header;
    info.system_fingerprint = got.system_fingerprint;
    info.reported_model = got.reported_model;
    let prov = LoadProvenance {
        url: plan.target.base(),
        endpoint: plan.target.endpoint,
        request_model: model,
        server_model: info.reported_model.clone(),
        server_header: info.server_header.clone(),
        system_fingerprint: info.system_fingerprint.clone(),
        model_file: file.map(|p| p.display().to_string()),
        workload: plan.workload.clone(),
        slo: plan.slo,
    };
    let run = NewRun {
        kind: "loadtest".into(),
        started_at,
        finished_at: now_rfc3339(),
        command: command.to_string(),
        host,
        notes: String::new(),
        guard: None,
    };
    let run_id =
        lstore::insert_loadtest_run(store, &run, &prov, &points, recording.as_ref()).await?;
    let report = format!(
        "{}\n{}\n{}{}",
        report::header(&prov),
        report::table(&points),
        report::energy_table(&points),
        report::definitions()
    );
    let mut charts = Vec::new();
    if let Some(dir) = results_dir {
        let werr = |path: &Path, e: String| JobError::Results {
            path: path.display().to_string(),
            msg: e,
        };
        std::fs::create_dir_all(dir).map_err(|e| werr(dir, e.to_string()))?;
        let md = dir.join("loadtest.md");
        std::fs::write(&md, &report).map_err(|e| werr(&md, e.to_string()))?;
        charts = chart::write_charts(dir, &points).map_err(|e| werr(dir, e.to_string()))?;
    }
    Ok(LoadOutcome {
        run_id,
        prov,
        points,
        charts,
        report,
    })
}

/// The sampler phase of load level `index`: `#1 concurrency 4`.
fn level_phase(index: usize, load: &Load) -> String {
    crate::experiments::live::phase_name(index, &load.label())
}

/// A level's energy from its phase of `rec`: integrated over the level's measured
/// span (its timed interval: the warm-up before it is left out), divided among its
/// output tokens. `None` when the phase was not recorded.
fn level_energy(rec: &Recording, phase: &str, p: &LoadPoint) -> Option<EnergySummary> {
    rec.phase(phase)?;
    Some(rec.energy(phase, p.total_output_tokens))
}

type Counter = Box<dyn Fn(&str) -> Option<u64> + Sync + Send>;

/// The model's tokenizer as a counter (llama.cpp vocab-only load), when a model
/// file is known and the llama engine is built in.
fn token_counter(file: Option<&Path>) -> Option<Counter> {
    #[cfg(feature = "llama")]
    if let Some(f) = file
        && let Ok(v) = crate::measure::engine::llama::VocabOnly::load(f)
    {
        let v = Arc::new(v);
        return Some(Box::new(move |t: &str| Some(v.count(t) as u64)));
    }
    let _ = file;
    None
}

/// Every stored load-test point (one run's when `run_id` is given), oldest first.
///
/// # Errors
/// The store's errors.
pub async fn history_job(store: &Store, run_id: Option<i64>) -> Result<Vec<StoredPoint>, JobError> {
    Ok(lstore::points(store, run_id).await?)
}

#[cfg(test)]
mod tests {
    use super::super::fake::{self, Fake};
    use super::super::plan::{Endpoint, Load, RoofChoice, Slo, Target, Workload};
    use super::*;

    fn foreign_plan(url: String) -> LoadPlan {
        LoadPlan {
            target: Target {
                url,
                model: None,
                api_key: None,
                endpoint: Endpoint::Completions,
                timeout_s: 10.0,
            },
            workload: Workload {
                input_tokens: 4,
                output_tokens: 8,
                shared_prefix_tokens: 0,
                ignore_eos: true,
                seed: 1,
            },
            loads: vec![Load::Closed { concurrency: 2 }],
            num_requests: 4,
            duration_s: None,
            warmup: 0,
            slo: Slo::default(),
            model_file: None,
            roof: RoofChoice::Unknown,
            cache_type: None,
            sampler: false,
        }
    }

    /// A server that is not memwall serve publishes no roof: its bandwidth share is
    /// `—` with the reason until the user names the roof (and, for the bytes, the model
    /// file and KV type); the client's own STREAM is never used unasked.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_foreign_servers_share_needs_the_roof_the_user_names() {
        let url = fake::start(Fake {
            ttft_ms: 5,
            gap_ms: 2,
            ..Fake::default()
        });
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("m.db")).await.unwrap();
        let run = |plan: LoadPlan| {
            let store = &store;
            async move {
                loadtest_job(store, plan, "t", None, Arc::new(|_| {}))
                    .await
                    .unwrap()
                    .points
                    .remove(0)
                    .bandwidth
            }
        };
        // Nothing named: every bandwidth column `—`, each with its reason.
        let b = run(foreign_plan(url.clone())).await;
        assert_eq!(
            (
                b.bytes_per_token,
                b.stream_gbps,
                b.pct_of_stream,
                b.roof_source
            ),
            (None, None, None, None)
        );
        let note = b.note.unwrap();
        assert!(note.contains("the server's roof is unknown"), "{note}");
        assert!(
            note.contains("is not memwall serve (no /memwall/facts)"),
            "{note}"
        );
        // --roof cpu on a host with no stored STREAM: `—` naming the missing run.
        let mut p = foreign_plan(url.clone());
        p.roof = RoofChoice::ThisCpu;
        let note = run(p).await.note.unwrap();
        assert!(
            note.contains("--roof cpu: no STREAM triad stored"),
            "{note}"
        );
        // The model file without its KV type: bytes `—` (no assumed F16).
        let f = d.path().join("m.gguf");
        std::fs::write(&f, crate::probe::model::one_layer_test_file()).unwrap();
        let mut p = foreign_plan(url.clone());
        p.model_file = Some(f.clone());
        p.roof = RoofChoice::Gbps(50.0);
        let b = run(p).await;
        assert_eq!((b.bytes_per_token, b.pct_of_stream), (None, None));
        assert_eq!(b.stream_gbps, Some(50.0));
        assert!(b.note.unwrap().contains("pass --cache-type"));
        // Everything named: bytes at the named KV type, share of the named roof.
        let mut p = foreign_plan(url);
        p.model_file = Some(f.clone());
        p.roof = RoofChoice::Gbps(50.0);
        p.cache_type = Some(crate::probe::model::CacheType::Q8_0);
        let out = loadtest_job(&store, p, "t", None, Arc::new(|_| {}))
            .await
            .unwrap();
        let pt = &out.points[0];
        let b = &pt.bandwidth;
        let m = ModelFacts::open(&f).unwrap();
        let n = pt.n_completed as f64;
        let prompt = pt.total_input_tokens.map_or(4.0, |t| t as f64 / n);
        let depth = (prompt + pt.total_output_tokens as f64 / n / 2.0).round() as u64;
        let want =
            crate::roofline::bytes_per_step(&m, depth, 1, crate::probe::model::CacheType::Q8_0).0
                as f64;
        assert_eq!(b.bytes_per_token, Some(want));
        let implied = pt.output_throughput_tps * want / 1e9;
        assert_eq!(b.implied_gbps, Some(implied));
        assert_eq!(b.pct_of_stream, Some(100.0 * implied / 50.0));
        assert_eq!(b.kv_type.as_deref(), Some("q8_0"));
        assert_eq!(
            b.roof_source.as_deref(),
            Some("--roof 50 GB/s (declared by the user)")
        );
        assert_eq!(b.note, None);
        // Stored and read back with the roof's source and the KV type.
        let stored = history_job(&store, Some(out.run_id)).await.unwrap();
        assert_eq!(&stored[0].point.bandwidth, b);
    }

    /// With the sampler on, each level is a phase of the run's stored recording and
    /// gets an energy summary: measured figures that agree with each other (energy =
    /// mean power × the level's duration, J/token = energy ÷ output tokens), or none
    /// with the reason; stored and read back unchanged.
    #[tokio::test(flavor = "multi_thread")]
    async fn the_sampler_gives_each_level_its_energy_or_the_reason_there_is_none() {
        let url = fake::start(Fake {
            ttft_ms: 30,
            gap_ms: 10,
            ..Fake::default()
        });
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("m.db")).await.unwrap();
        let plan = LoadPlan {
            target: Target {
                url,
                model: None,
                api_key: None,
                endpoint: Endpoint::Completions,
                timeout_s: 10.0,
            },
            workload: Workload {
                input_tokens: 4,
                output_tokens: 8,
                shared_prefix_tokens: 0,
                ignore_eos: true,
                seed: 1,
            },
            loads: vec![
                Load::Closed { concurrency: 1 },
                Load::Closed { concurrency: 2 },
            ],
            num_requests: 4,
            duration_s: None,
            warmup: 0,
            slo: Slo::default(),
            model_file: None,
            roof: Default::default(),
            cache_type: None,
            sampler: true,
        };
        let out = loadtest_job(&store, plan, "t", None, Arc::new(|_| {}))
            .await
            .unwrap();
        let rec = crate::experiments::live::store::recording(&store, out.run_id)
            .await
            .unwrap()
            .expect("the recording is stored with the run");
        let names: Vec<&str> = rec.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["idle", "#0 concurrency 1", "#1 concurrency 2"]);
        assert_eq!(rec.windows("idle").len(), 1, "the idle baseline's interval");
        // Each level's timed interval is its measured span (after its warm-up),
        // inside its phase, as long as the level's duration.
        for (p, ph) in out.points.iter().zip(&rec.phases[1..]) {
            let w = rec.windows(&ph.name);
            assert_eq!(w.len(), 1, "{ph:?}");
            assert!(w[0].0 >= ph.start_ns && w[0].1 <= ph.end_ns, "{w:?} {ph:?}");
            let secs = (w[0].1 - w[0].0) as f64 / 1e9;
            assert!(
                (secs - p.duration_s).abs() < 1e-6,
                "{secs} vs {}",
                p.duration_s
            );
        }
        for p in &out.points {
            let e = p.energy.as_ref().expect("a summary per level");
            match e.mean_power_w {
                Some(w) => {
                    let j = e.energy_j.unwrap();
                    assert!(w >= 0.0 && (j - w * p.duration_s).abs() <= 1e-6 * j.max(1.0));
                    let per = e.j_per_token.unwrap();
                    assert!((per - j / p.total_output_tokens as f64).abs() <= 1e-9 * per.max(1.0));
                }
                None => {
                    assert_eq!((e.energy_j, e.j_per_token), (None, None));
                    assert!(e.reason.as_deref().is_some_and(|r| !r.is_empty()), "{e:?}");
                }
            }
        }
        assert!(out.report.contains("| J/out token |"), "{}", out.report);
        let stored = history_job(&store, Some(out.run_id)).await.unwrap();
        let got: Vec<_> = stored.iter().map(|s| s.point.energy.clone()).collect();
        let want: Vec<_> = out.points.iter().map(|p| p.energy.clone()).collect();
        assert_eq!(got, want);
    }

    /// The energy table: `—` and the reason once where the counters cannot be read,
    /// and nothing at all when the sampler was off.
    #[test]
    fn the_energy_table_shows_dashes_with_the_reason_once() {
        let none = EnergySummary {
            samples: 12,
            mean_power_w: None,
            energy_j: None,
            j_per_token: None,
            tokens_per_wh: None,
            energy_source: String::new(),
            reason: Some("cpu_package_energy: RAPL not readable here".into()),
            peak_temp_c: None,
            throttled: None,
            live_dram_gbps: None,
            gpu_mem_util_pct: None,
            ..EnergySummary::default()
        };
        let p = metrics::summarize(
            Load::Closed { concurrency: 2 },
            vec![super::super::run::RequestSample {
                index: 0,
                start_ms: 0.0,
                outcome: super::super::run::Outcome::Ok,
                chunk_ms: vec![10.0, 20.0],
                e2el_ms: 25.0,
                usage_prompt_tokens: Some(4),
                usage_completion_tokens: Some(2),
                cached_tokens: None,
                text: String::new(),
                finish_reason: Some("length".into()),
                retry_after_s: None,
                error: None,
            }],
            0.5,
            &Slo::default(),
            None,
        )
        .unwrap();
        assert_eq!(report::energy_table(std::slice::from_ref(&p)), "");
        let with = LoadPoint {
            energy: Some(none),
            ..p
        };
        let t = report::energy_table(&[with.clone(), with]);
        // 2 output tokens in 0.5 s = 4.0 tok/s.
        assert!(
            t.contains("| c=2 | 4.0 | — | — | — | — | — | — | — | — |"),
            "{t}"
        );
        assert_eq!(t.matches("RAPL not readable here").count(), 1);
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_job_stores_its_points_writes_charts_and_says_why_bandwidth_is_missing() {
        let url = fake::start(Fake {
            ttft_ms: 20,
            gap_ms: 5,
            ..Fake::default()
        });
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("m.db")).await.unwrap();
        let plan = LoadPlan {
            target: Target {
                url: url.clone(),
                model: None,
                api_key: None,
                endpoint: Endpoint::Chat,
                timeout_s: 10.0,
            },
            workload: Workload {
                input_tokens: 4,
                output_tokens: 5,
                shared_prefix_tokens: 2,
                ignore_eos: true,
                seed: 3,
            },
            loads: vec![
                Load::Closed { concurrency: 1 },
                Load::Closed { concurrency: 2 },
                Load::Open {
                    rate_rps: 50.0,
                    burstiness: 1.0,
                },
            ],
            num_requests: 4,
            duration_s: None,
            warmup: 1,
            slo: Slo::parse("ttft:1000").unwrap(),
            model_file: None,
            roof: Default::default(),
            cache_type: None,
            sampler: false,
        };
        let events = Arc::new(Mutex::new(Vec::new()));
        let ev2 = events.clone();
        let out = loadtest_job(
            &store,
            plan,
            "memwall loadtest",
            Some(d.path()),
            Arc::new(move |e| ev2.lock().unwrap().push(e)),
        )
        .await
        .unwrap();
        assert_eq!(out.points.len(), 3);
        for p in &out.points {
            assert_eq!((p.n_sent, p.n_completed), (4, 4), "warm-up not counted");
            assert_eq!(
                p.goodput_rps,
                Some(p.request_throughput_rps),
                "all meet ttft ≤ 1 s"
            );
            let note = p.bandwidth.note.as_deref().unwrap();
            assert!(
                note.contains("no --model-file") && note.contains("the server's roof is unknown"),
                "{note}"
            );
            assert_eq!(
                (p.bandwidth.implied_gbps, p.bandwidth.pct_of_stream),
                (None, None)
            );
        }
        assert_eq!(out.prov.server_model.as_deref(), Some("fake-model"));
        assert!(out.report.contains("| TTFT | time to first token"));
        let stored = history_job(&store, Some(out.run_id)).await.unwrap();
        // Statistics are REAL columns (exact); raw samples go through JSON text, whose
        // float parsing may move the last bit.
        let strip = |p: &LoadPoint| LoadPoint {
            samples: Vec::new(),
            ..p.clone()
        };
        for (s, p) in stored.iter().zip(&out.points) {
            assert_eq!(strip(&s.point), strip(p));
            assert_eq!(s.point.samples.len(), p.samples.len());
            for (a, b) in s.point.samples.iter().zip(&p.samples) {
                assert!(
                    a.chunk_ms
                        .iter()
                        .zip(&b.chunk_ms)
                        .all(|(x, y)| (x - y).abs() < 1e-9)
                );
            }
        }
        // Latency vs throughput, percentiles vs concurrency, goodput vs rate: PNG + SVG each.
        assert_eq!(out.charts.len(), 6, "{:?}", out.charts);
        assert!(out.charts.iter().all(|c| c.exists()));
        assert!(d.path().join("loadtest.md").exists());
        let ev = events.lock().unwrap();
        assert!(matches!(ev[0], LoadProgress::Server { .. }));
        assert_eq!(
            ev.iter()
                .filter(|e| matches!(e, LoadProgress::Request { .. }))
                .count(),
            12
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn bad_options_fail_before_anything_is_sent() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("m.db")).await.unwrap();
        let plan = LoadPlan {
            target: Target {
                url: "localhost:8080".into(),
                model: None,
                api_key: None,
                endpoint: Endpoint::Chat,
                timeout_s: 10.0,
            },
            workload: Workload {
                input_tokens: 4,
                output_tokens: 5,
                shared_prefix_tokens: 0,
                ignore_eos: true,
                seed: 3,
            },
            loads: vec![Load::Closed { concurrency: 1 }],
            num_requests: 1,
            duration_s: None,
            warmup: 0,
            slo: Slo::default(),
            model_file: None,
            roof: Default::default(),
            cache_type: None,
            sampler: false,
        };
        let e = loadtest_job(&store, plan, "x", None, Arc::new(|_| {}))
            .await
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--url \"localhost:8080\"") && e.contains("http://"),
            "{e}"
        );
        assert!(store.runs().await.unwrap().is_empty());
    }

    /// llama.cpp's own server: `$LLAMA_SERVER`, else the llama-tools folder; `None`
    /// after a loud skip (a failure under `MEMWALL_REQUIRE_LLAMA_TOOLS=1`).
    fn llama_server() -> Option<PathBuf> {
        let p = std::env::var_os("LLAMA_SERVER")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                directories::BaseDirs::new()
                    .map(|b| {
                        b.home_dir()
                            .join(".cache/memwall/llama-tools/bin/llama-server")
                    })
                    .unwrap_or_default()
            });
        if p.is_file() {
            return Some(p);
        }
        crate::testing::skip_or_fail(
            crate::testing::Requirement::LlamaTools,
            &format!("llama-server at {}", p.display()),
            "run scripts/build-llama-tools.sh (or set LLAMA_SERVER)",
        );
        None
    }

    /// A short real run: llama-server on the default model, 2 slots, closed loop at
    /// concurrency 1 and 2; the usage counts must equal max_tokens (ignore_eos), the
    /// bandwidth columns must be filled from the model file, and the server named.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_short_run_against_llama_server() {
        let Some(bin) = llama_server() else { return };
        let Some(model) = crate::testing::model("qwen2.5-coder-0.5b-q4_k_m") else {
            return;
        };
        let _lock = crate::testing::engine_lock();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = std::process::Command::new(&bin)
            .args([
                "-m",
                &model.display().to_string(),
                "-t",
                "2",
                "-np",
                "2",
                "-c",
                "2048",
            ])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let up = (0..300).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(200));
            ureq::get(&format!("{url}/health"))
                .call()
                .is_ok_and(|r| r.status() == 200)
        });
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(&d.path().join("m.db")).await.unwrap();
        let plan = LoadPlan {
            target: Target {
                url,
                model: None,
                api_key: None,
                endpoint: Endpoint::Chat,
                timeout_s: 120.0,
            },
            workload: Workload {
                input_tokens: 32,
                output_tokens: 8,
                shared_prefix_tokens: 0,
                ignore_eos: true,
                seed: 1,
            },
            loads: vec![
                Load::Closed { concurrency: 1 },
                Load::Closed { concurrency: 2 },
            ],
            num_requests: 4,
            duration_s: None,
            warmup: 1,
            slo: Slo::default(),
            model_file: Some(model),
            // llama-server runs its default F16 cache; its roof is not named: the
            // share must stay `—` (this host's STREAM is not assumed to be its roof).
            roof: Default::default(),
            cache_type: Some(crate::probe::model::CacheType::F16),
            sampler: true,
        };
        let out = if up {
            Some(loadtest_job(&store, plan, "test", None, Arc::new(|_| {})).await)
        } else {
            None
        };
        let _ = child.kill();
        let _ = child.wait();
        assert!(up, "llama-server did not answer /health within 60 s");
        let out = out.unwrap().unwrap();
        for p in &out.points {
            assert_eq!(
                (p.n_completed, p.total_output_tokens),
                (4, 32),
                "{:?}",
                p.first_error
            );
            assert_eq!(p.token_source, metrics::TokenSource::Usage);
            let b = &p.bandwidth;
            let implied = p.output_throughput_tps * b.bytes_per_token.unwrap() / 1e9;
            assert!((b.implied_gbps.unwrap() - implied).abs() < 1e-9);
            assert_eq!(b.kv_type.as_deref(), Some("f16"));
            assert_eq!((b.stream_gbps, b.pct_of_stream), (None, None));
            assert!(
                b.note
                    .as_deref()
                    .is_some_and(|n| n.contains("the server's roof is unknown")),
                "{b:?}"
            );
            assert!(p.ttft.median_ms.unwrap() > 0.0 && p.ttft.median_ms <= p.e2el.median_ms);
        }
        assert!(
            out.prov
                .server_header
                .as_deref()
                .unwrap_or("")
                .contains("llama"),
            "{:?}",
            out.prov
        );
    }
}
