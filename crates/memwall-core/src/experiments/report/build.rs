//! Rows → sections (pure). Each section's rows are sorted by their labels and then by
//! row id, so the same store always gives the same report.

use super::store::{ReportRows, ScoreRow};
use super::{Cell, Report, Row, Section, Src, Table, claim, num};
use crate::store::record::BenchRecord;
use std::collections::{BTreeMap, BTreeSet};

const NULL: &str = "not measured (NULL in the store)";

fn text(s: impl Into<String>) -> Cell {
    Cell::Text(s.into())
}

fn missing(reason: &str) -> Cell {
    Cell::Missing {
        reason: reason.into(),
    }
}

fn opt(x: f64) -> Option<f64> {
    Some(x).filter(|v| v.is_finite())
}

/// Builds the report's sections from `rows`; `db` names the store in the heading.
///
/// # Errors
/// [`super::ReportError::BadRow`] when a scorecard's JSON does not parse.
pub fn build(db: &str, rows: &ReportRows) -> Result<Report, super::ReportError> {
    let sections = vec![
        machines(rows),
        bench(rows),
        evidence(rows),
        frontier(rows),
        speculative(rows),
        predictions(&rows.scores)?,
        serving(rows),
        power(rows),
    ];
    Ok(Report {
        db: db.to_string(),
        sections,
    })
}

fn section(id: &'static str, title: &str, n_rows: usize, none: &str) -> Section {
    Section {
        id,
        title: title.into(),
        n_rows,
        text: vec![],
        tables: vec![],
        charts: vec![],
        not_measured: (n_rows == 0).then(|| none.to_string()),
    }
}

fn machines(rows: &ReportRows) -> Section {
    let mut s = section(
        "machines",
        "Machines and their measured roofs",
        rows.stream.len() + rows.peaks.len(),
        "no STREAM or compute-peak rows: run `memwall stream` and `memwall peak`",
    );
    // Machines are told apart by hostname, CPU, logical cores and GPUs (two machines
    // may both be called `vm`).
    let mut hosts: BTreeMap<String, usize> = BTreeMap::new();
    for r in &rows.runs {
        *hosts.entry(rows.host(r.id, &r.hostname)).or_default() += 1;
    }
    for (h, n) in &hosts {
        s.text.push(format!(
            "Host `{h}`: {n} run{}.",
            if *n == 1 { "" } else { "s" }
        ));
    }
    // The most recent row of each (host, kernel, threads).
    let mut latest = BTreeMap::new();
    for r in &rows.stream {
        latest.insert(
            (
                rows.host(r.run_id, &r.hostname),
                r.kernel.clone(),
                r.threads,
            ),
            r,
        );
    }
    if !latest.is_empty() {
        s.tables.push(Table {
            caption: "STREAM bandwidth (best rate of the latest run per kernel and thread count)"
                .into(),
            headers: vec![
                "host".into(),
                "kernel".into(),
                "threads".into(),
                "best GB/s".into(),
                "spec GB/s".into(),
            ],
            rows: latest
                .iter()
                .map(|((host, _, _), r)| Row {
                    src: Some(Src {
                        table: "stream_results",
                        row_id: r.id,
                        run_id: r.run_id,
                    }),
                    cells: vec![
                        text(host),
                        text(&r.kernel),
                        text(r.threads.to_string()),
                        num(Some(r.best_gbps), 1.0, 2, "best_gbps", NULL),
                        missing(
                            "no spec bandwidth stored: memwall does not probe the memory's rated speed",
                        ),
                    ],
                })
                .collect(),
        });
    }
    let mut latest = BTreeMap::new();
    for r in &rows.peaks {
        latest.insert(
            (rows.host(r.run_id, &r.hostname), r.kind.clone(), r.threads),
            r,
        );
    }
    if !latest.is_empty() {
        let old = "stored before peaks carried their bound";
        s.tables.push(Table {
            caption: "Compute peaks against their plausibility bound (cores × clock × lanes × ops × ports)"
                .into(),
            headers: vec![
                "host".into(),
                "kind".into(),
                "threads".into(),
                "measured GFLOP/s".into(),
                "bound GFLOP/s".into(),
                "measured ÷ bound %".into(),
            ],
            rows: latest
                .iter()
                .map(|((host, _, _), r)| Row {
                    src: Some(Src {
                        table: "peak_results",
                        row_id: r.id,
                        run_id: r.run_id,
                    }),
                    cells: vec![
                        text(host),
                        text(&r.kind),
                        text(r.threads.to_string()),
                        num(Some(r.gflops), 1.0, 1, "gflops", NULL),
                        num(r.bound_gflops, 1.0, 1, "bound_gflops", old),
                        num(
                            r.bound_gflops.map(|b| r.gflops / b),
                            100.0,
                            1,
                            "derived:peak_of_bound",
                            old,
                        ),
                    ],
                })
                .collect(),
        });
    }
    s
}

fn bench_src(r: &BenchRecord) -> Option<Src> {
    Some(Src {
        table: "bench_results",
        row_id: r.id,
        run_id: r.run_id,
    })
}

/// The label of the machine a bench row was measured on (its run's host).
fn bench_host(rows: &ReportRows, r: &BenchRecord) -> String {
    rows.host(r.run_id, &r.hostname)
}

fn sorted_bench(rows: &ReportRows) -> Vec<&BenchRecord> {
    let mut v: Vec<(String, &BenchRecord)> = rows
        .bench
        .iter()
        .map(|r| (bench_host(rows, r), r))
        .collect();
    v.sort_by(|(ha, a), (hb, b)| {
        (
            ha,
            &a.model_type,
            a.n_prompt,
            a.n_gen,
            a.n_depth,
            a.n_seqs,
            a.n_threads,
            a.id,
        )
            .cmp(&(
                hb,
                &b.model_type,
                b.n_prompt,
                b.n_gen,
                b.n_depth,
                b.n_seqs,
                b.n_threads,
                b.id,
            ))
    });
    v.into_iter().map(|(_, r)| r).collect()
}

/// Ridge point of a bench row's roof, FLOP per byte: peak ÷ bandwidth.
pub fn ridge(r: &BenchRecord) -> Option<f64> {
    r.peak_gflops
        .zip(r.bandwidth_gbps)
        .and_then(|(p, b)| opt(p / b))
        .filter(|x| *x > 0.0)
}

fn bench(rows: &ReportRows) -> Section {
    let mut s = section(
        "bench",
        "Bench: pp/tg rates under their ceilings",
        rows.bench.len(),
        "no bench rows: run `memwall bench`",
    );
    if rows.bench.is_empty() {
        return s;
    }
    s.text.push(
        "Decode ceiling = n_seqs × STREAM triad bandwidth ÷ mean bytes read per step; prefill \
         ceiling = the slower of the compute peak and the bandwidth. Achieved = tok/s ÷ ceiling. \
         Memory-bound: the test's arithmetic intensity lies below the ridge (peak ÷ bandwidth)."
            .into(),
    );
    let no_peak = "no compute peak stored for this row's roof";
    s.tables.push(Table {
        caption: "Every bench row".into(),
        headers: [
            "host",
            "model",
            "test",
            "threads",
            "tok/s",
            "± tok/s",
            "ceiling tok/s",
            "achieved %",
            "read ceiling tok/s",
            "achieved (read) %",
            "triad GB/s",
            "MB per step",
            "FLOP/B",
            "ridge FLOP/B",
            "memory-bound",
        ]
        .map(String::from)
        .to_vec(),
        rows: sorted_bench(rows)
            .into_iter()
            .map(|r| {
                let ridge = ridge(r);
                let decode_only = if r.is_decode() {
                    NULL
                } else {
                    "prefill: no read-kernel ceiling"
                };
                Row {
                    src: bench_src(r),
                    cells: vec![
                        text(bench_host(rows, r)),
                        text(&r.model_type),
                        text(r.test_label()),
                        text(r.n_threads.to_string()),
                        num(opt(r.avg_ts), 1.0, 2, "avg_ts", NULL),
                        num(opt(r.stddev_ts), 1.0, 2, "stddev_ts", NULL),
                        num(r.ceiling_ts, 1.0, 2, "ceiling_ts", NULL),
                        num(r.achieved, 100.0, 1, "achieved", NULL),
                        num(
                            r.decode_ceiling_ts_read,
                            1.0,
                            2,
                            "decode_ceiling_ts_read",
                            decode_only,
                        ),
                        num(r.achieved_read, 100.0, 1, "achieved_read", decode_only),
                        num(r.bandwidth_gbps, 1.0, 2, "bandwidth_gbps", NULL),
                        num(r.bytes_per_step, 1e-6, 2, "bytes_per_step", NULL),
                        num(r.intensity, 1.0, 3, "intensity", NULL),
                        num(ridge, 1.0, 3, "derived:ridge", no_peak),
                        match (ridge, r.intensity) {
                            (Some(ri), Some(i)) => claim("memory_bound", i < ri),
                            _ => missing(no_peak),
                        },
                    ],
                }
            })
            .collect(),
    });
    if let Some(t) = across_hosts(rows) {
        s.tables.push(t);
    }
    s
}

/// The same model and test measured on more than one machine, side by side: each
/// machine's rows with their threads and placement, tok/s, ceiling and achieved %, so
/// machines compare at their own roofs (a CPU's threads and a GPU's offload are
/// columns, not part of the match: they are how each machine ran it).
fn across_hosts(rows: &ReportRows) -> Option<Table> {
    let mut groups: BTreeMap<(String, String), Vec<&BenchRecord>> = BTreeMap::new();
    for r in &rows.bench {
        groups
            .entry((r.model_type.clone(), r.test_label()))
            .or_default()
            .push(r);
    }
    let mut out = Vec::new();
    for ((model, test), v) in groups {
        let mut v: Vec<(String, &BenchRecord)> =
            v.into_iter().map(|r| (bench_host(rows, r), r)).collect();
        let hosts: BTreeSet<&str> = v.iter().map(|(h, _)| h.as_str()).collect();
        if hosts.len() < 2 {
            continue;
        }
        v.sort_by(|(ha, a), (hb, b)| (ha, a.n_threads, a.id).cmp(&(hb, b.n_threads, b.id)));
        for (host, r) in v {
            let placement = if r.n_gpu_layers > 0 && !r.gpu_info.trim().is_empty() {
                format!("GPU, {} layers", r.n_gpu_layers)
            } else {
                format!("CPU, {} threads", r.n_threads)
            };
            out.push(Row {
                src: bench_src(r),
                cells: vec![
                    text(&model),
                    text(&test),
                    text(host),
                    text(placement),
                    num(opt(r.avg_ts), 1.0, 2, "avg_ts", NULL),
                    num(r.ceiling_ts, 1.0, 2, "ceiling_ts", NULL),
                    num(r.achieved, 100.0, 1, "achieved", NULL),
                ],
            });
        }
    }
    (!out.is_empty()).then(|| Table {
        caption: "The same model and test across hosts, each under its own roof".into(),
        headers: [
            "model",
            "test",
            "host",
            "placement",
            "tok/s",
            "ceiling tok/s",
            "achieved %",
        ]
        .map(String::from)
        .to_vec(),
        rows: out,
    })
}

/// Decode rows grouped by `key`, keeping the groups where `vary` takes more than one value.
fn sweeps<K: Ord>(
    rows: &[BenchRecord],
    key: impl Fn(&BenchRecord) -> K,
    vary: impl Fn(&BenchRecord) -> i64,
) -> Vec<&BenchRecord> {
    let mut groups: BTreeMap<K, Vec<&BenchRecord>> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.is_decode()) {
        groups.entry(key(r)).or_default().push(r);
    }
    let mut out = Vec::new();
    for (_, mut g) in groups {
        let distinct: BTreeSet<i64> = g.iter().map(|r| vary(r)).collect();
        if distinct.len() > 1 {
            g.sort_by_key(|r| (vary(r), r.id));
            out.extend(g);
        }
    }
    out
}

fn evidence(rows: &ReportRows) -> Section {
    let batch = sweeps(
        &rows.bench,
        |r| {
            (
                bench_host(rows, r),
                r.model_type.clone(),
                r.n_depth,
                r.n_threads,
                r.n_gen,
            )
        },
        |r| r.n_seqs,
    );
    let depth = sweeps(
        &rows.bench,
        |r| {
            (
                bench_host(rows, r),
                r.model_type.clone(),
                r.n_seqs,
                r.n_threads,
                r.n_gen,
            )
        },
        |r| r.n_depth,
    );
    let threads = sweeps(
        &rows.bench,
        |r| {
            (
                bench_host(rows, r),
                r.model_type.clone(),
                r.n_seqs,
                r.n_depth,
                r.n_gen,
            )
        },
        |r| r.n_threads,
    );
    let ids: BTreeSet<i64> = batch
        .iter()
        .chain(&depth)
        .chain(&threads)
        .map(|r| r.id)
        .collect();
    // One fit per machine: rows of two machines that share a hostname never mix.
    let mut per_host: BTreeMap<String, Vec<BenchRecord>> = BTreeMap::new();
    for r in &rows.bench {
        per_host
            .entry(bench_host(rows, r))
            .or_default()
            .push(r.clone());
    }
    let floors: Vec<(String, crate::experiments::evidence::floor::FloorFit)> = per_host
        .iter()
        .flat_map(|(h, v)| {
            crate::experiments::evidence::floor::analyze(v)
                .into_iter()
                .map(move |f| (h.clone(), f))
        })
        .collect();
    let ids: BTreeSet<i64> = ids
        .into_iter()
        .chain(floors.iter().flat_map(|(_, f)| f.row_ids()))
        .collect();
    let mut s = section(
        "evidence",
        "Evidence: depth, batching, threads, per-token floor and KV bytes",
        ids.len() + rows.kv.len(),
        "no sweep of depth, parallel sequences or threads, and no KV verification: run `memwall bench -d 0,512,2048`, `--n-seqs 1,2,4`, `-t 1,2`, and `memwall kv verify`",
    );
    let common = |r: &BenchRecord| vec![text(bench_host(rows, r)), text(&r.model_type)];
    if !batch.is_empty() {
        s.text.push(
            "Batching: per-token-read bandwidth = aggregate tok/s × the bytes one token reads \
             alone (weights + its KV). Above STREAM, the weights were read once per step and \
             shared across the batch (amortized)."
                .into(),
        );
        s.tables.push(Table {
            caption: "Batching amortizes the weight read".into(),
            headers: [
                "host",
                "model",
                "depth",
                "threads",
                "n_seqs",
                "aggregate tok/s",
                "per-token-read GB/s",
                "STREAM GB/s",
                "amortized",
            ]
            .map(String::from)
            .to_vec(),
            rows: batch
                .iter()
                .map(|r| {
                    let mut c = common(r);
                    c.extend([
                        text(r.n_depth.to_string()),
                        text(r.n_threads.to_string()),
                        text(r.n_seqs.to_string()),
                        num(opt(r.avg_ts), 1.0, 2, "avg_ts", NULL),
                        num(
                            r.implied_bandwidth_gbps,
                            1.0,
                            2,
                            "implied_bandwidth_gbps",
                            NULL,
                        ),
                        num(r.bandwidth_gbps, 1.0, 2, "bandwidth_gbps", NULL),
                        match (r.implied_bandwidth_gbps, r.bandwidth_gbps) {
                            (Some(i), Some(b)) => claim("amortized", i > b),
                            _ => missing(NULL),
                        },
                    ]);
                    Row {
                        src: bench_src(r),
                        cells: c,
                    }
                })
                .collect(),
        });
    }
    if !floors.is_empty() {
        s.text.push(
            "Per-token floor: batch-1 decode time against bytes per token, t = t0 + bytes ÷ BW_eff, \
             an ordinary least-squares line per host, weight format and placement (formats are \
             never mixed), one point per model file (its latest row). t0 is the fixed cost of a \
             step; BW_eff the bandwidth decode sustains beyond it. Each point is also predicted \
             from the fit of the others (leave-one-out; needs four models). `memwall calc \
             --device this` uses the fit for a model of the same format."
                .into(),
        );
        let by_id: BTreeMap<i64, &BenchRecord> = rows.bench.iter().map(|r| (r.id, r)).collect();
        s.tables.push(Table {
            caption: "Per-token floor: t = t0 + bytes ÷ BW_eff".into(),
            headers: [
                "host",
                "format",
                "placement",
                "model",
                "GB per token",
                "measured ms/token",
                "fit ms/token",
                "leave-one-out ms/token",
                "leave-one-out error %",
                "t0 ms",
                "BW_eff GB/s",
                "achieved % of STREAM ceiling",
            ]
            .map(String::from)
            .to_vec(),
            rows: floors
                .iter()
                .flat_map(|(host, f)| {
                    let by_id = &by_id;
                    f.points.iter().filter_map(move |p| {
                        let r = by_id.get(p.point.row_ids.first()?)?;
                        let loo_none = "needs four models of the format";
                        Some(Row {
                            src: bench_src(r),
                            cells: vec![
                                text(host),
                                text(&f.scope.quant),
                                text(&f.scope.placement),
                                text(&r.model_type),
                                num(r.bytes_per_step, 1e-9, 3, "bytes_per_step", NULL),
                                num(
                                    opt(p.point.seconds_per_token),
                                    1e3,
                                    3,
                                    "derived:seconds_per_token",
                                    NULL,
                                ),
                                num(
                                    opt(p.fit_seconds),
                                    1e3,
                                    3,
                                    "derived:floor_fit_seconds",
                                    NULL,
                                ),
                                num(p.loo_seconds, 1e3, 3, "derived:floor_loo_seconds", loo_none),
                                num(
                                    p.loo_error_pct,
                                    1.0,
                                    1,
                                    "derived:floor_loo_error_pct",
                                    loo_none,
                                ),
                                num(opt(f.t0_seconds), 1e3, 3, "derived:floor_t0_seconds", NULL),
                                num(
                                    f.bw_eff_gbps,
                                    1.0,
                                    0,
                                    "derived:floor_bw_eff_gbps",
                                    "the fitted slope is not positive",
                                ),
                                num(
                                    opt(p.achieved_pct),
                                    1.0,
                                    1,
                                    "derived:floor_achieved_pct",
                                    NULL,
                                ),
                            ],
                        })
                    })
                })
                .collect(),
        });
    }
    if !depth.is_empty() {
        s.tables.push(Table {
            caption: "Decode rate against depth (tokens already in the KV cache)".into(),
            headers: [
                "host",
                "model",
                "threads",
                "n_seqs",
                "depth",
                "tok/s",
                "ceiling tok/s",
                "achieved %",
            ]
            .map(String::from)
            .to_vec(),
            rows: depth
                .iter()
                .map(|r| {
                    let mut c = common(r);
                    c.extend([
                        text(r.n_threads.to_string()),
                        text(r.n_seqs.to_string()),
                        text(r.n_depth.to_string()),
                        num(opt(r.avg_ts), 1.0, 2, "avg_ts", NULL),
                        num(r.ceiling_ts, 1.0, 2, "ceiling_ts", NULL),
                        num(r.achieved, 100.0, 1, "achieved", NULL),
                    ]);
                    Row {
                        src: bench_src(r),
                        cells: c,
                    }
                })
                .collect(),
        });
    }
    if !threads.is_empty() {
        s.tables.push(Table {
            caption: "Implied bandwidth by thread count (tok/s × bytes per token)".into(),
            headers: [
                "host",
                "model",
                "depth",
                "threads",
                "tok/s",
                "implied GB/s",
                "STREAM GB/s of the roof",
            ]
            .map(String::from)
            .to_vec(),
            rows: threads
                .iter()
                .map(|r| {
                    let mut c = common(r);
                    c.extend([
                        text(r.n_depth.to_string()),
                        text(r.n_threads.to_string()),
                        num(opt(r.avg_ts), 1.0, 2, "avg_ts", NULL),
                        num(
                            r.implied_bandwidth_gbps,
                            1.0,
                            2,
                            "implied_bandwidth_gbps",
                            NULL,
                        ),
                        num(r.bandwidth_gbps, 1.0, 2, "bandwidth_gbps", NULL),
                    ]);
                    Row {
                        src: bench_src(r),
                        cells: c,
                    }
                })
                .collect(),
        });
    }
    if !rows.kv.is_empty() {
        let mut kv: Vec<_> = rows.kv.iter().collect();
        kv.sort_by(|a, b| {
            (&a.model_filename, &a.cache_type, a.id).cmp(&(&b.model_filename, &b.cache_type, b.id))
        });
        s.tables.push(Table {
            caption: "KV-cache bytes per token: the engine's own state size against the formula"
                .into(),
            headers: [
                "model",
                "cache",
                "n",
                "formula B/token",
                "predicted B/token",
                "measured KV B/token",
                "measured ÷ predicted",
            ]
            .map(String::from)
            .to_vec(),
            rows: kv
                .iter()
                .map(|r| Row {
                    src: Some(Src {
                        table: "kv_verify_results",
                        row_id: r.id,
                        run_id: r.run_id,
                    }),
                    cells: vec![
                        text(base(&r.model_filename)),
                        text(&r.cache_type),
                        text(r.n.to_string()),
                        num(
                            Some(r.formula_bytes_per_token as f64),
                            1.0,
                            0,
                            "formula_bytes_per_token",
                            NULL,
                        ),
                        num(
                            Some(r.predicted_bytes_per_token),
                            1.0,
                            1,
                            "predicted_bytes_per_token",
                            NULL,
                        ),
                        num(
                            Some(r.measured_kv_bytes_per_token),
                            1.0,
                            1,
                            "measured_kv_bytes_per_token",
                            NULL,
                        ),
                        num(Some(r.ratio), 1.0, 4, "ratio", NULL),
                    ],
                })
                .collect(),
        });
    }
    s
}

/// Whether the speed of each arm rises as its streamed bytes fall, per (host, source,
/// settings): arms sorted by streamed bytes, largest first, have non-decreasing tok/s.
pub fn speed_monotone(vals: &[(i64, f64)]) -> bool {
    let mut v = vals.to_vec();
    v.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.total_cmp(&b.1)));
    v.windows(2).all(|w| w[1].1 >= w[0].1)
}

fn frontier(rows: &ReportRows) -> Section {
    let mut s = section(
        "frontier",
        "The quantization frontier",
        rows.frontier.len(),
        "no frontier cells: run `memwall frontier`",
    );
    if rows.frontier.is_empty() {
        return s;
    }
    let mut v: Vec<(String, &super::store::FrontierRow)> = rows
        .frontier
        .iter()
        .map(|r| (rows.host(r.run_id, &r.hostname), r))
        .collect();
    v.sort_by(|(ha, a), (hb, b)| {
        (ha, &a.source_file, &a.measure, -a.arm_streamed_bytes, a.id).cmp(&(
            hb,
            &b.source_file,
            &b.measure,
            -b.arm_streamed_bytes,
            b.id,
        ))
    });
    s.tables.push(Table {
        caption: "Frontier cells (speed: decode tok/s; ppl: perplexity; task: accuracy 0..1)"
            .into(),
        headers: [
            "host",
            "source",
            "arm",
            "measure",
            "streamed MB",
            "value",
            "±",
        ]
        .map(String::from)
        .to_vec(),
        rows: v
            .iter()
            .map(|(host, r)| Row {
                src: Some(Src {
                    table: "frontier_cells",
                    row_id: r.id,
                    run_id: r.run_id,
                }),
                cells: vec![
                    text(host),
                    text(base(&r.source_file)),
                    text(&r.arm_quant),
                    text(&r.measure),
                    num(
                        Some(r.arm_streamed_bytes as f64),
                        1e-6,
                        2,
                        "arm_streamed_bytes",
                        NULL,
                    ),
                    num(r.value, 1.0, 4, "value", NULL),
                    num(
                        r.value_unc,
                        1.0,
                        4,
                        "value_unc",
                        "no uncertainty for this measure",
                    ),
                ],
            })
            .collect(),
    });
    if let Some(t) = frontier_energy(rows) {
        s.tables.push(t);
    }
    let mut groups: BTreeMap<(String, String, String), Vec<(i64, f64)>> = BTreeMap::new();
    for r in rows.frontier.iter().filter(|r| r.measure == "speed") {
        if let Some(v) = r.value {
            groups
                .entry((
                    rows.host(r.run_id, &r.hostname),
                    r.source_file.clone(),
                    r.config_key.clone(),
                ))
                .or_default()
                .push((r.arm_streamed_bytes, v));
        }
    }
    let groups: Vec<_> = groups.into_iter().filter(|(_, v)| v.len() > 1).collect();
    if !groups.is_empty() {
        s.tables.push(Table {
            caption: "Claim: decode speed rises as the bytes streamed per token fall".into(),
            headers: ["host", "source", "settings", "arms", "holds"]
                .map(String::from)
                .to_vec(),
            rows: groups
                .iter()
                .map(|((h, src, key), v)| Row {
                    src: None,
                    cells: vec![
                        text(h),
                        text(base(src)),
                        text(key),
                        text(v.len().to_string()),
                        claim("frontier_speed_monotone", speed_monotone(v)),
                    ],
                })
                .collect(),
        });
    }
    s
}

/// Each speed cell's decode energy beside its tok/s and bytes: J/token and tokens per
/// Wh from the `row_energy` row the live sampler wrote in the cell's transaction;
/// — with the sampler's reason where none was measured.
fn frontier_energy(rows: &ReportRows) -> Option<Table> {
    use crate::experiments::frontier::table::NO_RECORDING;
    if rows.frontier_energy.is_empty() {
        return None;
    }
    let mut v: Vec<_> = rows.frontier_energy.iter().collect();
    v.sort_by(|a, b| {
        (&a.hostname, &a.source_file, -a.arm_streamed_bytes, a.id).cmp(&(
            &b.hostname,
            &b.source_file,
            -b.arm_streamed_bytes,
            b.id,
        ))
    });
    Some(Table {
        caption: "Decode energy per arm (speed cells; tokens per Wh = 3600 ÷ J/token)".into(),
        headers: [
            "host",
            "source",
            "arm",
            "streamed MB",
            "tg tok/s",
            "tg J/token",
            "tg tokens per Wh",
            "mean power W",
            "energy source",
        ]
        .map(String::from)
        .to_vec(),
        rows: v
            .iter()
            .map(|r| {
                let mb = format!("{:.2}", r.arm_streamed_bytes as f64 * 1e-6);
                match r.energy_row_id {
                    Some(row_id) => {
                        let why = r.reason.clone().unwrap_or_else(|| NULL.to_string());
                        Row {
                            src: Some(Src {
                                table: "row_energy",
                                row_id,
                                run_id: r.run_id,
                            }),
                            cells: vec![
                                text(&r.hostname),
                                text(base(&r.source_file)),
                                text(&r.arm_quant),
                                text(mb),
                                text(r.value.map_or("—".into(), |v| format!("{v:.2}"))),
                                num(r.j_per_token, 1.0, 4, "j_per_token", &why),
                                num(r.tokens_per_wh, 1.0, 0, "tokens_per_wh", &why),
                                num(r.mean_power_w, 1.0, 1, "mean_power_w", &why),
                                match r.energy_source.as_deref() {
                                    Some(x) if !x.is_empty() => text(x),
                                    _ => missing(&why),
                                },
                            ],
                        }
                    }
                    None => {
                        let why = if r.n_counters > 0 {
                            "the sampler recorded no phase for the tg test"
                        } else {
                            NO_RECORDING
                        };
                        Row {
                            src: Some(Src {
                                table: "frontier_cells",
                                row_id: r.id,
                                run_id: r.run_id,
                            }),
                            cells: vec![
                                text(&r.hostname),
                                text(base(&r.source_file)),
                                text(&r.arm_quant),
                                text(mb),
                                num(r.value, 1.0, 2, "value", NULL),
                                missing(why),
                                missing(why),
                                missing(why),
                                missing(why),
                            ],
                        }
                    }
                }
            })
            .collect(),
    })
}

fn speculative(rows: &ReportRows) -> Section {
    let mut s = section(
        "speculative",
        "Speculative decoding: gate, bench and cost model",
        rows.gates.len() + rows.spec.len(),
        "no speculative gate or bench rows: run `memwall spec gate` then `memwall spec bench`",
    );
    if !rows.gates.is_empty() {
        s.tables.push(Table {
            caption: "Correctness gates (greedy: N/N identical outputs)".into(),
            headers: [
                "gate",
                "mode",
                "target",
                "drafter",
                "k",
                "identical",
                "prompts",
                "passed",
            ]
            .map(String::from)
            .to_vec(),
            rows: rows
                .gates
                .iter()
                .map(|g| Row {
                    src: Some(Src {
                        table: "spec_gates",
                        row_id: g.id,
                        run_id: g.run_id,
                    }),
                    cells: vec![
                        text(g.id.to_string()),
                        text(&g.mode),
                        text(base(&g.target_file)),
                        text(&g.drafter_key),
                        text(g.k.to_string()),
                        text(g.n_identical.to_string()),
                        text(g.n_prompts.to_string()),
                        claim("gate_passed", g.passed),
                    ],
                })
                .collect(),
        });
    }
    if !rows.spec.is_empty() {
        let mut v: Vec<_> = rows.spec.iter().collect();
        v.sort_by(|a, b| {
            (a.run_id, &a.category, &a.drafter_kind, a.k, a.id).cmp(&(
                b.run_id,
                &b.category,
                &b.drafter_kind,
                b.k,
                b.id,
            ))
        });
        s.text.push(
            "Speedup = speculative tok/s ÷ target-only tok/s of the same repetition (mean over \
             repetitions); a speedup is stored only with the passed greedy gate that unlocks it. \
             Cost-model error = (measured − predicted) ÷ predicted."
                .into(),
        );
        let target_only = "target-only decoding (the baseline)";
        s.tables.push(Table {
            caption: "Speculative bench cells".into(),
            headers: [
                "run",
                "target",
                "category",
                "drafter",
                "k",
                "tok/s",
                "speedup ×",
                "predicted ×",
                "cost-model error %",
                "acceptance %",
                "gate",
            ]
            .map(String::from)
            .to_vec(),
            rows: v
                .iter()
                .map(|r| {
                    let baseline = r.k == 0 && r.decision.is_none();
                    let why = match (&r.decision, baseline) {
                        (Some(d), _) => format!("decision, not a measurement: {d}"),
                        (None, true) => target_only.to_string(),
                        _ => NULL.to_string(),
                    };
                    let k = match (&r.decision, r.k_auto, r.k) {
                        (Some(d), _, _) => format!("auto→{d}"),
                        (None, true, k) => format!("auto→{k}"),
                        (None, false, k) => k.to_string(),
                    };
                    Row {
                        src: Some(Src {
                            table: "spec_bench",
                            row_id: r.id,
                            run_id: r.run_id,
                        }),
                        cells: vec![
                            text(r.run_id.to_string()),
                            text(base(&r.target_file)),
                            text(&r.category),
                            text(&r.drafter_key),
                            text(k),
                            num(r.tps_mean, 1.0, 2, "tps_mean", &why),
                            num(r.speedup_mean, 1.0, 3, "speedup_mean", &why),
                            num(r.predicted_speedup, 1.0, 3, "predicted_speedup", &why),
                            num(
                                r.speedup_mean
                                    .zip(r.predicted_speedup)
                                    .map(|(m, p)| (m - p) / p),
                                100.0,
                                1,
                                "derived:cost_model_error",
                                &why,
                            ),
                            num(r.acceptance_rate, 100.0, 1, "acceptance_rate", &why),
                            match r.gate_id {
                                Some(g) => text(g.to_string()),
                                None => missing(&why),
                            },
                        ],
                    }
                })
                .collect(),
        });
    }
    s
}

fn predictions(scores: &[ScoreRow]) -> Result<Section, super::ReportError> {
    let mut s = section(
        "predictions",
        "Predictions scored",
        scores.len(),
        "no scored prediction sheet: run `memwall predict record`, the bench, then `memwall predict score`",
    );
    let mut out = Vec::new();
    for sc in scores {
        let card: crate::experiments::predict::Scorecard = serde_json::from_str(&sc.result_json)
            .map_err(|e| super::ReportError::BadRow {
                table: "prediction_scores",
                row_id: sc.sheet_id,
                problem: format!(
                    "result_json does not parse ({e}): re-score the sheet with `memwall predict score`"
                ),
            })?;
        let src = Src {
            table: "prediction_scores",
            row_id: sc.sheet_id,
            run_id: sc.run_id,
        };
        for (i, t) in card.tests.iter().enumerate() {
            let col = |f: &str| format!("result_json:tests.{i}.{f}");
            out.push(Row {
                src: Some(src.clone()),
                cells: vec![
                    text(sc.sheet_id.to_string()),
                    text(sc.run_id.to_string()),
                    text(base(&t.model_filename)),
                    text(&t.test),
                    text(t.n_threads.to_string()),
                    num(
                        t.predicted_tps,
                        1.0,
                        2,
                        &col("predicted_tps"),
                        "the sheet had no ceiling for this test",
                    ),
                    num(
                        t.measured_tps,
                        1.0,
                        2,
                        &col("measured_tps"),
                        "the run has no such row",
                    ),
                    num(t.error_pct, 1.0, 1, &col("error_pct"), "needs both figures"),
                ],
            });
        }
    }
    if !out.is_empty() {
        s.tables.push(Table {
            caption: "Predicted against measured (error = (measured − predicted) ÷ predicted)"
                .into(),
            headers: [
                "sheet",
                "run",
                "model",
                "test",
                "threads",
                "predicted tok/s",
                "measured tok/s",
                "error %",
            ]
            .map(String::from)
            .to_vec(),
            rows: out,
        });
    }
    Ok(s)
}

fn serving(rows: &ReportRows) -> Section {
    let mut s = section(
        "serving",
        "Serving and load tests (TTFT, TPOT, ITL, E2EL)",
        rows.loadtest.len(),
        "no load test stored: run `memwall serve` and `memwall loadtest --url URL`",
    );
    if rows.loadtest.is_empty() {
        return s;
    }
    s.text.push(
        "vLLM's definitions: TTFT = send → first token; TPOT = (E2EL − TTFT) ÷ (output tokens − 1) \
         per request; ITL = every gap between streamed chunks; E2EL = send → last byte. Medians \
         over the completed requests of each load level. Implied bandwidth = output tok/s × bytes \
         per token of the served model; above STREAM the weights were shared across the batch."
            .into(),
    );
    let mut v: Vec<(String, &super::store::LoadtestRow)> = rows
        .loadtest
        .iter()
        .map(|r| (rows.host(r.run_id, &r.hostname), r))
        .collect();
    v.sort_by(|(ha, a), (hb, b)| (ha, &a.url, a.run_id, a.id).cmp(&(hb, &b.url, b.run_id, b.id)));
    s.tables.push(Table {
        caption: "Load test points".into(),
        headers: [
            "host",
            "server",
            "mode",
            "load",
            "in/out tokens",
            "completed/sent",
            "rejected",
            "output tok/s",
            "TTFT p50 ms",
            "TPOT p50 ms",
            "ITL p50 ms",
            "E2EL p50 ms",
            "goodput req/s",
            "implied GB/s",
            "% of the server's roof",
        ]
        .map(String::from)
        .to_vec(),
        rows: v
            .iter()
            .map(|(host, r)| {
                let load = match (r.concurrency, r.rate_rps) {
                    (Some(c), _) => format!("concurrency {c}"),
                    (None, Some(q)) => format!("{q} req/s"),
                    _ => "—".into(),
                };
                let no_bw = r.bandwidth_note.clone().unwrap_or_else(|| NULL.to_string());
                Row {
                    src: Some(Src {
                        table: "loadtest_points",
                        row_id: r.id,
                        run_id: r.run_id,
                    }),
                    cells: vec![
                        text(host),
                        text(format!(
                            "{} {}",
                            r.server_model.as_deref().unwrap_or(&r.url),
                            r.endpoint
                        )),
                        text(&r.mode),
                        text(load),
                        text(format!(
                            "{}/{}{}",
                            r.input_tokens,
                            r.output_tokens,
                            if r.shared_prefix_tokens > 0 {
                                format!(" (shared prefix {})", r.shared_prefix_tokens)
                            } else {
                                String::new()
                            }
                        )),
                        text(format!("{}/{}", r.n_completed, r.n_sent)),
                        text(r.n_rejected.to_string()),
                        num(
                            opt(r.output_throughput_tps),
                            1.0,
                            1,
                            "output_throughput_tps",
                            NULL,
                        ),
                        num(r.ttft_median_ms, 1.0, 1, "ttft_median_ms", NULL),
                        num(r.tpot_median_ms, 1.0, 2, "tpot_median_ms", NULL),
                        num(r.itl_median_ms, 1.0, 2, "itl_median_ms", NULL),
                        num(r.e2el_median_ms, 1.0, 1, "e2el_median_ms", NULL),
                        num(r.goodput_rps, 1.0, 2, "goodput_rps", "no SLO given"),
                        num(r.implied_gbps, 1.0, 1, "implied_gbps", &no_bw),
                        num(r.pct_of_stream, 1.0, 1, "pct_of_stream", &no_bw),
                    ],
                }
            })
            .collect(),
    });
    s
}

fn power(rows: &ReportRows) -> Section {
    let mut s = section(
        "power",
        "Live power and energy per token",
        rows.energy.len(),
        "no live sampler rows stored: `memwall bench` records them beside every run from this version on",
    );
    if rows.energy.is_empty() {
        return s;
    }
    s.text.push(
        "The live sampler (≥ 10 Hz) beside each bench row's phase: mean power, J/token = \
         energy ÷ tokens of the phase, tokens per Wh = 3600 ÷ J/token, the counter that gave \
         the energy (RAPL package/DRAM, NVML board energy), peak temperature, and the live DRAM \
         bandwidth where an uncore counter is readable, beside the bandwidth the rate implies. \
         A counter the machine does not expose prints — with its reason."
            .into(),
    );
    let mut v: Vec<(String, &super::store::EnergyRow)> = rows
        .energy
        .iter()
        .map(|r| (rows.host(r.run_id, &r.hostname), r))
        .collect();
    v.sort_by(|(ha, a), (hb, b)| (ha, &a.model_type, a.row_id).cmp(&(hb, &b.model_type, b.row_id)));
    s.tables.push(Table {
        caption: "Energy per token".into(),
        headers: [
            "host",
            "model",
            "test",
            "tok/s",
            "mean power W",
            "J/token",
            "tokens per Wh",
            "energy source",
            "peak °C",
            "live DRAM GB/s",
            "implied GB/s",
        ]
        .map(String::from)
        .to_vec(),
        rows: v
            .iter()
            .map(|(host, r)| {
                let why = r.reason.clone().unwrap_or_else(|| NULL.to_string());
                Row {
                    src: Some(Src {
                        table: "row_energy",
                        row_id: r.row_id,
                        run_id: r.run_id,
                    }),
                    cells: vec![
                        text(host),
                        text(&r.model_type),
                        text(crate::store::record::test_label(
                            r.n_prompt, r.n_gen, r.n_seqs, r.n_depth,
                        )),
                        text(format!("{:.2}", r.avg_ts)),
                        num(r.mean_power_w, 1.0, 1, "mean_power_w", &why),
                        num(r.j_per_token, 1.0, 4, "j_per_token", &why),
                        num(r.tokens_per_wh, 1.0, 0, "tokens_per_wh", &why),
                        if r.energy_source.is_empty() {
                            missing(&why)
                        } else {
                            text(&r.energy_source)
                        },
                        num(
                            r.peak_temp_c,
                            1.0,
                            1,
                            "peak_temp_c",
                            "no temperature sensor readable",
                        ),
                        num(
                            r.live_dram_gbps,
                            1.0,
                            1,
                            "live_dram_gbps",
                            "no uncore memory counter readable",
                        ),
                        num(
                            r.implied_bandwidth_gbps,
                            1.0,
                            1,
                            "implied_bandwidth_gbps",
                            NULL,
                        ),
                    ],
                }
            })
            .collect(),
    });
    s
}

/// The file name of a stored path (`/x/y/m.gguf` → `m.gguf`).
fn base(p: &str) -> String {
    std::path::Path::new(p)
        .file_name()
        .map_or_else(|| p.to_string(), |f| f.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests;
