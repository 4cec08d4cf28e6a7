-- memwall store, schema 5: speculative decoding (issue 5).
-- spec_gates: one row per gated configuration (target × drafter × k) of a
-- `memwall spec gate` run (runs.kind = 'spec-gate'); mode 'greedy' rows carry the
-- N/N equality result, mode 'sampling' rows the chi-square check.
-- spec_gate_prompts: the exact post-template token count of every gated prompt.
-- spec_bench: one row per (category, drafter, k) cell of `memwall spec bench`
-- (runs.kind = 'spec-bench'). A speedup is only stored for a speculative
-- configuration (k > 0) that passed the greedy gate with the same target file,
-- drafter, k, engine build and prompt set: the trigger below refuses it otherwise.

CREATE TABLE spec_gates (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    mode TEXT NOT NULL,                 -- greedy | sampling
    target_file TEXT NOT NULL,
    target_sha256 TEXT NOT NULL,
    drafter_kind TEXT NOT NULL,         -- draft-model | ngram
    drafter_key TEXT NOT NULL,          -- draft:<sha256 prefix> | ngram:1-3
    k INTEGER NOT NULL,
    prompt_set_sha256 TEXT NOT NULL,
    n_prompts INTEGER NOT NULL,         -- greedy: prompts; sampling: trials
    n_identical INTEGER NOT NULL,       -- greedy: identical outputs; sampling: 0
    max_new INTEGER NOT NULL,
    passed INTEGER NOT NULL,            -- 1 = N/N identical (greedy) | chi2 < crit (sampling)
    first_diff_json TEXT,               -- FirstDiff | NULL
    detail_json TEXT NOT NULL,          -- SpecStats (greedy) | SamplingCheck (sampling)
    engine_build TEXT NOT NULL,
    build_commit TEXT NOT NULL,
    measured_at TEXT NOT NULL,
    hostname TEXT NOT NULL,
    cpu_info TEXT NOT NULL
);
CREATE INDEX spec_gates_key ON spec_gates(target_sha256, drafter_key, k, mode);

CREATE TABLE spec_gate_prompts (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    prompt_set_sha256 TEXT NOT NULL,
    prompt_id TEXT NOT NULL,
    category TEXT NOT NULL,
    format TEXT NOT NULL,               -- raw | chat (target's own template)
    n_prompt_tokens INTEGER NOT NULL    -- exact post-template token count (target tokenizer)
);

CREATE TABLE spec_bench (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    target_file TEXT NOT NULL,
    target_sha256 TEXT NOT NULL,
    draft_file TEXT,                    -- draft model file (draft-model cells)
    drafter_kind TEXT NOT NULL,         -- none (target-only) | draft-model | ngram
    drafter_key TEXT NOT NULL,
    k INTEGER NOT NULL,                 -- 0 = target-only decoding
    k_auto INTEGER NOT NULL,            -- 1 = this is --k auto's choice
    category TEXT NOT NULL,             -- json | code | prose
    prompt_set_sha256 TEXT NOT NULL,
    prompt_ids TEXT NOT NULL,           -- JSON array
    max_new INTEGER NOT NULL,
    reps INTEGER NOT NULL,
    n_threads INTEGER NOT NULL,
    tps_samples TEXT NOT NULL,          -- JSON: decode tok/s per repetition
    tps_mean REAL NOT NULL,
    tps_std REAL NOT NULL,
    speedup_samples TEXT,               -- JSON: tok/s ÷ target-only tok/s of the same repetition
    speedup_mean REAL,
    speedup_std REAL,
    predicted_speedup REAL,             -- cost model, from calibration before the timed runs
    alpha_calib REAL,                   -- alpha-hat of the calibration run
    acceptance_rate REAL,               -- accepted / drafted, over the timed runs
    alpha_hat REAL,                     -- accepted / (accepted + rejections)
    mean_accepted REAL,                 -- accepted drafted tokens per iteration
    tokens_per_target_pass REAL,
    n_drafted INTEGER NOT NULL,
    n_accepted INTEGER NOT NULL,
    n_iterations INTEGER NOT NULL,
    n_emitted INTEGER NOT NULL,
    n_output_mismatch INTEGER NOT NULL, -- prompts whose output differed from target-only greedy
    p_mass_max REAL NOT NULL,           -- discarded target mass (vocabulary mismatch)
    p_mass_mean REAL NOT NULL,
    q_mass_max REAL NOT NULL,
    q_mass_mean REAL NOT NULL,
    draft_ns_per_iteration REAL,
    verify_ns_per_iteration REAL,
    stats_json TEXT NOT NULL,           -- SpecStats summed over repetitions
    timings_json TEXT,                  -- cost-model Timings of the category
    engine_build TEXT NOT NULL,
    build_commit TEXT NOT NULL,
    measured_at TEXT NOT NULL,
    hostname TEXT NOT NULL,
    cpu_info TEXT NOT NULL
);
CREATE INDEX spec_bench_run ON spec_bench(run_id);

CREATE TRIGGER spec_bench_requires_a_passed_gate
BEFORE INSERT ON spec_bench
WHEN NEW.k > 0 AND NEW.speedup_mean IS NOT NULL AND NOT EXISTS (
    SELECT 1 FROM spec_gates g
    WHERE g.mode = 'greedy' AND g.passed = 1
      AND g.target_sha256 = NEW.target_sha256
      AND g.drafter_key = NEW.drafter_key
      AND g.k = NEW.k
      AND g.engine_build = NEW.engine_build
      AND g.prompt_set_sha256 = NEW.prompt_set_sha256)
BEGIN
    SELECT RAISE(ABORT, 'spec_bench: refusing a speedup for a configuration without a passed greedy gate (same target, drafter, k, engine build, prompt set): run `memwall spec gate` for it first');
END;
