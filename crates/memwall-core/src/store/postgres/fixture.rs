//! Test fixtures shared with the report's tests: a SQLite store holding a run of
//! every kind of row the copy carries, measured on one host.

use crate::store::Store;
use crate::store::record::BenchRecord;
use std::path::Path;

/// What one host's fixture holds, to compute expected values from.
#[derive(Debug, Clone)]
pub(crate) struct HostFixture {
    /// Hostname.
    pub host: String,
    /// CPU brand string of every run.
    pub cpu: String,
    /// Logical cores of every run.
    pub cores: i64,
    /// GPUs as the probe lists them (`NVIDIA H200, 143771 MiB`).
    pub gpus: Vec<String>,
    /// Its triad, GB/s.
    pub triad_gbps: f64,
    /// Its tg128 tok/s.
    pub tg_tps: f64,
    /// Bytes read per decode step.
    pub bytes_per_step: f64,
}

impl HostFixture {
    /// A 2-core host without GPUs whose CPU is `cpu of <host>`, reading
    /// 400.8 MB per decode step.
    pub fn new(host: &str, triad_gbps: f64, tg_tps: f64) -> HostFixture {
        HostFixture {
            host: host.into(),
            cpu: format!("cpu of {host}"),
            cores: 2,
            gpus: vec![],
            triad_gbps,
            tg_tps,
            bytes_per_step: 400_800_000.0,
        }
    }

    /// The decode ceiling, tok/s: bandwidth ÷ bytes per step.
    pub fn ceiling_ts(&self) -> f64 {
        self.triad_gbps * 1e9 / self.bytes_per_step
    }
}

async fn exec(s: &Store, sql: &str) -> i64 {
    sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(s.pool())
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .last_insert_rowid()
}

async fn run(s: &Store, kind: &str, f: &HostFixture) -> i64 {
    let json = serde_json::json!({ "hostname": f.host, "cpu_model": f.cpu, "cores_logical": f.cores, "gpus": f.gpus });
    sqlx::query("INSERT INTO runs (kind, started_at, finished_at, build_commit, command, cpu_info, cores_logical, ram_bytes, os, kernel, hostname, host_json) VALUES (?, '2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z', 'c', 'memwall test', ?, ?, 1073741824, 'os', 'k', ?, ?)")
            .bind(kind)
            .bind(&f.cpu)
            .bind(f.cores)
            .bind(&f.host)
            .bind(json.to_string())
            .execute(s.pool())
            .await
            .unwrap_or_else(|e| panic!("inserting a {kind} run: {e}"))
            .last_insert_rowid()
}

/// A store at `path` with, for host `f.host`: a STREAM run (copy + triad rows, a
/// peak), a bench run (one tg128 row naming the triad row, its energy row, a
/// sampler counter, phase, series point and the row's two timed intervals), a speculative gate run and a bench
/// run whose speedup row names that gate, a frontier run (a cell and an item), a
/// KV run, a load-test run and a prediction sheet scored against the bench run.
pub(crate) async fn host_store(path: &Path, f: &HostFixture) -> Store {
    let s = Store::open(path).await.unwrap();
    let h = &f.host;
    // The raw samples every derived column is recomputed from by the verifier: a
    // STREAM pass over `arrays` arrays of 800 MB at `gbps`, ns; a tg128 repetition.
    let pass_ns = |arrays: f64, gbps: f64| (arrays * 800_000_000.0 / gbps).round() as u64;
    let rep_ns = (128e9 / f.tg_tps).round() as u64;
    // Four identical requests (8 tokens in 8 chunks, 10 ms apart): TTFT and ITL
    // 10 ms, E2EL 85 ms, TPOT (85 - 10) / 7 ms.
    let request = |i: usize, start: f64| {
        serde_json::json!({"index": i, "start_ms": start, "outcome": "ok",
            "chunk_ms": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0], "e2el_ms": 85.0,
            "usage_prompt_tokens": null, "usage_completion_tokens": 8, "cached_tokens": null,
            "finish_reason": "length", "retry_after_s": null, "error": null})
    };
    let requests = serde_json::json!([
        request(0, 0.0),
        request(1, 0.0),
        request(2, 85.5),
        request(3, 86.0)
    ]);
    let stream = run(&s, "stream", f).await;
    exec(&s, &format!("INSERT INTO stream_results (run_id, measured_at, kernel, threads, array_bytes, passes, best_gbps, avg_gbps, worst_gbps, samples_ns, validated, cpu_info, hostname) VALUES ({stream}, 'm', 'copy', 2, 800000000, 10, {0}, {0}, {0}, '[{1},{1}]', 1, 'cpu', '{h}')", f.triad_gbps * 0.9, pass_ns(2.0, f.triad_gbps * 0.9))).await;
    let triad = exec(&s, &format!("INSERT INTO stream_results (run_id, measured_at, kernel, threads, array_bytes, passes, best_gbps, avg_gbps, worst_gbps, samples_ns, validated, cpu_info, hostname) VALUES ({stream}, 'm', 'triad', 2, 800000000, 10, {0}, {0}, {0}, '[{1},{1}]', 1, 'cpu', '{h}')", f.triad_gbps, pass_ns(3.0, f.triad_gbps))).await;
    exec(&s, &format!("INSERT INTO peak_results (run_id, measured_at, kind, threads, gflops, isa, cpu_info, hostname, bound_gflops, clock_ghz, clock_source) VALUES ({stream}, 'm', 'f32 FMA', 2, 100.0, 'avx2', 'cpu', '{h}', 150.0, 3.0, 'sysfs')")).await;

    let mut r = crate::testing::new_run("bench");
    r.host.hostname = h.clone();
    r.host.cpu_model = f.cpu.clone();
    r.host.cores_logical = f.cores as usize;
    r.host.gpus = f.gpus.clone();
    let ceiling = f.ceiling_ts();
    let mut rows = vec![BenchRecord {
        hostname: h.clone(),
        cpu_info: f.cpu.clone(),
        cores_logical: f.cores,
        gpu_info: f.gpus.join(", "),
        n_gpu_layers: if f.gpus.is_empty() { 0 } else { 99 },
        // Every derived column consistent with the rate, as the verifier recomputes
        // them (one sequence: a token reads the whole step).
        // Two repetitions of 128 tokens at the fixture's rate (to the nearest ns).
        samples_ns: vec![rep_ns; 2],
        samples_ts: vec![f.tg_tps, f.tg_tps],
        avg_ns: rep_ns as i64,
        stddev_ns: 0,
        stddev_ts: 0.0,
        min_ts: f.tg_tps,
        max_ts: f.tg_tps,
        achieved_gflops: Some(f.tg_tps * 1.0e9 / 1e9),
        flops_per_token: Some(1.0e9),
        intensity: Some(1.0e9 / f.bytes_per_step),
        read_bandwidth_gbps: None,
        decode_ceiling_ts_read: None,
        achieved_read: None,
        implied_bandwidth_gbps: Some(f.tg_tps * f.bytes_per_step / 1e9),
        stream_id: triad,
        avg_ts: f.tg_tps,
        bandwidth_gbps: Some(f.triad_gbps),
        bytes_per_step: Some(f.bytes_per_step),
        ceiling_ts: Some(ceiling),
        achieved: Some(f.tg_tps / ceiling),
        ..BenchRecord::example()
    }];
    let bench = s.insert_bench_run(&r, &mut rows).await.unwrap();
    let row = rows[0].id;
    exec(&s, &format!("INSERT INTO row_energy (row_id, run_id, phase, samples, energy_source, reason, implied_bandwidth_gbps) VALUES ({row}, {bench}, 'tg128', 3, 'rapl', 'no RAPL in this VM', {})", f.tg_tps * f.bytes_per_step / 1e9)).await;
    exec(&s, &format!("INSERT INTO sampler_counters (run_id, name, source, available, reason) VALUES ({bench}, 'cpu_energy', 'rapl', 0, 'no RAPL')")).await;
    exec(&s, &format!("INSERT INTO sampler_phases (run_id, name, start_ns, end_ns) VALUES ({bench}, 'tg128', 0, 10)")).await;
    // The row's two timed repetitions: each interval as long as its sample.
    for rep in 0..2u64 {
        let start = 1000 + rep * (rep_ns + 1000);
        exec(&s, &format!("INSERT INTO sampler_intervals (run_id, phase, rep, start_ns, end_ns) VALUES ({bench}, 'tg128', {}, {start}, {})", rep + 1, start + rep_ns)).await;
    }
    exec(&s, &format!("INSERT INTO sampler_series (run_id, hz, t_ns, cpu_temp_c) VALUES ({bench}, 10.0, 5, 51.5)")).await;

    let gate_run = run(&s, "spec-gate", f).await;
    let gate = exec(&s, &format!("INSERT INTO spec_gates (run_id, mode, target_file, target_sha256, drafter_kind, drafter_key, k, prompt_set_sha256, n_prompts, n_identical, max_new, passed, detail_json, engine_build, build_commit, measured_at, hostname, cpu_info, n_prompts_set) VALUES ({gate_run}, 'greedy', 't', 'T', 'draft-model', 'dk', 4, 'P', 6, 6, 32, 1, '{{}}', 'B', 'c', 'm', '{h}', 'c', 6)")).await;
    exec(&s, &format!("INSERT INTO spec_gate_prompts (run_id, prompt_set_sha256, prompt_id, category, format, n_prompt_tokens) VALUES ({gate_run}, 'P', 'p1', 'code', 'raw', 17)")).await;
    let spec_run = run(&s, "spec-bench", f).await;
    exec(&s, &format!("INSERT INTO spec_bench (run_id,target_file,target_sha256,drafter_kind,drafter_key,k,k_auto,category,prompt_set_sha256,prompt_ids,max_new,reps,n_threads,tps_samples,tps_mean,tps_std,speedup_samples,speedup_mean,speedup_std,predicted_speedup,n_drafted,n_accepted,n_iterations,n_emitted,n_output_mismatch,p_mass_max,p_mass_mean,q_mass_max,q_mass_mean,stats_json,engine_build,build_commit,measured_at,hostname,cpu_info,gate_id) VALUES
            ({spec_run},'t','T','none','target-only',0,0,'code','P','[]',32,2,2,'[30,31]',30.5,0.7071067811865476,NULL,NULL,NULL,NULL,0,0,10,10,0,0,0,0,0,'{{}}','B','c','m','{h}','c',NULL),
            ({spec_run},'t','T','draft-model','dk',4,0,'code','P','[]',32,2,2,'[27,27.9]',27.45,0.6363961030678927,'[0.9,0.9]',0.9,0.0,0.95,8,4,3,7,0,0,0,0,0,'{{}}','B','c','m','{h}','c',{gate})")).await;

    exec(&s, &format!("INSERT INTO spec_bench_energy (row_id, run_id, samples, energy_source, reason) VALUES ((SELECT MAX(id) FROM spec_bench WHERE run_id = {spec_run}), {spec_run}, 3, 'rapl', 'no RAPL in this VM')")).await;
    let synth_run = run(&s, "spec-synth", f).await;
    let pred = exec(&s, &format!("INSERT INTO spec_synth_predictions (created_at, hostname, target_sha256, drafter_key, engine_build, alpha_set, k, predicted_speedup, timings_json) VALUES ('2026-01-01T00:00:00Z', '{h}', 'T', 'dk', 'B', 0.5, 4, 1.25, '{{}}')")).await;
    let synth = exec(&s, &format!("INSERT INTO spec_synth (run_id, prediction_id, alpha_set, k, target_file, target_sha256, draft_file, drafter_key, seed, prompt_set_sha256, prompt_ids, max_new, reps, n_threads, n_gpu_layers, tps_samples, tps_mean, tps_std, speedup_samples, speedup_mean, speedup_std, predicted_speedup, predicted_after, alpha_hat, n_tested, n_drafted, n_accepted, n_iterations, n_emitted, n_draft_passes, n_draws, n_right, stats_json, timings_json, engine_build, build_commit, measured_at, hostname, cpu_info, gpu_info, gate_id) VALUES ({synth_run}, {pred}, 0.5, 4, 't', 'T', 'd', 'dk', 7, 'P', '[]', 32, 2, 2, 0, '[33,34]', 33.5, 0.7071067811865476, '[1.1,1.12]', 1.11, 0.014142135623730963, 1.25, 1.2, 0.5, 40, 40, 20, 12, 32, 12, 40, 20, '{{}}', '{{}}', 'B', 'c', '2026-01-01T00:05:00Z', '{h}', 'c', NULL, {gate})")).await;
    exec(&s, &format!("INSERT INTO spec_synth_energy (row_id, run_id, samples, energy_source, reason) VALUES ({synth}, {synth_run}, 3, 'rapl', 'no RAPL in this VM')")).await;

    let fr = run(&s, "frontier", f).await;
    let cell = exec(&s, &format!("INSERT INTO frontier_cells (run_id, source_file, source_sha256, source_quant, arm_quant, arm_file, arm_sha256, arm_relation, arm_file_bytes, arm_streamed_bytes, arm_bits_per_weight, measure, config_key, config_json, value, value_unc, ci_low, ci_high, n, result_json, started_at, finished_at, build_commit, engine_build, n_threads, hostname, cpu_info) VALUES ({fr}, 's.gguf', 'S', 'Q4_K_M', 'Q8_0', 'a.gguf', 'A', 'above', 100, 90, 8.5, 'task:arc', 'key', '{{}}', 0.5, NULL, 0.2, 0.8, 2, '{{}}', 'a', 'b', 'c', 'B', 2, '{h}', 'c')")).await;
    for i in 0..2 {
        exec(&s, &format!("INSERT INTO frontier_items (cell_id, item_id, prompt, n_prompt_tokens, output, n_gen_tokens, extracted, expected, correct) VALUES ({cell}, 'item{i}', 'p', 3, 'o', 1, 'A', 'A', {})", 1 - i)).await;
    }
    let kv = run(&s, "kv", f).await;
    exec(&s, &format!("INSERT INTO kv_verify_results (run_id, model_filename, cache_type, n, predicted_bytes_per_token, formula_bytes_per_token, state_n, state_2n, measured_state_bytes_per_token, metadata_bytes_per_token, measured_kv_bytes_per_token, ratio, build_commit) VALUES ({kv}, 'm.gguf', 'f16', 64, 12288.0, 12288, 800000, 1587200, 12300.0, 12.0, 12288.0, 1.0, 'c')")).await;
    let lt = run(&s, "loadtest", f).await;
    let point = exec(&s, &format!("INSERT INTO loadtest_points (run_id, url, endpoint, request_model, mode, concurrency, input_tokens, output_tokens, shared_prefix_tokens, ignore_eos, seed, slo, build_commit, measured_at, hostname, n_sent, n_completed, n_rejected, n_failed, duration_s, total_output_tokens, token_source, request_throughput_rps, output_throughput_tps, ttft_mean_ms, ttft_median_ms, ttft_p90_ms, ttft_p99_ms, tpot_mean_ms, tpot_median_ms, tpot_p90_ms, tpot_p99_ms, itl_mean_ms, itl_median_ms, itl_p90_ms, itl_p99_ms, e2el_mean_ms, e2el_median_ms, e2el_p90_ms, e2el_p99_ms, bandwidth_note, samples_json) VALUES ({lt}, 'http://x', '/v1/completions', 'm', 'closed', 2, 16, 8, 0, 1, 0, '', 'c', 'm', '{h}', 4, 4, 0, 0, 2.0, 32, 'usage', 2.0, 16.0, 10, 10, 10, 10, {tpot}, {tpot}, {tpot}, {tpot}, 10, 10, 10, 10, 85, 85, 85, 85, 'no model file given', '{samples}')", tpot = 75.0 / 7.0, samples = requests)).await;
    exec(&s, &format!("INSERT INTO loadtest_energy (point_id, run_id, phase, samples, energy_source, reason) VALUES ({point}, {lt}, 'c=2', 3, 'rapl', 'no RAPL in this VM')")).await;
    // A serve run: its serving window and the energy over it (none here: no RAPL).
    let sv = run(&s, "serve", f).await;
    exec(&s, &format!("INSERT INTO sampler_phases (run_id, name, start_ns, end_ns) VALUES ({sv}, 'serving', 0, 2000000000)")).await;
    exec(&s, &format!("INSERT INTO sampler_intervals (run_id, phase, rep, start_ns, end_ns) VALUES ({sv}, 'serving', 0, 0, 2000000000)")).await;
    exec(&s, &format!("INSERT INTO serve_energy (run_id, phase, samples, energy_source, reason, tokens, timed_ns, covered_ns) VALUES ({sv}, 'serving', 0, '', 'no RAPL in this VM', 5, 2000000000, 0)")).await;
    let sheet = exec(&s, &format!("INSERT INTO prediction_sheets (created_at, hostname, prev_sha256, payload_json, sha256) VALUES ('2026-01-01T00:00:00.000Z', '{h}', 'genesis', '{{}}', 'sheet-of-{h}')")).await;
    // A scorecard with nothing to score (the sheet predicted no test of this run).
    exec(&s, &format!("INSERT INTO prediction_scores (sheet_id, run_id, scored_at, result_json) VALUES ({sheet}, {bench}, 'now', '{{\"sheet_id\":{sheet},\"sheet_sha256\":\"sheet-of-{h}\",\"predicted_at\":\"2026-01-01T00:00:00.000Z\",\"run_id\":{bench},\"run_started_at\":\"2026-01-01T00:00:00Z\",\"recorded_before_run\":true,\"tests\":[],\"ratios\":[],\"mean_abs_error_pct\":null}}')")).await;
    s
}
