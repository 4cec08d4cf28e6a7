-- memwall store, schema 8: speculative rows that cannot mislead.
--
-- spec_gates.n_prompts_set: prompts in the frozen set the gate was drawn from. A gate
--   unlocks a bench only when it covered the whole set (n_prompts = n_prompts_set; a
--   `--limit` gate is stored as partial) at ≥ the bench's tokens per prompt. Gates
--   stored before this column have NULL: their coverage is unknown, they unlock nothing.
-- spec_bench is rebuilt with:
--   gate_id: the greedy gate row that unlocked a speedup (k > 0); the insert trigger
--     checks that gate, and the gate cannot be deleted while the row exists.
--   decision: `--k auto`'s "off" is a decision, not a measurement: stored without
--     samples (NULL tok/s and speedup, reps 0, zero counters). Earlier "auto → off"
--     rows, which carried target-only tok/s and a speedup of 1.000 ± 0.000 by
--     construction, are converted to such decision rows.
--   tps_samples / tps_mean / tps_std may be NULL (decision rows only: checked).
-- Rows of spec_bench and spec_gates are write-once (UPDATE is refused); a bench row
-- whose speculative output differed from target-only decoding is refused.

ALTER TABLE spec_gates ADD COLUMN n_prompts_set INTEGER;

CREATE TABLE spec_bench_v8 (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    target_file TEXT NOT NULL,
    target_sha256 TEXT NOT NULL,
    draft_file TEXT,
    drafter_kind TEXT NOT NULL,         -- none (target-only) | draft-model | ngram
    drafter_key TEXT NOT NULL,
    k INTEGER NOT NULL,                 -- 0 = target-only decoding, or auto's "off"
    k_auto INTEGER NOT NULL,            -- 1 = this is --k auto's choice
    category TEXT NOT NULL,
    prompt_set_sha256 TEXT NOT NULL,
    prompt_ids TEXT NOT NULL,
    max_new INTEGER NOT NULL,
    reps INTEGER NOT NULL,              -- 0 for a decision row
    n_threads INTEGER NOT NULL,
    tps_samples TEXT,                   -- JSON; NULL only for a decision row
    tps_mean REAL,
    tps_std REAL,
    speedup_samples TEXT,
    speedup_mean REAL,
    speedup_std REAL,
    predicted_speedup REAL,
    alpha_calib REAL,
    acceptance_rate REAL,
    alpha_hat REAL,
    mean_accepted REAL,
    tokens_per_target_pass REAL,
    n_drafted INTEGER NOT NULL,
    n_accepted INTEGER NOT NULL,
    n_iterations INTEGER NOT NULL,
    n_emitted INTEGER NOT NULL,
    n_output_mismatch INTEGER NOT NULL,
    p_mass_max REAL NOT NULL,
    p_mass_mean REAL NOT NULL,
    q_mass_max REAL NOT NULL,
    q_mass_mean REAL NOT NULL,
    draft_ns_per_iteration REAL,
    verify_ns_per_iteration REAL,
    stats_json TEXT NOT NULL,
    timings_json TEXT,
    engine_build TEXT NOT NULL,
    build_commit TEXT NOT NULL,
    measured_at TEXT NOT NULL,
    hostname TEXT NOT NULL,
    cpu_info TEXT NOT NULL,
    decision TEXT,                      -- e.g. 'off (predicted ≤ 1)'; NULL = a measurement
    gate_id INTEGER REFERENCES spec_gates(id),
    CONSTRAINT a_decision_row_has_no_samples CHECK (decision IS NULL OR (
        k = 0 AND k_auto = 1 AND reps = 0
        AND tps_samples IS NULL AND tps_mean IS NULL AND tps_std IS NULL
        AND speedup_samples IS NULL AND speedup_mean IS NULL AND speedup_std IS NULL
        AND n_drafted = 0 AND n_accepted = 0 AND n_iterations = 0 AND n_emitted = 0)),
    CONSTRAINT a_measured_row_has_samples CHECK (decision IS NOT NULL OR (
        tps_samples IS NOT NULL AND tps_mean IS NOT NULL))
);

INSERT INTO spec_bench_v8 (
    id, run_id, target_file, target_sha256, draft_file, drafter_kind, drafter_key, k, k_auto,
    category, prompt_set_sha256, prompt_ids, max_new, reps, n_threads,
    tps_samples, tps_mean, tps_std, speedup_samples, speedup_mean, speedup_std,
    predicted_speedup, alpha_calib, acceptance_rate, alpha_hat, mean_accepted, tokens_per_target_pass,
    n_drafted, n_accepted, n_iterations, n_emitted, n_output_mismatch,
    p_mass_max, p_mass_mean, q_mass_max, q_mass_mean,
    draft_ns_per_iteration, verify_ns_per_iteration, stats_json, timings_json,
    engine_build, build_commit, measured_at, hostname, cpu_info, decision, gate_id)
SELECT
    b.id, b.run_id, b.target_file, b.target_sha256, b.draft_file, b.drafter_kind, b.drafter_key, b.k, b.k_auto,
    b.category, b.prompt_set_sha256, b.prompt_ids, b.max_new,
    CASE WHEN off THEN 0 ELSE b.reps END, b.n_threads,
    CASE WHEN off THEN NULL ELSE b.tps_samples END,
    CASE WHEN off THEN NULL ELSE b.tps_mean END,
    CASE WHEN off THEN NULL ELSE b.tps_std END,
    CASE WHEN off THEN NULL ELSE b.speedup_samples END,
    CASE WHEN off THEN NULL ELSE b.speedup_mean END,
    CASE WHEN off THEN NULL ELSE b.speedup_std END,
    CASE WHEN off THEN NULL ELSE b.predicted_speedup END,
    b.alpha_calib,
    CASE WHEN off THEN NULL ELSE b.acceptance_rate END,
    CASE WHEN off THEN NULL ELSE b.alpha_hat END,
    CASE WHEN off THEN NULL ELSE b.mean_accepted END,
    CASE WHEN off THEN NULL ELSE b.tokens_per_target_pass END,
    CASE WHEN off THEN 0 ELSE b.n_drafted END,
    CASE WHEN off THEN 0 ELSE b.n_accepted END,
    CASE WHEN off THEN 0 ELSE b.n_iterations END,
    CASE WHEN off THEN 0 ELSE b.n_emitted END,
    CASE WHEN off THEN 0 ELSE b.n_output_mismatch END,
    CASE WHEN off THEN 0 ELSE b.p_mass_max END,
    CASE WHEN off THEN 0 ELSE b.p_mass_mean END,
    CASE WHEN off THEN 0 ELSE b.q_mass_max END,
    CASE WHEN off THEN 0 ELSE b.q_mass_mean END,
    CASE WHEN off THEN NULL ELSE b.draft_ns_per_iteration END,
    CASE WHEN off THEN NULL ELSE b.verify_ns_per_iteration END,
    CASE WHEN off THEN '{}' ELSE b.stats_json END,
    b.timings_json, b.engine_build, b.build_commit, b.measured_at, b.hostname, b.cpu_info,
    CASE WHEN off THEN 'off (predicted ≤ 1)' END,
    CASE WHEN b.k > 0 AND b.speedup_mean IS NOT NULL THEN (
        SELECT MAX(g.id) FROM spec_gates g
        WHERE g.mode = 'greedy' AND g.passed = 1
          AND g.target_sha256 = b.target_sha256 AND g.drafter_key = b.drafter_key
          AND g.k = b.k AND g.engine_build = b.engine_build
          AND g.prompt_set_sha256 = b.prompt_set_sha256 AND g.run_id < b.run_id) END
FROM (SELECT *, (k_auto = 1 AND k = 0) AS off FROM spec_bench) AS b
ORDER BY b.id;

DROP TABLE spec_bench;
ALTER TABLE spec_bench_v8 RENAME TO spec_bench;
CREATE INDEX spec_bench_run ON spec_bench(run_id);
CREATE INDEX spec_bench_gate ON spec_bench(gate_id);

-- A speedup (k > 0) is stored only with the gate that unlocks it: a passed greedy gate
-- over the whole prompt set, at ≥ this row's tokens per prompt, for the same target,
-- drafter, k, engine build and prompt set.
CREATE TRIGGER spec_bench_requires_an_unlocking_gate
BEFORE INSERT ON spec_bench
WHEN NEW.k > 0 AND NEW.speedup_mean IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM spec_gates g
    WHERE g.id = NEW.gate_id
      AND g.mode = 'greedy' AND g.passed = 1
      AND g.n_prompts_set IS NOT NULL AND g.n_prompts = g.n_prompts_set
      AND g.n_identical = g.n_prompts
      AND g.max_new >= NEW.max_new
      AND g.target_sha256 = NEW.target_sha256
      AND g.drafter_key = NEW.drafter_key
      AND g.k = NEW.k
      AND g.engine_build = NEW.engine_build
      AND g.prompt_set_sha256 = NEW.prompt_set_sha256)
BEGIN
    SELECT RAISE(ABORT, 'spec_bench: refusing a speedup without the gate that unlocks it (gate_id must name a passed greedy gate over the whole prompt set, at >= this row''s tokens per prompt, for the same target, drafter, k, engine build and prompt set): run `memwall spec gate` without --limit first');
END;

CREATE TRIGGER spec_bench_refuses_diverged_outputs
BEFORE INSERT ON spec_bench
WHEN NEW.n_output_mismatch <> 0
BEGIN
    SELECT RAISE(ABORT, 'spec_bench: refusing a row whose speculative output differed from target-only decoding: such a speedup compares different work');
END;

CREATE TRIGGER spec_bench_rows_are_write_once
BEFORE UPDATE ON spec_bench
BEGIN
    SELECT RAISE(ABORT, 'spec_bench: rows are write-once: a measurement is never edited; delete its run and measure again');
END;

CREATE TRIGGER spec_gates_are_write_once
BEFORE UPDATE ON spec_gates
BEGIN
    SELECT RAISE(ABORT, 'spec_gates: rows are write-once: a gate result is never edited; delete its run and gate again');
END;

CREATE TRIGGER spec_gates_keep_the_rows_they_unlocked
BEFORE DELETE ON spec_gates
WHEN EXISTS (SELECT 1 FROM spec_bench b WHERE b.gate_id = OLD.id)
BEGIN
    SELECT RAISE(ABORT, 'spec_gates: refusing to delete a gate whose spec-bench speedup rows still exist: delete those runs first, or delete them together with it (memwall history --delete N --cascade)');
END;
