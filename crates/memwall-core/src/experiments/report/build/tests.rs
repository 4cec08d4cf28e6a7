//! Tests of the report's sections.

use super::*;
use crate::experiments::report::render::{figures, markdown};
use crate::experiments::report::store::{RunRow, StreamRow};
use crate::store::host::HostKey;

fn rows() -> ReportRows {
    let tg = BenchRecord {
        id: 7,
        run_id: 3,
        n_prompt: 0,
        n_gen: 128,
        avg_ts: 20.0,
        bandwidth_gbps: Some(40.0),
        bytes_per_step: Some(1.6e9),
        ceiling_ts: Some(25.0),
        achieved: Some(0.8),
        peak_gflops: Some(400.0),
        intensity: Some(1.0),
        decode_ceiling_ts_read: None,
        achieved_read: None,
        ..BenchRecord::example()
    };
    ReportRows {
        runs: vec![RunRow {
            id: 3,
            kind: "bench".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            hostname: "h".into(),
            cpu_info: "cpu".into(),
            cores_logical: 2,
            host_json: "{}".into(),
        }],
        hosts: [(3, HostKey::new("h", "cpu", 2, ""))].into(),
        stream: vec![StreamRow {
            id: 1,
            run_id: 2,
            hostname: "h".into(),
            kernel: "triad".into(),
            threads: 2,
            best_gbps: 40.0,
        }],
        bench: vec![tg],
        ..ReportRows::default()
    }
}

#[test]
fn a_changed_row_changes_the_report_and_every_figure_names_its_row() {
    let a = build("m.db", &rows()).unwrap();
    let mut r = rows();
    r.bench[0].avg_ts = 21.5;
    let b = build("m.db", &r).unwrap();
    let (ma, mb) = (markdown(&a), markdown(&b));
    assert_ne!(ma, mb);
    assert!(ma.contains("| 20.00 |") && mb.contains("| 21.50 |"), "{mb}");
    // The same rows give the same bytes.
    assert_eq!(ma, markdown(&build("m.db", &rows()).unwrap()));
    // avg_ts = 20 tok/s, printed in two tables (bench; no sweep → no evidence table).
    let f = figures(&a);
    let avg: Vec<_> = f
        .iter()
        .filter(|f| matches!(&f.cell, Cell::Num { column, .. } if column == "avg_ts"))
        .collect();
    assert_eq!(avg.len(), 1);
    assert_eq!(
        avg[0].src,
        Some(Src {
            table: "bench_results",
            row_id: 7,
            run_id: 3
        })
    );
    // Ridge 400 GFLOP/s ÷ 40 GB/s = 10 FLOP/B (hand); intensity 1 < 10: memory-bound.
    let ridge = f
        .iter()
        .find(|f| matches!(&f.cell, Cell::Num { column, .. } if column == "derived:ridge"))
        .unwrap();
    assert_eq!(ridge.cell.text(), "10.000");
    assert!(f.iter().any(|f| matches!(&f.cell,
            Cell::Claim { claim, value: true, .. } if claim == "memory_bound")));
    assert!(ma.contains("[^bench_results-7]: bench_results row 7, run 3"));
}

#[test]
fn a_value_not_measured_prints_a_dash_with_its_reason_never_nan() {
    let mut r = rows();
    r.bench[0].ceiling_ts = None;
    r.bench[0].achieved = None;
    r.bench[0].peak_gflops = None;
    let md = markdown(&build("m.db", &r).unwrap());
    for bad in ["NaN", "inf", "undefined", "| |"] {
        assert!(!md.contains(bad), "{bad} in\n{md}");
    }
    assert!(md.contains("—: not measured (NULL in the store)."), "{md}");
    assert!(
        md.contains("—: no compute peak stored for this row's roof."),
        "{md}"
    );
    assert!(
            md.contains("**Not measured:** no load test stored: run `memwall serve` and `memwall loadtest --url URL`")
        );
    assert!(md.contains("**Not measured:** no frontier cells"));
}

#[test]
fn the_same_test_on_two_hosts_sits_side_by_side() {
    let mut r = rows();
    assert!(!markdown(&build("m.db", &r).unwrap()).contains("across hosts"));
    // Run 4: another machine with the same hostname, told apart by its cores and GPU.
    r.hosts
        .insert(4, HostKey::new("h", "cpu", 16, "NVIDIA H200, 143771 MiB"));
    r.bench.push(BenchRecord {
        id: 8,
        run_id: 4,
        avg_ts: 30.0,
        ceiling_ts: Some(40.0),
        achieved: Some(0.75),
        ..r.bench[0].clone()
    });
    let md = markdown(&build("m.db", &r).unwrap());
    assert!(md.contains("**The same model and test across hosts, each under its own roof**"));
    let label = r.bench[0].test_label();
    assert!(
            md.contains(&format!(
                "| {label} | h (cpu, 16 cores, NVIDIA H200) | CPU, 2 threads | 30.00 | 40.00 | 75.0 | [^bench_results-8] |"
            )),
            "{md}"
        );
    assert!(
            md.contains(&format!(
                "| {label} | h (cpu, 2 cores) | CPU, 2 threads | 20.00 | 25.00 | 80.0 | [^bench_results-7] |"
            )),
            "{md}"
        );
    // The same machine twice is one host: no side-by-side table.
    r.hosts.insert(4, HostKey::new("h", "cpu", 2, ""));
    assert!(!markdown(&build("m.db", &r).unwrap()).contains("across hosts"));
}

#[test]
fn load_tests_and_energy_rows_fill_their_sections_and_a_missing_counter_says_why() {
    use super::super::store::{EnergyRow, LoadtestRow};
    let mut r = rows();
    let md = markdown(&build("m.db", &r).unwrap());
    assert!(md.contains("no load test stored"), "{md}");
    assert!(md.contains("no live sampler rows stored"), "{md}");
    r.loadtest.push(LoadtestRow {
        id: 5,
        run_id: 9,
        hostname: "h".into(),
        url: "http://127.0.0.1:8080".into(),
        endpoint: "/v1/chat/completions".into(),
        mode: "closed".into(),
        concurrency: Some(4),
        rate_rps: None,
        input_tokens: 128,
        output_tokens: 64,
        shared_prefix_tokens: 0,
        n_sent: 20,
        n_completed: 19,
        n_rejected: 1,
        output_throughput_tps: 88.25,
        ttft_median_ms: Some(120.5),
        tpot_median_ms: Some(41.25),
        itl_median_ms: Some(40.5),
        e2el_median_ms: Some(2700.0),
        goodput_rps: None,
        implied_gbps: None,
        pct_of_stream: None,
        bandwidth_note: Some("the server named no model file".into()),
        server_model: Some("qwen".into()),
    });
    r.energy.push(EnergyRow {
        row_id: 7,
        run_id: 3,
        hostname: "h".into(),
        model_type: "qwen2 494M Q4_K_M".into(),
        n_prompt: 0,
        n_gen: 128,
        n_seqs: 1,
        n_depth: 0,
        avg_ts: 20.0,
        samples: 30,
        mean_power_w: None,
        energy_j: None,
        j_per_token: None,
        tokens_per_wh: None,
        energy_source: "none".into(),
        reason: Some("RAPL not readable in this VM".into()),
        peak_temp_c: None,
        throttled: None,
        live_dram_gbps: None,
        gpu_mem_util_pct: None,
        implied_bandwidth_gbps: Some(32.0),
    });
    let md = markdown(&build("m.db", &r).unwrap());
    assert!(
            md.contains("| h | qwen /v1/chat/completions | closed | concurrency 4 | 128/64 | 19/20 | 1 | 88.2 | 120.5 | 41.25 | 40.50 | 2700.0 | — | — | — | [^loadtest_points-5] |")
                || md.contains("| h | qwen /v1/chat/completions | closed | concurrency 4 | 128/64 | 19/20 | 1 | 88.3 | 120.5 | 41.25 | 40.50 | 2700.0 | — | — | — | [^loadtest_points-5] |"),
            "{md}"
        );
    assert!(md.contains("the server named no model file"), "{md}");
    assert!(
            md.contains("| h (cpu, 2 cores) | qwen2 494M Q4_K_M | tg128 | 20.00 | — | — | — | none | — | — | 32.0 | [^row_energy-7] |"),
            "{md}"
        );
    assert!(md.contains("RAPL not readable in this VM"), "{md}");
}

#[test]
fn frontier_speed_cells_show_their_decode_energy_or_why_not() {
    use super::super::store::{FrontierEnergyRow, FrontierRow};
    use crate::experiments::frontier::table::NO_RECORDING;
    let mut r = rows();
    let cell = |id: i64, run_id: i64, quant: &str, bytes: i64| FrontierRow {
        id,
        run_id,
        hostname: "h".into(),
        source_file: "/m/src.gguf".into(),
        arm_quant: quant.into(),
        arm_streamed_bytes: bytes,
        measure: "speed".into(),
        config_key: "k".into(),
        value: Some(64.0),
        value_unc: Some(0.5),
    };
    r.frontier = vec![
        cell(1, 10, "Q8_0", 800_000_000),
        cell(2, 11, "Q4_K_M", 450_000_000),
        cell(3, 12, "Q2_K", 300_000_000),
    ];
    let energy = |id: i64, run_id: i64, quant: &str, bytes: i64| FrontierEnergyRow {
        id,
        run_id,
        hostname: "h".into(),
        source_file: "/m/src.gguf".into(),
        arm_quant: quant.into(),
        arm_streamed_bytes: bytes,
        value: Some(64.0),
        energy_row_id: None,
        j_per_token: None,
        tokens_per_wh: None,
        mean_power_w: None,
        energy_source: None,
        reason: None,
        n_counters: 0,
    };
    // 0.78125 J/token → 3600 / 0.78125 = 4608 tokens per Wh.
    r.frontier_energy = vec![
        FrontierEnergyRow {
            energy_row_id: Some(21),
            j_per_token: Some(0.78125),
            tokens_per_wh: Some(4608.0),
            mean_power_w: Some(50.0),
            energy_source: Some("RAPL package".into()),
            n_counters: 5,
            ..energy(1, 10, "Q8_0", 800_000_000)
        },
        FrontierEnergyRow {
            energy_row_id: Some(23),
            energy_source: Some(String::new()),
            reason: Some("cpu_package_energy: RAPL not readable in this VM".into()),
            n_counters: 5,
            ..energy(2, 11, "Q4_K_M", 450_000_000)
        },
        energy(3, 12, "Q2_K", 300_000_000),
    ];
    let md = markdown(&build("m.db", &r).unwrap());
    assert!(
            md.contains("| h | src.gguf | Q8_0 | 800.00 | 64.00 | 0.7812 | 4608 | 50.0 | RAPL package | [^row_energy-21] |"),
            "{md}"
        );
    assert!(
        md.contains(
            "| h | src.gguf | Q4_K_M | 450.00 | 64.00 | — | — | — | — | [^row_energy-23] |"
        ),
        "{md}"
    );
    assert!(
        md.contains(
            "| h | src.gguf | Q2_K | 300.00 | 64.00 | — | — | — | — | [^frontier_cells-3] |"
        ),
        "{md}"
    );
    assert!(md.contains("RAPL not readable in this VM") && md.contains(NO_RECORDING));
}

#[test]
fn three_models_of_one_format_give_a_floor_table_with_the_hand_fit() {
    let mut r = rows();
    assert!(!markdown(&build("m.db", &r).unwrap()).contains("Per-token floor: t ="));
    // 128 tokens at t = 1 ms + bytes ÷ 2000 GB/s for 2, 6 and 10 GB: 2, 4, 6 ms.
    let base = r.bench[0].clone();
    r.bench = [(11, 2e9), (12, 6e9), (13, 10e9)]
        .iter()
        .map(|&(id, b)| BenchRecord {
            id,
            model_sha256: format!("sha{id}"),
            model_type: format!("m{id}"),
            bytes_per_step: Some(b),
            avg_ns: ((1e-3 + b / 2000e9) * 128.0 * 1e9).round() as i64,
            ..base.clone()
        })
        .collect();
    let md = markdown(&build("m.db", &r).unwrap());
    assert!(
        md.contains("**Per-token floor: t = t0 + bytes ÷ BW_eff**"),
        "{md}"
    );
    // Row 12: 6 GB, 4.000 ms measured and fitted, no leave-one-out with three
    // models, t0 1.000 ms, BW_eff 2000 GB/s, achieved 6e9 ÷ 4e-3 ÷ 40e9 = 3750 %.
    let line = md
        .lines()
        .find(|l| l.contains("| m12 | 6.000 |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        line.contains("| 6.000 | 4.000 | 4.000 | — | — | 1.000 | 2000 | 3750.0 |"),
        "{line}"
    );
}

#[test]
fn speed_monotone_holds_only_when_fewer_bytes_are_never_slower() {
    // (streamed bytes, tok/s): F16 2 GB 10 t/s, Q8_0 1 GB 18 t/s, Q4_K 0.6 GB 25 t/s.
    assert!(speed_monotone(&[(2_000, 10.0), (600, 25.0), (1_000, 18.0)]));
    assert!(!speed_monotone(&[
        (2_000, 10.0),
        (600, 17.0),
        (1_000, 18.0)
    ]));
}
