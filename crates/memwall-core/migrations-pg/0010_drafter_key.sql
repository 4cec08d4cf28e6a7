-- SQLite 0027 on PostgreSQL.
-- One name for one thing (issue 40 §4): the drafter's identity is `drafter_key` in every
-- table. PostgreSQL keeps trigger functions as text, so the two that named the column
-- are replaced with the new name (otherwise unchanged from 0002).
ALTER TABLE spec_synth_predictions RENAME COLUMN draft_key TO drafter_key;
ALTER TABLE spec_synth RENAME COLUMN draft_key TO drafter_key;

CREATE OR REPLACE FUNCTION spec_synth_requires_its_prediction() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.k > 0 AND NOT EXISTS (
        SELECT 1 FROM spec_synth_predictions p
        WHERE p.id = NEW.prediction_id
          AND p.alpha_set = NEW.alpha_set AND p.k = NEW.k
          AND p.target_sha256 = NEW.target_sha256 AND p.drafter_key = NEW.drafter_key
          AND p.engine_build = NEW.engine_build
          AND p.predicted_speedup = NEW.predicted_speedup
          AND p.created_at <= NEW.measured_at) THEN
        RAISE EXCEPTION 'spec_synth: refusing a set-acceptance row without the prediction stored before its run (same alpha, k, target, draft, engine build)';
    END IF;
    RETURN NEW;
END $$;

CREATE OR REPLACE FUNCTION spec_synth_requires_the_pairs_gate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.k > 0 AND NEW.speedup_mean IS NOT NULL AND NOT EXISTS (
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
          AND g.prompt_set_sha256 = NEW.prompt_set_sha256) THEN
        RAISE EXCEPTION 'spec_synth: refusing a set-acceptance speedup without the passed greedy gate of the real draft model at this k (whole prompt set, >= these tokens per prompt, same target, engine build and prompt set): run `memwall spec gate --drafters draft-model -k K` first';
    END IF;
    RETURN NEW;
END $$;
