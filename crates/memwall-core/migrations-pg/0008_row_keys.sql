-- SQLite 0025 (a key on every row under a run) on PostgreSQL.
--
-- Every row under a run carries a key (`row_key`, text, unique in its table): its
-- identity across stores, as `runs.uuid` is the run's. `memwall push` sends a row to
-- the shared store only when no row of its table there has its key, so rows added
-- under a run after the run was pushed (a `predict score` scorecard, say) go up on
-- the next push, and pushing twice adds nothing. The copy carries the key unchanged
-- both ways (push, and the snapshot a shared store is read through).
--
-- New rows get a UUID (version 4, as runs.uuid) at insert, except scorecards, whose
-- key is their (run, sheet) pair: `<run uuid>/prediction_scores/<sheet sha256>` (one
-- card per pair: two stores that score the same sheet against the same run hold the
-- same row). Rows that exist already get a key computed from what both stores hold in
-- common: `<run uuid>/<table>/<n>`, n the row's rank (from 0) among its run's rows of
-- that table in id order (for the energy tables: in the order of the row or run they
-- describe), and the pair's key for scorecards. A run copied by an earlier push holds
-- its rows in the same order in both stores, so the SQLite and the PostgreSQL
-- migration give a row and its copy the same key, wherever and whenever each is
-- migrated.
--
-- A new table under runs needs the same: a `row_key` column, a unique index
-- `<table>_row_key` and a way to fill it (SQLite: a trigger as in 0025, or in a new
-- table `row_key TEXT DEFAULT (<0025's UUID expression>)`; PostgreSQL: the default
-- and CHECK of 0008); `store::shared`'s tests check every carried table for it.
--
-- Here new rows get `gen_random_uuid()` as the column default (push always carries the
-- key of the row it copies); the CHECK keeps the column nullable in the catalogue, as
-- SQLite's is, while refusing a row without a key. The write-once triggers are held
-- off while existing rows get their keys.

-- stream_results
ALTER TABLE stream_results ADD COLUMN row_key TEXT;
UPDATE stream_results SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/stream_results/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM stream_results x JOIN runs r ON r.id = x.run_id) AS k
WHERE stream_results.id = k.rid;
ALTER TABLE stream_results ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE stream_results ADD CONSTRAINT stream_results_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX stream_results_row_key ON stream_results(row_key);

-- peak_results
ALTER TABLE peak_results ADD COLUMN row_key TEXT;
UPDATE peak_results SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/peak_results/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM peak_results x JOIN runs r ON r.id = x.run_id) AS k
WHERE peak_results.id = k.rid;
ALTER TABLE peak_results ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE peak_results ADD CONSTRAINT peak_results_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX peak_results_row_key ON peak_results(row_key);

-- bench_results
ALTER TABLE bench_results ADD COLUMN row_key TEXT;
UPDATE bench_results SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/bench_results/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM bench_results x JOIN runs r ON r.id = x.run_id) AS k
WHERE bench_results.id = k.rid;
ALTER TABLE bench_results ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE bench_results ADD CONSTRAINT bench_results_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX bench_results_row_key ON bench_results(row_key);

-- kv_verify_results
ALTER TABLE kv_verify_results ADD COLUMN row_key TEXT;
UPDATE kv_verify_results SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/kv_verify_results/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM kv_verify_results x JOIN runs r ON r.id = x.run_id) AS k
WHERE kv_verify_results.id = k.rid;
ALTER TABLE kv_verify_results ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE kv_verify_results ADD CONSTRAINT kv_verify_results_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX kv_verify_results_row_key ON kv_verify_results(row_key);

-- spec_gates
ALTER TABLE spec_gates ADD COLUMN row_key TEXT;
ALTER TABLE spec_gates DISABLE TRIGGER spec_gates_are_write_once;
UPDATE spec_gates SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/spec_gates/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM spec_gates x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_gates.id = k.rid;
ALTER TABLE spec_gates ENABLE TRIGGER spec_gates_are_write_once;
ALTER TABLE spec_gates ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE spec_gates ADD CONSTRAINT spec_gates_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX spec_gates_row_key ON spec_gates(row_key);

-- spec_gate_prompts
ALTER TABLE spec_gate_prompts ADD COLUMN row_key TEXT;
UPDATE spec_gate_prompts SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/spec_gate_prompts/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM spec_gate_prompts x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_gate_prompts.id = k.rid;
ALTER TABLE spec_gate_prompts ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE spec_gate_prompts ADD CONSTRAINT spec_gate_prompts_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX spec_gate_prompts_row_key ON spec_gate_prompts(row_key);

-- spec_bench
ALTER TABLE spec_bench ADD COLUMN row_key TEXT;
ALTER TABLE spec_bench DISABLE TRIGGER spec_bench_rows_are_write_once;
UPDATE spec_bench SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/spec_bench/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM spec_bench x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_bench.id = k.rid;
ALTER TABLE spec_bench ENABLE TRIGGER spec_bench_rows_are_write_once;
ALTER TABLE spec_bench ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE spec_bench ADD CONSTRAINT spec_bench_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX spec_bench_row_key ON spec_bench(row_key);

-- frontier_cells
ALTER TABLE frontier_cells ADD COLUMN row_key TEXT;
UPDATE frontier_cells SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/frontier_cells/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM frontier_cells x JOIN runs r ON r.id = x.run_id) AS k
WHERE frontier_cells.id = k.rid;
ALTER TABLE frontier_cells ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE frontier_cells ADD CONSTRAINT frontier_cells_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX frontier_cells_row_key ON frontier_cells(row_key);

-- frontier_items
ALTER TABLE frontier_items ADD COLUMN row_key TEXT;
UPDATE frontier_items SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/frontier_items/' || (ROW_NUMBER() OVER (PARTITION BY c.run_id ORDER BY x.id) - 1) AS key
    FROM frontier_items x JOIN frontier_cells c ON c.id = x.cell_id JOIN runs r ON r.id = c.run_id) AS k
WHERE frontier_items.id = k.rid;
ALTER TABLE frontier_items ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE frontier_items ADD CONSTRAINT frontier_items_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX frontier_items_row_key ON frontier_items(row_key);

-- prediction_scores
ALTER TABLE prediction_scores ADD COLUMN row_key TEXT;
UPDATE prediction_scores SET row_key = r.uuid || '/prediction_scores/' || s.sha256
FROM runs r, prediction_sheets s
WHERE r.id = prediction_scores.run_id AND s.id = prediction_scores.sheet_id;
ALTER TABLE prediction_scores ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE prediction_scores ADD CONSTRAINT prediction_scores_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX prediction_scores_row_key ON prediction_scores(row_key);

-- sampler_counters
ALTER TABLE sampler_counters ADD COLUMN row_key TEXT;
UPDATE sampler_counters SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/sampler_counters/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM sampler_counters x JOIN runs r ON r.id = x.run_id) AS k
WHERE sampler_counters.id = k.rid;
ALTER TABLE sampler_counters ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE sampler_counters ADD CONSTRAINT sampler_counters_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX sampler_counters_row_key ON sampler_counters(row_key);

-- sampler_phases
ALTER TABLE sampler_phases ADD COLUMN row_key TEXT;
UPDATE sampler_phases SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/sampler_phases/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM sampler_phases x JOIN runs r ON r.id = x.run_id) AS k
WHERE sampler_phases.id = k.rid;
ALTER TABLE sampler_phases ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE sampler_phases ADD CONSTRAINT sampler_phases_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX sampler_phases_row_key ON sampler_phases(row_key);

-- sampler_intervals
ALTER TABLE sampler_intervals ADD COLUMN row_key TEXT;
UPDATE sampler_intervals SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/sampler_intervals/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM sampler_intervals x JOIN runs r ON r.id = x.run_id) AS k
WHERE sampler_intervals.id = k.rid;
ALTER TABLE sampler_intervals ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE sampler_intervals ADD CONSTRAINT sampler_intervals_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX sampler_intervals_row_key ON sampler_intervals(row_key);

-- sampler_series
ALTER TABLE sampler_series ADD COLUMN row_key TEXT;
UPDATE sampler_series SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/sampler_series/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM sampler_series x JOIN runs r ON r.id = x.run_id) AS k
WHERE sampler_series.id = k.rid;
ALTER TABLE sampler_series ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE sampler_series ADD CONSTRAINT sampler_series_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX sampler_series_row_key ON sampler_series(row_key);

-- row_energy
ALTER TABLE row_energy ADD COLUMN row_key TEXT;
UPDATE row_energy SET row_key = k.key FROM (
    SELECT x.row_id AS rid, r.uuid || '/row_energy/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.row_id) - 1) AS key
    FROM row_energy x JOIN runs r ON r.id = x.run_id) AS k
WHERE row_energy.row_id = k.rid;
ALTER TABLE row_energy ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE row_energy ADD CONSTRAINT row_energy_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX row_energy_row_key ON row_energy(row_key);

-- loadtest_points
ALTER TABLE loadtest_points ADD COLUMN row_key TEXT;
UPDATE loadtest_points SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/loadtest_points/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM loadtest_points x JOIN runs r ON r.id = x.run_id) AS k
WHERE loadtest_points.id = k.rid;
ALTER TABLE loadtest_points ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE loadtest_points ADD CONSTRAINT loadtest_points_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX loadtest_points_row_key ON loadtest_points(row_key);

-- loadtest_energy
ALTER TABLE loadtest_energy ADD COLUMN row_key TEXT;
UPDATE loadtest_energy SET row_key = k.key FROM (
    SELECT x.point_id AS rid, r.uuid || '/loadtest_energy/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.point_id) - 1) AS key
    FROM loadtest_energy x JOIN runs r ON r.id = x.run_id) AS k
WHERE loadtest_energy.point_id = k.rid;
ALTER TABLE loadtest_energy ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE loadtest_energy ADD CONSTRAINT loadtest_energy_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX loadtest_energy_row_key ON loadtest_energy(row_key);

-- spec_bench_energy
ALTER TABLE spec_bench_energy ADD COLUMN row_key TEXT;
UPDATE spec_bench_energy SET row_key = k.key FROM (
    SELECT x.row_id AS rid, r.uuid || '/spec_bench_energy/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.row_id) - 1) AS key
    FROM spec_bench_energy x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_bench_energy.row_id = k.rid;
ALTER TABLE spec_bench_energy ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE spec_bench_energy ADD CONSTRAINT spec_bench_energy_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX spec_bench_energy_row_key ON spec_bench_energy(row_key);

-- spec_synth
ALTER TABLE spec_synth ADD COLUMN row_key TEXT;
ALTER TABLE spec_synth DISABLE TRIGGER spec_synth_rows_are_write_once;
UPDATE spec_synth SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/spec_synth/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM spec_synth x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_synth.id = k.rid;
ALTER TABLE spec_synth ENABLE TRIGGER spec_synth_rows_are_write_once;
ALTER TABLE spec_synth ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE spec_synth ADD CONSTRAINT spec_synth_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX spec_synth_row_key ON spec_synth(row_key);

-- spec_synth_energy
ALTER TABLE spec_synth_energy ADD COLUMN row_key TEXT;
UPDATE spec_synth_energy SET row_key = k.key FROM (
    SELECT x.row_id AS rid, r.uuid || '/spec_synth_energy/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.row_id) - 1) AS key
    FROM spec_synth_energy x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_synth_energy.row_id = k.rid;
ALTER TABLE spec_synth_energy ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE spec_synth_energy ADD CONSTRAINT spec_synth_energy_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX spec_synth_energy_row_key ON spec_synth_energy(row_key);

-- serve_energy
ALTER TABLE serve_energy ADD COLUMN row_key TEXT;
UPDATE serve_energy SET row_key = k.key FROM (
    SELECT x.run_id AS rid, r.uuid || '/serve_energy/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.run_id) - 1) AS key
    FROM serve_energy x JOIN runs r ON r.id = x.run_id) AS k
WHERE serve_energy.run_id = k.rid;
ALTER TABLE serve_energy ALTER COLUMN row_key SET DEFAULT gen_random_uuid()::text;
ALTER TABLE serve_energy ADD CONSTRAINT serve_energy_has_a_row_key CHECK (row_key IS NOT NULL);
CREATE UNIQUE INDEX serve_energy_row_key ON serve_energy(row_key);
