//! The bench job: measure (or reuse) the roof, run the plan, store every row in one
//! transaction, write `results/<run>/`.

use crate::experiments::bench::{BenchError, BenchPlan, Progress};
use crate::experiments::roof::{RoofSource, machine_roof_at};
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
}

/// A finished bench job.
#[derive(Debug, Clone, Serialize, Deserialize, ts_rs::TS)]
pub struct BenchOutcome {
    /// Run id.
    pub run_id: i64,
    /// Stored rows.
    pub records: Vec<BenchRecord>,
    /// Where the roof came from.
    pub roof: RoofSource,
    /// The results folder, when written.
    pub results_dir: Option<PathBuf>,
    /// Files written there.
    pub files: Vec<PathBuf>,
}

/// Measures the roof, runs the plan, stores all rows in one transaction and writes
/// `results/<run>/` (CSV, JSON, Markdown, decode-vs-depth PNG + SVG).
///
/// # Errors
/// [`JobError`]; on error nothing of the bench run is stored.
#[cfg(feature = "llama")]
pub async fn bench_job(
    store: &Store,
    plan: BenchPlan,
    opts: BenchJobOptions,
    progress: impl FnMut(Progress) + Send + 'static,
    cancel: Arc<AtomicBool>,
) -> Result<BenchOutcome, JobError> {
    plan.validate()?;
    let host = hw::host_info();
    // Refuse battery and models that cannot fit before STREAM runs or anything is stored.
    let mut guard = crate::measure::guard::Guard::begin(plan.guard_options())?;
    for (mi, path) in plan.models.iter().enumerate() {
        let facts = crate::probe::model::ModelFacts::open(path).map_err(BenchError::from)?;
        guard.check_fit(&[(&facts, plan.max_ctx(mi))], plan.type_k)?;
    }
    let counts: Vec<usize> = plan.n_threads.iter().map(|&t| t as usize).collect();
    let roof = machine_roof_at(store, &host, &counts, opts.reuse_stream, &opts.command).await?;
    let started = crate::util::now_rfc3339();
    let (h2, r2) = (host.clone(), roof.roof.clone());
    let mut progress = progress;
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
    let run = NewRun {
        kind: "bench".into(),
        started_at: started,
        finished_at: crate::util::now_rfc3339(),
        command: opts.command.clone(),
        host,
        notes: roof.provenance.clone(),
        guard: Some(guard.finish()),
    };
    let run_id = store.insert_bench_run(&run, &mut records).await?;
    let (dir, files) = match &opts.results_dir {
        Some(parent) => {
            let dir = parent.join(format!(
                "run-{run_id:04}-{}",
                run.started_at.replace([':', '-'], "")
            ));
            let streams = store.stream_siblings(roof.stream.id).await?;
            let at = |t: i64| {
                streams
                    .iter()
                    .find(|x| x.threads == t && x.kernel == "triad")
                    .map(|x| x.best_gbps)
            };
            let files = write_results(&dir, &records, &at)?;
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
    })
}

/// Writes `rows` to `dir` as `bench.csv`, `bench.json`, `bench.md` and the charts that
/// apply: `decode_vs_depth` (decode rows), `depth_decomposed` (several depths),
/// `batch` + `batch_roofline` (several parallel-sequence counts), `threads` (several
/// thread counts; `stream_at` gives STREAM at a thread count). PNG + SVG each; every
/// file is written atomically.
///
/// # Errors
/// [`JobError::Results`] naming the file.
pub fn write_results(
    dir: &Path,
    rows: &[BenchRecord],
    stream_at: &dyn Fn(i64) -> Option<f64>,
) -> Result<Vec<PathBuf>, JobError> {
    use crate::experiments::evidence::chart as ev;
    use crate::experiments::evidence::{batch, depth, threads};
    use crate::present::export::Format;
    let err = |p: &Path, e: String| JobError::Results {
        path: p.display().to_string(),
        msg: e,
    };
    let mut files = Vec::new();
    for f in [Format::Csv, Format::Json, Format::Md] {
        let p = dir.join(format!("bench.{}", f.extension()));
        crate::util::write_atomic(&p, f.exporter().render(rows).as_bytes())
            .map_err(|e| err(&p, e.to_string()))?;
        files.push(p);
    }
    let distinct = |f: &dyn Fn(&BenchRecord) -> i64| {
        let mut v: Vec<i64> = rows.iter().map(f).collect();
        v.sort();
        v.dedup();
        v.len()
    };
    let mut push = |r: Result<(PathBuf, PathBuf), crate::present::chart::ChartError>,
                    name: &str|
     -> Result<(), JobError> {
        let (a, b) = r.map_err(|e| err(&dir.join(name), e.to_string()))?;
        files.push(a);
        files.push(b);
        Ok(())
    };
    if rows.iter().any(|r| r.is_decode() && r.n_seqs == 1) {
        push(
            crate::present::chart::decode_vs_depth(&dir.join("decode_vs_depth"), rows),
            "decode_vs_depth",
        )?;
    }
    if distinct(&|r| r.n_depth) > 1 {
        let d = depth::analyze(rows);
        if d.iter().any(|r| r.phase == "tg" && r.n_depth > 0) {
            push(
                ev::depth(&dir.join("depth_decomposed"), &d),
                "depth_decomposed",
            )?;
        }
    }
    if distinct(&|r| r.n_seqs) > 1 {
        let b = batch::analyze(rows);
        push(ev::batch(&dir.join("batch"), &b), "batch")?;
        if let Some(r0) = rows.iter().find(|r| r.is_decode()) {
            push(
                ev::batch_roofline(
                    &dir.join("batch_roofline"),
                    &b,
                    r0.peak_gflops,
                    &r0.peak_kind,
                ),
                "batch_roofline",
            )?;
        }
    }
    if distinct(&|r| r.n_threads) > 1 {
        push(
            ev::threads(&dir.join("threads"), &threads::analyze(rows, stream_at)),
            "threads",
        )?;
    }
    Ok(files)
}
