//! The bench job: measure (or reuse) the roof, run the plan, store every row in one
//! transaction, write `results/<run>/`.

use crate::experiments::bench::{BenchError, BenchPlan, Progress, ValidPlan};
use crate::experiments::evidence::analyses::{Analyses, EvidenceChart};
use crate::experiments::machine_roof::{RoofSource, machine_roof_at};
use crate::experiments::{JobError, blocking};
use crate::probe::hw::{self};
use crate::store::record::BenchRecord;
use crate::store::{NewRun, Store};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Options of a bench job beyond the plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchJobOptions {
    /// Reuse the latest stored STREAM/peaks instead of measuring now.
    pub reuse_stream: bool,
    /// Parent folder for `results/<run>/` (None: do not write files).
    pub results_dir: Option<PathBuf>,
    /// The command line, for provenance.
    pub command: String,
    /// Run the live sampler beside the tests (power, energy per token, temperature,
    /// live bandwidth; stored with the run). Off only to measure its overhead.
    #[serde(default = "yes")]
    pub sampler: bool,
}

fn yes() -> bool {
    true
}

/// A finished bench job.
#[derive(Debug, Clone, Serialize, Deserialize, ts_rs::TS)]
pub struct BenchOutcome {
    /// Store id of the run (a `runs` row).
    pub run_id: i64,
    /// The rows as stored, with their store ids, in plan order.
    pub records: Vec<BenchRecord>,
    /// Where the roof came from.
    pub roof: RoofSource,
    /// The results folder, when written.
    pub results_dir: Option<PathBuf>,
    /// Files written there.
    pub files: Vec<PathBuf>,
    /// Each row's energy and thermals from the live sampler (empty without it).
    pub energy: Vec<crate::experiments::live::RowEnergy>,
    /// `test: what` for each row whose timed repetitions shared the CPUs with other
    /// processes (also in that row's warnings).
    #[serde(default)]
    pub contended: Vec<String>,
}

/// Measures the roof, runs the plan, stores all rows in one transaction and writes
/// `results/<run>/` (CSV, JSON, Markdown, decode-vs-depth PNG + SVG).
///
/// Whether every engine of the plan reads its weights from an NVIDIA GPU's memory:
/// llama.cpp with its CUDA back end and layers offloaded, MLX on Linux with its
/// default device a GPU (PyPI's `mlx-cuda-13` build of libmlx). One run has one roof,
/// so a plan whose engines read from different memories is refused.
///
/// # Errors
/// [`BenchError::Plan`] naming each engine's memory.
#[cfg(feature = "llama")]
pub fn on_cuda(plan: &BenchPlan) -> Result<bool, BenchError> {
    use crate::measure::engine::EngineKind;
    let llama_cuda =
        || plan.n_gpu_layers > 0 && crate::measure::engine::llama::backends().contains("CUDA");
    let where_: Vec<(EngineKind, bool)> = plan
        .engine_list()
        .into_iter()
        .map(|e| {
            let gpu = match e {
                EngineKind::Llama => llama_cuda(),
                _ => mlx_on_cuda(),
            };
            (e, gpu)
        })
        .collect();
    if where_.iter().all(|&(_, g)| g) {
        Ok(true)
    } else if where_.iter().all(|&(_, g)| !g) {
        Ok(false)
    } else {
        let said: Vec<String> = where_
            .iter()
            .map(|&(e, g)| {
                format!(
                    "{} on {}",
                    e.name(),
                    if g { "the CUDA GPU" } else { "the CPU" }
                )
            })
            .collect();
        Err(BenchError::Plan(format!(
            "--engine: {}; one run has one roof (one memory's STREAM): bench them in separate runs, or keep llama.cpp on the CPU with --ngl 0",
            said.join(", ")
        )))
    }
}

/// MLX's default device is an NVIDIA GPU (Linux: the CUDA build of libmlx).
fn mlx_on_cuda() -> bool {
    #[cfg(all(feature = "mlx", target_os = "linux"))]
    {
        crate::measure::engine::mlx::device() == "gpu"
    }
    #[cfg(not(all(feature = "mlx", target_os = "linux")))]
    {
        false
    }
}

/// # Errors
/// [`JobError`]; on error nothing of the bench run is stored.
#[cfg(feature = "llama")]
pub async fn bench_job(
    store: &Store,
    plan: ValidPlan,
    opts: BenchJobOptions,
    progress: impl FnMut(Progress) + Send + 'static,
    cancel: Arc<AtomicBool>,
) -> Result<BenchOutcome, JobError> {
    let host = hw::host_info();
    // Refuse battery and models that cannot fit before STREAM runs or anything is stored.
    let mut guard = crate::measure::guard::Guard::begin(plan.guard_options())?;
    for mi in 0..plan.models.len() {
        guard.check_fit(&[(plan.facts(mi), plan.max_ctx(mi))], plan.type_k)?;
    }
    let counts: Vec<usize> = plan.n_threads.iter().map(|&t| t as usize).collect();
    // Weights on an NVIDIA GPU stream from its memory: the roof is that device's
    // STREAM (CUDA0, where llama.cpp puts a single-GPU model and MLX's CUDA back end
    // runs).
    let roof = if on_cuda(&plan)? {
        crate::experiments::machine_roof::gpu_roof(
            store,
            &host,
            0,
            opts.reuse_stream,
            &opts.command,
        )
        .await?
    } else {
        machine_roof_at(store, &host, &counts, opts.reuse_stream, &opts.command).await?
    };
    let started = crate::util::now_rfc3339();
    let (h2, r2) = (host.clone(), roof.roof.clone());
    let sampler = opts
        .sampler
        .then(crate::experiments::live::job::RunSampler::start);
    if let Some(s) = &sampler {
        // A few seconds with nothing running: the power the tests' is compared with.
        s.idle_baseline().await;
    }
    let mut progress: Box<dyn FnMut(Progress) + Send> = match &sampler {
        Some(s) => Box::new(s.wrap(progress)),
        None => Box::new(progress),
    };
    let records = blocking(move || {
        let cx = crate::experiments::bench::RunContext {
            plan: &plan,
            host: &h2,
            roof: &r2,
            run_id: 0,
            cancel: &cancel,
        };
        crate::experiments::bench::run_plan(&cx, &mut progress)
    })
    .await??;
    let mut records = records;
    // The sampler stops before the rows are stored: a row whose repetitions shared
    // the CPUs with other processes is stored with that warning.
    let sampled = sampler.map(|s| s.stop());
    let contended = match &sampled {
        Some((rec, names)) => crate::experiments::live::flag_contended(rec, &mut records, names),
        None => Vec::new(),
    };
    let run = NewRun {
        kind: "bench".into(),
        started_at: started,
        finished_at: crate::util::now_rfc3339(),
        command: opts.command.clone(),
        host,
        notes: roof.provenance.clone(),
        guard: Some(guard.finish()),
    };
    let mut tx = store.begin().await?;
    let run_id = store.insert_run_tx(&mut tx, &run).await?;
    store
        .insert_bench_rows_tx(&mut tx, run_id, &mut records)
        .await?;
    let (recording, energy) = match sampled {
        Some((rec, names)) => {
            let e = crate::experiments::live::row_energies(&rec, &records, &names);
            (Some(rec), e)
        }
        None => (None, vec![]),
    };
    if let Some(rec) = &recording {
        crate::experiments::live::store::insert_tx(store, &mut tx, run_id, rec, &energy).await?;
    }
    tx.commit().await.map_err(|e| store.sql(e))?;
    let (dir, files) = match &opts.results_dir {
        Some(parent) => {
            let dir = parent.join(format!(
                "run-{run_id:04}-{}",
                run.started_at.replace([':', '-'], "")
            ));
            let analyses = analyses_of(store, &records, &roof).await?;
            let mut files = write_results(&dir, &records, &energy, &analyses)?;
            if let Some(rec) = recording.as_ref().filter(|r| !r.samples.is_empty()) {
                let stem = dir.join("sampler");
                let f = crate::experiments::live::chart::series(&stem, rec).map_err(|e| {
                    JobError::Results {
                        path: stem.display().to_string(),
                        msg: e.to_string(),
                    }
                })?;
                files.push(f.png);
                files.push(f.svg);
            }
            (Some(dir), files)
        }
        None => (None, vec![]),
    };
    Ok(BenchOutcome {
        run_id,
        records,
        roof,
        results_dir: dir,
        files,
        energy,
        contended,
    })
}

/// The analyses that apply to a bench job's rows ([`Analyses::for_rows`]), with
/// STREAM at each thread count taken from the STREAM run behind its roof.
///
/// # Errors
/// [`JobError::Store`].
pub async fn analyses(store: &Store, out: &BenchOutcome) -> Result<Analyses, JobError> {
    analyses_of(store, &out.records, &out.roof).await
}

async fn analyses_of(
    store: &Store,
    rows: &[BenchRecord],
    roof: &RoofSource,
) -> Result<Analyses, JobError> {
    let streams = store.stream_siblings(roof.stream.id).await?;
    let at = |t: i64| {
        streams
            .iter()
            .find(|x| x.threads == t && x.kernel == "triad")
            .map(|x| x.best_gbps)
    };
    Ok(Analyses::for_rows(rows, &at))
}

/// Writes `rows` (with their `energy`) to `dir` as `bench.csv`, `bench.json`,
/// `bench.md` and the charts that apply to them (`analyses.charts`: decode vs depth,
/// the depth decomposition, batching and its roofline, threads), PNG + SVG each;
/// every file is written atomically.
///
/// # Errors
/// [`JobError::Results`] naming the file.
pub fn write_results(
    dir: &Path,
    rows: &[BenchRecord],
    energy: &[crate::experiments::live::RowEnergy],
    analyses: &Analyses,
) -> Result<Vec<PathBuf>, JobError> {
    use crate::experiments::evidence::chart as ev;
    use crate::present::export::Format;
    let err = |p: &Path, e: String| JobError::Results {
        path: p.display().to_string(),
        msg: e,
    };
    let mut files = Vec::new();
    for f in [Format::Csv, Format::Json, Format::Md] {
        let p = dir.join(format!("bench.{}", f.extension()));
        let text = f
            .exporter()
            .render_rows(&crate::experiments::live::export_rows(rows, energy));
        crate::util::write_atomic(&p, text.as_bytes()).map_err(|e| err(&p, e.to_string()))?;
        files.push(p);
    }
    let none = || JobError::Results {
        path: dir.display().to_string(),
        msg: "an analysis with a chart has no rows".into(),
    };
    for chart in &analyses.charts {
        let stem = dir.join(chart.stem());
        let drawn = match chart {
            EvidenceChart::DecodeVsDepth => crate::present::chart::decode_vs_depth(&stem, rows),
            EvidenceChart::DepthDecomposed => {
                ev::depth(&stem, analyses.depth.as_ref().ok_or_else(none)?)
            }
            EvidenceChart::Batch => ev::batch(&stem, analyses.batch.as_ref().ok_or_else(none)?),
            EvidenceChart::BatchRoofline {
                peak_gflops,
                peak_kind,
            } => ev::batch_roofline(
                &stem,
                analyses.batch.as_ref().ok_or_else(none)?,
                *peak_gflops,
                peak_kind,
            ),
            EvidenceChart::Threads => {
                ev::threads(&stem, analyses.threads.as_ref().ok_or_else(none)?)
            }
        };
        let crate::present::chart::ChartFiles { png, svg } =
            drawn.map_err(|e| err(&stem, e.to_string()))?;
        files.push(png);
        files.push(svg);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a machine without CUDA (llama.cpp's CPU build, MLX's CPU wheel) every engine
    /// reads host memory, whatever `--ngl` says: the CPU roof, no refusal.
    #[cfg(feature = "llama")]
    #[test]
    fn engines_without_cuda_take_the_machine_roof() {
        use crate::measure::engine::EngineKind;
        if crate::measure::engine::llama::backends().contains("CUDA") {
            eprintln!(
                "SKIPPED engines_without_cuda_take_the_machine_roof: llama.cpp has CUDA here"
            );
            return;
        }
        let mut engines = vec![EngineKind::Llama];
        if cfg!(feature = "mlx") {
            engines.extend([EngineKind::Mlx4bit, EngineKind::Mlx8bit]);
        }
        for ngl in [0, crate::measure::engine::ALL_LAYERS] {
            let plan = BenchPlan {
                engines: engines.clone(),
                n_gpu_layers: ngl,
                ..BenchPlan::llama_bench_defaults()
            };
            assert!(!on_cuda(&plan).unwrap(), "ngl {ngl}, {engines:?}");
        }
    }

    #[test]
    fn results_hold_the_tables_and_every_chart_that_applies() {
        let row = |n_depth: i64, n_seqs: i64, n_threads: i64| BenchRecord {
            n_prompt: 0,
            n_gen: 128,
            n_depth,
            n_seqs,
            n_threads,
            ..BenchRecord::example()
        };
        let rows = [row(0, 1, 2), row(512, 1, 2), row(0, 4, 2), row(0, 1, 1)];
        let analyses = Analyses::for_rows(&rows, &|t| Some(20.0 * t as f64));
        let d = tempfile::tempdir().unwrap();
        let files = write_results(d.path(), &rows, &[], &analyses).unwrap();
        let names: Vec<String> = files
            .iter()
            .map(|f| {
                assert!(f.is_file(), "{}", f.display());
                f.strip_prefix(d.path()).unwrap().display().to_string()
            })
            .collect();
        let mut want = vec![
            "bench.csv".to_string(),
            "bench.json".into(),
            "bench.md".into(),
        ];
        for stem in [
            "decode_vs_depth",
            "depth_decomposed",
            "batch",
            "batch_roofline",
            "threads",
        ] {
            want.push(format!("{stem}.png"));
            want.push(format!("{stem}.svg"));
        }
        assert_eq!(names, want);
        // One prefill test: the tables only.
        let pp = [BenchRecord {
            n_prompt: 512,
            n_gen: 0,
            ..BenchRecord::example()
        }];
        let files = write_results(d.path(), &pp, &[], &Analyses::for_rows(&pp, &|_| None)).unwrap();
        assert_eq!(files.len(), 3);
    }
}
