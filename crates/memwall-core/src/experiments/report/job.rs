//! [`report_job`]: read the store, draw the charts, write `report.md`, `report.html`,
//! `figures.json` and `charts/*.{png,svg}`; optionally re-run a manifest first and
//! run the independent verifier after.

use super::build::build;
use super::render::{figures_json, html, markdown};
use super::store::{KvRow, ReportRows, report_rows};
use super::{ChartRef, Report, ReportError};
use crate::experiments::evidence::analyses::{Analyses, EvidenceChart};
use crate::experiments::evidence::chart as ev;
use crate::present::chart::ChartFiles;
use crate::store::Store;
use crate::store::record::BenchRecord;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The independent verifier's source, written next to the report and run with
/// `python3` (it imports nothing of memwall's: see `tools/verify/verify.py`).
pub const VERIFY_PY: &str = include_str!("../../../../../tools/verify/verify.py");

/// What `memwall report` (and the app's "Export report") asks of [`report_job`].
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// The folder to write (`results/report` by default).
    pub out: PathBuf,
    /// Re-run the experiments of this manifest before generating (`--rerun`), with
    /// this `memwall` executable.
    pub rerun: Option<(PathBuf, PathBuf)>,
    /// Run the independent verifier on the written report (`--verify`).
    pub verify: bool,
}

/// A written report.
#[derive(Debug, Clone)]
pub struct ReportOutcome {
    /// The report as built (sections, tables, charts).
    pub report: Report,
    /// The folder written.
    pub dir: PathBuf,
    /// Every file written, in order.
    pub files: Vec<PathBuf>,
    /// The experiments re-run first (manifest names), when `--rerun` was given.
    pub rerun: Vec<String>,
    /// The verifier's output, when `verify` was asked; the job fails when it fails.
    pub verify: Option<String>,
}

fn io(p: &Path, e: impl std::fmt::Display) -> ReportError {
    ReportError::Io {
        path: p.display().to_string(),
        msg: e.to_string(),
    }
}

fn chart_err(stem: &str, e: impl std::fmt::Display) -> ReportError {
    ReportError::Chart {
        stem: stem.to_string(),
        msg: e.to_string(),
    }
}

/// The file a report of a PostgreSQL store reads from, inside its output folder: a
/// copy of the whole shared store with its ids kept ([`crate::store::postgres::snapshot`]),
/// so the report's footnotes name the shared store's rows. The verifier checks the
/// database itself (through `psql`), not this copy. Replaced by each report.
pub const SHARED_SNAPSHOT: &str = "shared-store.db";

/// [`report_job`] on the store `db` names: a SQLite file, or a PostgreSQL URL
/// (`postgres://…`), which is first copied into [`SHARED_SNAPSHOT`] in the output
/// folder; `verify` then checks the report against the PostgreSQL database itself
/// (the verifier reads it through `psql`). `--rerun` needs a SQLite store (re-running
/// writes runs).
///
/// # Errors
/// As [`report_job`]; [`ReportError::Store`] when the shared store cannot be read.
pub async fn report_job_at(
    db: &Path,
    opts: ReportOptions,
    mut progress: impl FnMut(&str) + Send,
) -> Result<ReportOutcome, ReportError> {
    let text = db.to_string_lossy().to_string();
    if !crate::store::postgres::is_postgres_url(&text) {
        let store = Store::open(db).await?;
        return report_job(&store, opts, progress).await;
    }
    let url = crate::store::postgres::redact(&text);
    if opts.rerun.is_some() {
        return Err(ReportError::Io {
            path: url,
            msg: "--rerun writes new runs, which memwall writes to a SQLite store only: re-run with --db FILE, then `memwall push --to` the shared store".into(),
        });
    }
    std::fs::create_dir_all(&opts.out).map_err(|e| io(&opts.out, e))?;
    let snap = opts.out.join(SHARED_SNAPSHOT);
    for suffix in ["", "-wal", "-shm"] {
        let p = PathBuf::from(format!("{}{suffix}", snap.display()));
        if p.exists() {
            std::fs::remove_file(&p).map_err(|e| io(&p, e))?;
        }
    }
    progress(&format!("copying {url} into {} (ids kept)", snap.display()));
    let (store, copied) = crate::store::postgres::snapshot(&text, &snap).await?;
    progress(&format!(
        "{} runs, {} prediction sheets read from {url}",
        copied.copied.len(),
        copied.sheets_copied
    ));
    let label = format!("{url} (read through its copy {SHARED_SNAPSHOT}, ids kept)");
    report_job_labeled(&store, &label, Path::new(&text), opts, progress).await
}

/// The report job: optionally re-runs a manifest ([`super::manifest`]), reads every
/// table, builds the report, draws its charts (PNG + SVG) and writes the folder;
/// with `verify`, runs the independent verifier on it and fails when a figure does
/// not match its row. `progress` gets one line per step.
///
/// # Errors
/// [`ReportError`] naming the file, table or row; a failed verification is
/// [`ReportError::Verify`] with the verifier's output.
pub async fn report_job(
    store: &Store,
    opts: ReportOptions,
    progress: impl FnMut(&str) + Send,
) -> Result<ReportOutcome, ReportError> {
    let label = store.path().display().to_string();
    report_job_labeled(store, &label, store.path(), opts, progress).await
}

/// [`report_job`] naming the store `label` in the report; the verifier reads
/// `verify_db` (the SQLite file, or the PostgreSQL URL the snapshot was taken from).
async fn report_job_labeled(
    store: &Store,
    label: &str,
    verify_db: &Path,
    opts: ReportOptions,
    mut progress: impl FnMut(&str) + Send,
) -> Result<ReportOutcome, ReportError> {
    let mut rerun = Vec::new();
    if let Some((manifest, exe)) = &opts.rerun {
        let m = super::manifest::Manifest::load(manifest)?;
        for e in &m.experiment {
            progress(&format!(
                "re-running {}: memwall {}",
                e.name,
                e.args.join(" ")
            ));
            let (m, exe, db, e2) = (
                manifest.clone(),
                exe.clone(),
                store.path().to_path_buf(),
                e.clone(),
            );
            let name = e.name.clone();
            tokio::task::spawn_blocking(move || super::manifest::run_one(&m, &exe, &db, &e2))
                .await
                .map_err(|err| ReportError::Rerun {
                    path: manifest.display().to_string(),
                    name,
                    msg: err.to_string(),
                })??;
            rerun.push(e.name.clone());
        }
    }
    progress("reading the store");
    let rows = report_rows(store).await?;
    let mut report = build(label, &rows)?;
    let dir = opts.out.clone();
    let charts_dir = dir.join("charts");
    std::fs::create_dir_all(&charts_dir).map_err(|e| io(&charts_dir, e))?;
    progress("drawing the charts");
    let mut files = Vec::new();
    let drawn = draw_charts(store, &rows, &charts_dir).await?;
    let mut svg = BTreeMap::new();
    for (section, chart, f) in drawn {
        let text = std::fs::read_to_string(&f.svg).map_err(|e| io(&f.svg, e))?;
        svg.insert(chart.stem.clone(), text);
        files.push(f.png);
        files.push(f.svg);
        if let Some(s) = report.sections.iter_mut().find(|s| s.id == section) {
            s.charts.push(chart);
        }
    }
    for (name, text) in [
        ("report.md", markdown(&report)),
        ("report.html", html(&report, &svg)),
        ("figures.json", figures_json(&report)),
    ] {
        let p = dir.join(name);
        crate::util::write_atomic(&p, text.as_bytes()).map_err(|e| io(&p, e))?;
        files.push(p);
    }
    let verify = if opts.verify {
        progress("running the independent verifier");
        Some(verify_job(verify_db, &dir).await?)
    } else {
        None
    };
    Ok(ReportOutcome {
        report,
        dir,
        files,
        rerun,
        verify,
    })
}

/// Runs the independent verifier (`python3 verify.py --db DB --report DIR`) on a
/// written report folder; returns its output when every check passed. `db` is a
/// SQLite file or a `postgres://` URL (read through `psql`).
///
/// # Errors
/// [`ReportError::Verify`] with the verifier's output when a check failed, or when
/// `python3` cannot be started.
pub async fn verify_job(db: &Path, dir: &Path) -> Result<String, ReportError> {
    let script = dir.join("verify.py");
    crate::util::write_atomic(&script, VERIFY_PY.as_bytes()).map_err(|e| io(&script, e))?;
    let (db, dir) = (db.to_path_buf(), dir.to_path_buf());
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .arg(&script)
            .arg("--db")
            .arg(&db)
            .arg("--report")
            .arg(&dir)
            .output()
    })
    .await
    .map_err(|e| ReportError::Verify(e.to_string()))?
    .map_err(|e| {
        ReportError::Verify(format!(
            "cannot start python3 ({e}): install Python 3 (the verifier needs only its standard library)"
        ))
    })?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(text)
    } else {
        Err(ReportError::Verify(format!(
            "checks failed ({}):\n{text}",
            out.status
        )))
    }
}

fn kv_verify(r: &KvRow) -> crate::experiments::evidence::kv::KvVerify {
    crate::experiments::evidence::kv::KvVerify {
        model: r.model_filename.clone(),
        cache_type: r.cache_type.clone(),
        n: r.n as u64,
        predicted_bytes_per_token: r.predicted_bytes_per_token,
        formula_bytes_per_token: r.formula_bytes_per_token as u64,
        state_n: r.state_n as u64,
        state_2n: r.state_2n as u64,
        measured_state_bytes_per_token: r.measured_state_bytes_per_token,
        metadata_bytes_per_token: r.metadata_bytes_per_token,
        measured_kv_bytes_per_token: r.measured_kv_bytes_per_token,
        ratio: r.ratio,
        rss_bytes_per_token: r.rss_bytes_per_token,
        rss_ratio: r.rss_ratio,
    }
}

/// A host name as a file-name part.
fn slug(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

type Drawn = (&'static str, ChartRef, ChartFiles);

async fn draw_charts(
    store: &Store,
    rows: &ReportRows,
    dir: &Path,
) -> Result<Vec<Drawn>, ReportError> {
    use crate::present::chart::app::{self, AppChart};
    let mut out: Vec<Drawn> = Vec::new();
    // One roofline per machine (hostname, CPU, cores, GPUs), over the rows that have
    // a place on it.
    let mut by_host: BTreeMap<String, (String, Vec<BenchRecord>)> = BTreeMap::new();
    for r in &rows.bench {
        if r.intensity.is_some() && r.achieved_gflops.is_some() && r.bandwidth_gbps.is_some() {
            let (label, file) = match rows.hosts.get(&r.run_id) {
                Some(k) => (k.label(), k.slug()),
                None => (r.hostname.clone(), slug(&r.hostname)),
            };
            by_host
                .entry(label)
                .or_insert_with(|| (file, Vec::new()))
                .1
                .push(r.clone());
        }
    }
    for (host, (file, v)) in &by_host {
        let stem = format!("roofline-{file}");
        let png = dir.join(format!("{stem}.png"));
        let svg = dir.join(format!("{stem}.svg"));
        app::png(&png, AppChart::Roofline, v).map_err(|e| chart_err(&stem, e))?;
        app::svg_file(&svg, AppChart::Roofline, v).map_err(|e| chart_err(&stem, e))?;
        let mut runs: Vec<i64> = v.iter().map(|r| r.run_id).collect();
        runs.dedup();
        runs.sort();
        runs.dedup();
        out.push((
            "bench",
            ChartRef {
                stem,
                title: format!("Roofline of {host}: every bench row at (FLOP/B, GFLOP/s)"),
                runs,
            },
            ChartFiles { png, svg },
        ));
    }
    // The evidence charts of each bench run, as `memwall bench` draws them.
    let mut by_run: BTreeMap<i64, Vec<BenchRecord>> = BTreeMap::new();
    for r in &rows.bench {
        by_run.entry(r.run_id).or_default().push(r.clone());
    }
    for (run, v) in &by_run {
        let streams = match v.iter().map(|r| r.stream_id).find(|id| *id > 0) {
            Some(id) => store.stream_siblings(id).await?,
            None => vec![],
        };
        let at = |t: i64| {
            streams
                .iter()
                .find(|x| x.threads == t && x.kernel == "triad")
                .map(|x| x.best_gbps)
        };
        let a = Analyses::for_rows(v, &at);
        for chart in &a.charts {
            let stem = format!("{}-run{run}", chart.stem());
            let path = dir.join(&stem);
            let drawn = match chart {
                EvidenceChart::DecodeVsDepth => crate::present::chart::decode_vs_depth(&path, v),
                EvidenceChart::DepthDecomposed => match &a.depth {
                    Some(d) => ev::depth(&path, d),
                    None => continue,
                },
                EvidenceChart::Batch => match &a.batch {
                    Some(b) => ev::batch(&path, b),
                    None => continue,
                },
                EvidenceChart::BatchRoofline {
                    peak_gflops,
                    peak_kind,
                } => match &a.batch {
                    Some(b) => ev::batch_roofline(&path, b, *peak_gflops, peak_kind),
                    None => continue,
                },
                EvidenceChart::Threads => match &a.threads {
                    Some(t) => ev::threads(&path, t),
                    None => continue,
                },
            }
            .map_err(|e| chart_err(&stem, e))?;
            let title = match chart {
                EvidenceChart::DecodeVsDepth => "Decode rate against depth, with its ceilings",
                EvidenceChart::DepthDecomposed => "Depth falloff: the KV-bytes part and the rest",
                EvidenceChart::Batch => "Per-token-read bandwidth against parallel sequences",
                EvidenceChart::BatchRoofline { .. } => "Batching on the roofline",
                EvidenceChart::Threads => "Implied bandwidth against threads, beside STREAM",
            };
            out.push((
                "evidence",
                ChartRef {
                    stem,
                    title: format!("{title} (bench run {run})"),
                    runs: vec![*run],
                },
                drawn,
            ));
        }
    }
    if !rows.kv.is_empty() {
        let kv: Vec<_> = rows.kv.iter().map(kv_verify).collect();
        let stem = "kv".to_string();
        let f = ev::kv(&dir.join(&stem), &kv).map_err(|e| chart_err(&stem, e))?;
        let mut runs: Vec<i64> = rows.kv.iter().map(|r| r.run_id).collect();
        runs.sort();
        runs.dedup();
        out.push((
            "evidence",
            ChartRef {
                stem,
                title: "KV bytes per token: measured against the formula".into(),
                runs,
            },
            f,
        ));
    }
    // Decode tokens per joule against each frontier's arms (per host and source),
    // from measured energy only; with none measured the chart says why.
    let mut fronts: BTreeMap<(&str, &str), Vec<&super::store::FrontierEnergyRow>> = BTreeMap::new();
    for r in &rows.frontier_energy {
        fronts
            .entry((&r.hostname, &r.source_file))
            .or_default()
            .push(r);
    }
    for ((host, source), v) in &fronts {
        use crate::experiments::frontier::chart::{EnergyPoint, tokens_per_joule_chart};
        // The latest cell of each arm.
        let mut latest: BTreeMap<&str, &super::store::FrontierEnergyRow> = BTreeMap::new();
        for r in v {
            latest.insert(&r.arm_quant, r);
        }
        let mut arms: Vec<_> = latest.into_values().collect();
        arms.sort_by_key(|r| -r.arm_streamed_bytes);
        let points: Vec<EnergyPoint> = arms
            .iter()
            .map(|r| {
                let why = match (r.energy_row_id, r.n_counters) {
                    (Some(_), _) => r.reason.clone(),
                    (None, 0) => Some(crate::experiments::frontier::table::NO_RECORDING.into()),
                    (None, _) => Some("the sampler recorded no phase for the tg test".into()),
                };
                EnergyPoint::new(
                    r.arm_quant.clone(),
                    r.run_id,
                    r.arm_streamed_bytes.max(0) as u64,
                    r.j_per_token,
                    r.tokens_per_wh,
                    why,
                )
            })
            .collect();
        let name = std::path::Path::new(source)
            .file_name()
            .map_or(source.to_string(), |n| n.to_string_lossy().into_owned());
        let stem = format!("frontier-tokens-per-joule-{}-{}", slug(host), slug(&name));
        let f = tokens_per_joule_chart(
            &dir.join(&stem),
            &points,
            &format!("Decode tokens per joule against the arms of {name} ({host})"),
        )
        .map_err(|e| chart_err(&stem, e))?;
        let mut runs: Vec<i64> = arms.iter().map(|r| r.run_id).collect();
        runs.sort();
        out.push((
            "frontier",
            ChartRef {
                stem,
                title: format!(
                    "Decode tokens per joule against the frontier's arms: {name} on {host}"
                ),
                runs,
            },
            f,
        ));
    }
    // Where a host has no frontier cells, bench rows of several weight formats of one
    // model size stand in as its arms.
    let hosts: std::collections::BTreeSet<&str> = rows
        .frontier_energy
        .iter()
        .map(|r| r.hostname.as_str())
        .collect();
    for (label, points) in crate::experiments::frontier::store::bench_energy_arms(store)
        .await
        .map_err(|e| chart_err("bench-tokens-per-joule", e))?
    {
        let host = label.split(": ").next().unwrap_or_default();
        if hosts.contains(host) {
            continue;
        }
        let stem = format!("bench-tokens-per-joule-{}", slug(&label));
        let f = crate::experiments::frontier::chart::tokens_per_joule_chart(
            &dir.join(&stem),
            &points,
            &format!("Decode tokens per joule by weight format: {label}"),
        )
        .map_err(|e| chart_err(&stem, e))?;
        let mut runs: Vec<i64> = points.iter().map(|p| p.run_id).collect();
        runs.sort();
        runs.dedup();
        out.push((
            "power",
            ChartRef {
                stem,
                title: format!(
                    "Decode tokens per joule against weight formats (bench rows as arms; no frontier cells on this host): {label}"
                ),
                runs,
            },
            f,
        ));
    }
    // The speculative charts, over every stored cell.
    let spec = crate::experiments::speculative::store::bench_rows(store, None).await?;
    if spec.iter().any(|r| r.k > 0 && !r.k_auto) {
        let files = crate::experiments::speculative::chart::write_charts(dir, &spec)
            .map_err(|e| chart_err("speculative", e))?;
        let mut runs: Vec<i64> = spec.iter().map(|r| r.run_id).collect();
        runs.sort();
        runs.dedup();
        for pair in files.chunks(2) {
            let (png, svg) = (pair[0].clone(), pair[1].clone());
            let stem = png
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let title = if stem == "acceptance" {
                "Acceptance rate by drafter, k and category".to_string()
            } else {
                format!(
                    "Measured against predicted speedup ({})",
                    stem.trim_start_matches("speedup-")
                )
            };
            out.push((
                "speculative",
                ChartRef {
                    stem,
                    title,
                    runs: runs.clone(),
                },
                ChartFiles { png, svg },
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::postgres::fixture::{HostFixture, host_store};
    use crate::store::postgres::push_job;
    use crate::testing::PgCluster;

    #[tokio::test]
    async fn a_report_of_a_shared_store_spans_two_hosts_that_share_a_hostname() {
        let Some(pg) = PgCluster::start() else { return };
        let url = pg.database("lab");
        let d = tempfile::tempdir().unwrap();
        // Two machines both called `vm` with the same CPU string, as the 2-core VM and
        // the H200 machine are: the H200 one has 16 cores and a GPU.
        let cpu = "Intel(R) Xeon(R) Processor";
        let gpu = HostFixture {
            cpu: cpu.into(),
            cores: 16,
            gpus: vec!["NVIDIA H200, 143771 MiB".into()],
            ..HostFixture::new("vm", 80.0, 52.0)
        };
        let small = HostFixture {
            cpu: cpu.into(),
            ..HostFixture::new("vm", 40.0, 20.0)
        };
        let hosts = [gpu, small];
        let labels = [
            "vm (Intel(R) Xeon(R) Processor, 16 cores, NVIDIA H200)",
            "vm (Intel(R) Xeon(R) Processor, 2 cores)",
        ];
        for (i, h) in hosts.iter().enumerate() {
            let p = d.path().join(format!("{i}.db"));
            host_store(&p, h).await;
            push_job(&p, &url, |_| {}).await.unwrap();
        }
        let out = d.path().join("report");
        let mut lines = Vec::new();
        let r = report_job_at(
            Path::new(&url),
            ReportOptions {
                out: out.clone(),
                rerun: None,
                verify: true,
            },
            |m| lines.push(m.to_string()),
        )
        .await
        .unwrap();
        assert!(lines.iter().any(|l| l.contains("18 runs")), "{lines:?}");
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains(&format!("Generated from the store `{url} (read through its copy {SHARED_SNAPSHOT}, ids kept)`")), "{md}");
        // Two machines, nine runs each, one roofline each.
        for l in labels {
            assert!(
                md.contains(&format!("Host `{l}`: 9 runs.")),
                "{l} not in\n{md}"
            );
            assert!(
                r.report
                    .sections
                    .iter()
                    .flat_map(|s| &s.charts)
                    .any(|c| c.title
                        == format!("Roofline of {l}: every bench row at (FLOP/B, GFLOP/s)")),
                "no roofline of {l}"
            );
        }
        let charts: Vec<&str> = r
            .report
            .sections
            .iter()
            .flat_map(|s| &s.charts)
            .filter(|c| c.stem.starts_with("roofline-"))
            .map(|c| c.stem.as_str())
            .collect();
        assert_eq!(
            charts,
            [
                "roofline-vm-Intel-R-Xeon-R-Processor-16-cores-NVIDIA-H200",
                "roofline-vm-Intel-R-Xeon-R-Processor-2-cores"
            ]
        );
        // The same model and test side by side, each at its own roof; the GPU machine
        // was pushed first, so its bench row is row 1 of the shared store.
        let test = crate::store::record::BenchRecord::example().test_label();
        for (h, (l, (id, placement))) in hosts.iter().zip(
            labels
                .iter()
                .zip([(1, "GPU, 99 layers"), (2, "CPU, 2 threads")]),
        ) {
            let ceiling = h.triad_gbps * 1e9 / h.bytes_per_step;
            let line = format!(
                "| {test} | {l} | {placement} | {:.2} | {:.2} | {:.1} | [^bench_results-{id}] |",
                h.tg_tps,
                ceiling,
                100.0 * h.tg_tps / ceiling
            );
            assert!(md.contains(&line), "{line} not in\n{md}");
        }
        // Each STREAM triad under its own machine.
        for (h, l) in hosts.iter().zip(labels) {
            let line = format!("| {l} | triad | 2 | {:.2} | — |", h.triad_gbps);
            assert!(md.contains(&line), "{line} not in\n{md}");
        }
        // The independent verifier grouped the same way from the raw rows, read from
        // the PostgreSQL database itself (through psql), not from the snapshot.
        let v = r.verify.unwrap();
        assert!(
            v.contains(&format!("store: {url}")),
            "{}",
            v.lines().next().unwrap_or("")
        );
        for check in [
            "hosts: a bench row's machine is its run's machine",
            "hosts: each printed host is its row's machine (hostname, CPU, cores, GPUs)",
            "hosts: the cross-host table holds exactly the tests measured on two or more machines",
            "hosts: one roofline per machine",
        ] {
            let line = v
                .lines()
                .find(|l| l.starts_with(check))
                .unwrap_or_else(|| panic!("{check} not in\n{v}"));
            let n: Vec<i64> = line[check.len()..]
                .split_whitespace()
                .map(|x| x.parse().unwrap())
                .collect();
            assert!(n[0] >= 1 && n[1] == 0, "{line}");
        }
    }

    #[tokio::test]
    async fn the_verifier_fails_a_report_that_merges_two_machines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("s.db");
        let mut gpu = HostFixture::new("vm", 80.0, 52.0);
        gpu.cores = 16;
        gpu.gpus = vec!["NVIDIA H200, 143771 MiB".into()];
        host_store(&p, &gpu).await;
        let store = crate::store::Store::open(&p).await.unwrap();
        let out = d.path().join("report");
        let ok = report_job(
            &store,
            ReportOptions {
                out: out.clone(),
                rerun: None,
                verify: true,
            },
            |_| {},
        )
        .await
        .unwrap();
        assert!(
            ok.verify
                .unwrap()
                .contains("hosts: one roofline per machine")
        );
        // Plant: the bench row claims the 2-core machine's facts while its run says
        // 16 cores and an H200 — the verifier names the row.
        sqlx::query("UPDATE bench_results SET cores_logical = 2, gpu_info = ''")
            .execute(store.pool())
            .await
            .unwrap();
        let err = verify_job(store.path(), &out)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "FAILED hosts: a bench row's machine is its run's machine: bench_results row 1"
            ),
            "{err}"
        );
        // Plant: a printed host cell that names the hostname alone.
        let md = std::fs::read_to_string(out.join("figures.json")).unwrap();
        let label = "vm (cpu of vm, 16 cores, NVIDIA H200)";
        assert!(md.contains(label), "{md}");
        std::fs::write(out.join("figures.json"), md.replace(label, "vm")).unwrap();
        sqlx::query(
            "UPDATE bench_results SET cores_logical = 16, gpu_info = 'NVIDIA H200, 143771 MiB'",
        )
        .execute(store.pool())
        .await
        .unwrap();
        let err = verify_job(store.path(), &out)
            .await
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("FAILED hosts: each printed host is its row's machine"),
            "{err}"
        );
    }
}
