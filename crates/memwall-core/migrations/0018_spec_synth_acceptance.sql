-- Set-acceptance speculative decoding (`memwall spec bench --synth-acceptance`): a
-- drafter proposes the target's own greedy token with a set probability α and pays
-- a real draft-model forward per drafted token. Its rows are kept apart from
-- spec_bench (real acceptance) so no table or chart mixes the two.
--
-- spec_synth_predictions: the cost model's speedup for each (α, k), written before
-- the timed runs start and never changed.
CREATE TABLE spec_synth_predictions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,            -- UTC RFC 3339, before the timed runs
    hostname TEXT NOT NULL,
    target_sha256 TEXT NOT NULL,
    draft_key TEXT NOT NULL,
    engine_build TEXT NOT NULL,
    alpha_set REAL NOT NULL CHECK (alpha_set >= 0 AND alpha_set <= 1),
    k INTEGER NOT NULL CHECK (k >= 1),
    predicted_speedup REAL NOT NULL CHECK (predicted_speedup > 0),
    timings_json TEXT NOT NULL
);

CREATE TRIGGER spec_synth_predictions_no_update BEFORE UPDATE ON spec_synth_predictions
BEGIN
    SELECT RAISE(ABORT, 'spec_synth_predictions: a prediction is written once, before its run, and never edited');
END;

-- One row per configuration of a set-acceptance run: the target-only baseline
-- (alpha_set NULL, k = 0) or (α, k).
CREATE TABLE spec_synth (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    prediction_id INTEGER REFERENCES spec_synth_predictions(id),
    alpha_set REAL CHECK (alpha_set IS NULL OR (alpha_set >= 0 AND alpha_set <= 1)),
    k INTEGER NOT NULL,
    target_file TEXT NOT NULL,
    target_sha256 TEXT NOT NULL,
    draft_file TEXT NOT NULL,
    draft_key TEXT NOT NULL,
    seed INTEGER NOT NULL,
    prompt_set_sha256 TEXT NOT NULL,
    prompt_ids TEXT NOT NULL,            -- JSON array
    max_new INTEGER NOT NULL,
    reps INTEGER NOT NULL,
    n_threads INTEGER NOT NULL,
    n_gpu_layers INTEGER NOT NULL,
    tps_samples TEXT NOT NULL,           -- JSON array, decode tok/s per repetition
    tps_mean REAL,
    tps_std REAL,
    speedup_samples TEXT,                -- JSON array (NULL for target-only)
    speedup_mean REAL,
    speedup_std REAL,
    predicted_speedup REAL,              -- copied from prediction_id
    predicted_after REAL,                -- cost model at the realised α̂ and draft lengths
    alpha_hat REAL,
    n_tested INTEGER NOT NULL,
    n_drafted INTEGER NOT NULL,
    n_accepted INTEGER NOT NULL,
    n_iterations INTEGER NOT NULL,
    n_emitted INTEGER NOT NULL,
    n_draft_passes INTEGER NOT NULL,
    n_draws INTEGER NOT NULL,
    n_right INTEGER NOT NULL,
    stats_json TEXT NOT NULL,
    timings_json TEXT NOT NULL,
    engine_build TEXT NOT NULL,
    build_commit TEXT NOT NULL,
    measured_at TEXT NOT NULL,
    hostname TEXT NOT NULL,
    cpu_info TEXT NOT NULL,
    gpu_info TEXT,
    gate_id INTEGER REFERENCES spec_gates(id),
    CHECK ((alpha_set IS NULL) = (k = 0)),
    CHECK (speedup_mean IS NULL OR speedup_mean > 0),
    CHECK (n_accepted <= n_drafted AND n_right <= n_draws)
);
CREATE INDEX spec_synth_run ON spec_synth(run_id);

-- A set-acceptance speedup is stored only with the prediction made before it (same
-- α, k, target, draft, engine build, written earlier) ...
CREATE TRIGGER spec_synth_requires_its_prediction
BEFORE INSERT ON spec_synth
WHEN NEW.k > 0 AND NOT EXISTS (
    SELECT 1 FROM spec_synth_predictions p
    WHERE p.id = NEW.prediction_id
      AND p.alpha_set = NEW.alpha_set AND p.k = NEW.k
      AND p.target_sha256 = NEW.target_sha256 AND p.draft_key = NEW.draft_key
      AND p.engine_build = NEW.engine_build
      AND p.predicted_speedup = NEW.predicted_speedup
      AND p.created_at <= NEW.measured_at)
BEGIN
    SELECT RAISE(ABORT, 'spec_synth: refusing a set-acceptance row without the prediction stored before its run (same alpha, k, target, draft, engine build)');
END;

-- ... and with the pair's gate: a passed greedy gate of the real draft model at this
-- k over the whole prompt set, at >= this row's tokens per prompt, same target,
-- engine build and prompt set (the verify path at k + 1 positions reproduced
-- target-only decoding there). The run itself also checked that every output
-- equalled target-only decoding.
CREATE TRIGGER spec_synth_requires_the_pairs_gate
BEFORE INSERT ON spec_synth
WHEN NEW.k > 0 AND NEW.speedup_mean IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM spec_gates g
    WHERE g.id = NEW.gate_id
      AND g.mode = 'greedy' AND g.passed = 1
      AND g.n_prompts_set IS NOT NULL AND g.n_prompts = g.n_prompts_set
      AND g.n_identical = g.n_prompts
      AND g.max_new >= NEW.max_new
      AND g.target_sha256 = NEW.target_sha256
      AND g.drafter_key = NEW.draft_key
      AND g.k = NEW.k
      AND g.engine_build = NEW.engine_build
      AND g.prompt_set_sha256 = NEW.prompt_set_sha256)
BEGIN
    SELECT RAISE(ABORT, 'spec_synth: refusing a set-acceptance speedup without the passed greedy gate of the real draft model at this k (whole prompt set, >= these tokens per prompt, same target, engine build and prompt set): run `memwall spec gate --drafters draft-model -k K` first');
END;

CREATE TRIGGER spec_synth_rows_are_write_once
BEFORE UPDATE ON spec_synth
BEGIN
    SELECT RAISE(ABORT, 'spec_synth: rows are write-once: a measurement is never edited; delete its run and measure again');
END;

-- The sampler beside a set-acceptance run: each row's energy pooled over the phases
-- of its repetitions (the run's counters, phases and series are in the sampler_*
-- tables under the same run_id). NULL figures were not measured; reason says why.
CREATE TABLE spec_synth_energy (
    row_id INTEGER PRIMARY KEY REFERENCES spec_synth(id) ON DELETE CASCADE,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    samples INTEGER NOT NULL,
    mean_power_w REAL,
    energy_j REAL,
    j_per_token REAL,
    tokens_per_wh REAL,
    energy_source TEXT NOT NULL,
    reason TEXT,
    peak_temp_c REAL,
    throttled INTEGER,
    live_dram_gbps REAL,
    gpu_mem_util_pct REAL
);
CREATE INDEX spec_synth_energy_run ON spec_synth_energy(run_id);

-- The same per row of a spec-bench run (real acceptance).
CREATE TABLE spec_bench_energy (
    row_id INTEGER PRIMARY KEY REFERENCES spec_bench(id) ON DELETE CASCADE,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    samples INTEGER NOT NULL,
    mean_power_w REAL,
    energy_j REAL,
    j_per_token REAL,
    tokens_per_wh REAL,
    energy_source TEXT NOT NULL,
    reason TEXT,
    peak_temp_c REAL,
    throttled INTEGER,
    live_dram_gbps REAL,
    gpu_mem_util_pct REAL
);
CREATE INDEX spec_bench_energy_run ON spec_bench_energy(run_id);
