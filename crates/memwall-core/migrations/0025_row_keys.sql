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
-- SQLite cannot add a column with a non-constant default: a trigger per table fills a
-- missing key after insert, and the unique index stands in for NOT NULL (as for
-- runs.uuid in 0019). The write-once triggers of spec_gates, spec_bench and spec_synth
-- refuse every UPDATE of a row once it has its key (a row is keyless only inside the
-- statement that inserts it).
DROP TRIGGER spec_gates_are_write_once;
DROP TRIGGER spec_bench_rows_are_write_once;
DROP TRIGGER spec_synth_rows_are_write_once;

-- stream_results
ALTER TABLE stream_results ADD COLUMN row_key TEXT;
UPDATE stream_results SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/stream_results/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM stream_results x JOIN runs r ON r.id = x.run_id) AS k
WHERE stream_results.id = k.rid;
CREATE UNIQUE INDEX stream_results_row_key ON stream_results(row_key);
CREATE TRIGGER stream_results_gets_a_row_key AFTER INSERT ON stream_results
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE stream_results SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- peak_results
ALTER TABLE peak_results ADD COLUMN row_key TEXT;
UPDATE peak_results SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/peak_results/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM peak_results x JOIN runs r ON r.id = x.run_id) AS k
WHERE peak_results.id = k.rid;
CREATE UNIQUE INDEX peak_results_row_key ON peak_results(row_key);
CREATE TRIGGER peak_results_gets_a_row_key AFTER INSERT ON peak_results
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE peak_results SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- bench_results
ALTER TABLE bench_results ADD COLUMN row_key TEXT;
UPDATE bench_results SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/bench_results/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM bench_results x JOIN runs r ON r.id = x.run_id) AS k
WHERE bench_results.id = k.rid;
CREATE UNIQUE INDEX bench_results_row_key ON bench_results(row_key);
CREATE TRIGGER bench_results_gets_a_row_key AFTER INSERT ON bench_results
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE bench_results SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- kv_verify_results
ALTER TABLE kv_verify_results ADD COLUMN row_key TEXT;
UPDATE kv_verify_results SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/kv_verify_results/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM kv_verify_results x JOIN runs r ON r.id = x.run_id) AS k
WHERE kv_verify_results.id = k.rid;
CREATE UNIQUE INDEX kv_verify_results_row_key ON kv_verify_results(row_key);
CREATE TRIGGER kv_verify_results_gets_a_row_key AFTER INSERT ON kv_verify_results
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE kv_verify_results SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- spec_gates
ALTER TABLE spec_gates ADD COLUMN row_key TEXT;
UPDATE spec_gates SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/spec_gates/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM spec_gates x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_gates.id = k.rid;
CREATE UNIQUE INDEX spec_gates_row_key ON spec_gates(row_key);
CREATE TRIGGER spec_gates_gets_a_row_key AFTER INSERT ON spec_gates
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE spec_gates SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- spec_gate_prompts
ALTER TABLE spec_gate_prompts ADD COLUMN row_key TEXT;
UPDATE spec_gate_prompts SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/spec_gate_prompts/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM spec_gate_prompts x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_gate_prompts.id = k.rid;
CREATE UNIQUE INDEX spec_gate_prompts_row_key ON spec_gate_prompts(row_key);
CREATE TRIGGER spec_gate_prompts_gets_a_row_key AFTER INSERT ON spec_gate_prompts
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE spec_gate_prompts SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- spec_bench
ALTER TABLE spec_bench ADD COLUMN row_key TEXT;
UPDATE spec_bench SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/spec_bench/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM spec_bench x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_bench.id = k.rid;
CREATE UNIQUE INDEX spec_bench_row_key ON spec_bench(row_key);
CREATE TRIGGER spec_bench_gets_a_row_key AFTER INSERT ON spec_bench
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE spec_bench SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- frontier_cells
ALTER TABLE frontier_cells ADD COLUMN row_key TEXT;
UPDATE frontier_cells SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/frontier_cells/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM frontier_cells x JOIN runs r ON r.id = x.run_id) AS k
WHERE frontier_cells.id = k.rid;
CREATE UNIQUE INDEX frontier_cells_row_key ON frontier_cells(row_key);
CREATE TRIGGER frontier_cells_gets_a_row_key AFTER INSERT ON frontier_cells
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE frontier_cells SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- frontier_items
ALTER TABLE frontier_items ADD COLUMN row_key TEXT;
UPDATE frontier_items SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/frontier_items/' || (ROW_NUMBER() OVER (PARTITION BY c.run_id ORDER BY x.id) - 1) AS key
    FROM frontier_items x JOIN frontier_cells c ON c.id = x.cell_id JOIN runs r ON r.id = c.run_id) AS k
WHERE frontier_items.id = k.rid;
CREATE UNIQUE INDEX frontier_items_row_key ON frontier_items(row_key);
CREATE TRIGGER frontier_items_gets_a_row_key AFTER INSERT ON frontier_items
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE frontier_items SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- prediction_scores
ALTER TABLE prediction_scores ADD COLUMN row_key TEXT;
UPDATE prediction_scores SET row_key = r.uuid || '/prediction_scores/' || s.sha256
FROM runs r, prediction_sheets s
WHERE r.id = prediction_scores.run_id AND s.id = prediction_scores.sheet_id;
CREATE UNIQUE INDEX prediction_scores_row_key ON prediction_scores(row_key);
CREATE TRIGGER prediction_scores_gets_a_row_key AFTER INSERT ON prediction_scores
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE prediction_scores SET row_key = (SELECT r.uuid || '/prediction_scores/' || s.sha256 FROM runs r, prediction_sheets s
        WHERE r.id = NEW.run_id AND s.id = NEW.sheet_id)
    WHERE rowid = NEW.rowid;
END;

-- sampler_counters
ALTER TABLE sampler_counters ADD COLUMN row_key TEXT;
UPDATE sampler_counters SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/sampler_counters/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM sampler_counters x JOIN runs r ON r.id = x.run_id) AS k
WHERE sampler_counters.id = k.rid;
CREATE UNIQUE INDEX sampler_counters_row_key ON sampler_counters(row_key);
CREATE TRIGGER sampler_counters_gets_a_row_key AFTER INSERT ON sampler_counters
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE sampler_counters SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- sampler_phases
ALTER TABLE sampler_phases ADD COLUMN row_key TEXT;
UPDATE sampler_phases SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/sampler_phases/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM sampler_phases x JOIN runs r ON r.id = x.run_id) AS k
WHERE sampler_phases.id = k.rid;
CREATE UNIQUE INDEX sampler_phases_row_key ON sampler_phases(row_key);
CREATE TRIGGER sampler_phases_gets_a_row_key AFTER INSERT ON sampler_phases
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE sampler_phases SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- sampler_intervals
ALTER TABLE sampler_intervals ADD COLUMN row_key TEXT;
UPDATE sampler_intervals SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/sampler_intervals/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM sampler_intervals x JOIN runs r ON r.id = x.run_id) AS k
WHERE sampler_intervals.id = k.rid;
CREATE UNIQUE INDEX sampler_intervals_row_key ON sampler_intervals(row_key);
CREATE TRIGGER sampler_intervals_gets_a_row_key AFTER INSERT ON sampler_intervals
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE sampler_intervals SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- sampler_series
ALTER TABLE sampler_series ADD COLUMN row_key TEXT;
UPDATE sampler_series SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/sampler_series/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM sampler_series x JOIN runs r ON r.id = x.run_id) AS k
WHERE sampler_series.id = k.rid;
CREATE UNIQUE INDEX sampler_series_row_key ON sampler_series(row_key);
CREATE TRIGGER sampler_series_gets_a_row_key AFTER INSERT ON sampler_series
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE sampler_series SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- row_energy
ALTER TABLE row_energy ADD COLUMN row_key TEXT;
UPDATE row_energy SET row_key = k.key FROM (
    SELECT x.row_id AS rid, r.uuid || '/row_energy/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.row_id) - 1) AS key
    FROM row_energy x JOIN runs r ON r.id = x.run_id) AS k
WHERE row_energy.row_id = k.rid;
CREATE UNIQUE INDEX row_energy_row_key ON row_energy(row_key);
CREATE TRIGGER row_energy_gets_a_row_key AFTER INSERT ON row_energy
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE row_energy SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- loadtest_points
ALTER TABLE loadtest_points ADD COLUMN row_key TEXT;
UPDATE loadtest_points SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/loadtest_points/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM loadtest_points x JOIN runs r ON r.id = x.run_id) AS k
WHERE loadtest_points.id = k.rid;
CREATE UNIQUE INDEX loadtest_points_row_key ON loadtest_points(row_key);
CREATE TRIGGER loadtest_points_gets_a_row_key AFTER INSERT ON loadtest_points
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE loadtest_points SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- loadtest_energy
ALTER TABLE loadtest_energy ADD COLUMN row_key TEXT;
UPDATE loadtest_energy SET row_key = k.key FROM (
    SELECT x.point_id AS rid, r.uuid || '/loadtest_energy/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.point_id) - 1) AS key
    FROM loadtest_energy x JOIN runs r ON r.id = x.run_id) AS k
WHERE loadtest_energy.point_id = k.rid;
CREATE UNIQUE INDEX loadtest_energy_row_key ON loadtest_energy(row_key);
CREATE TRIGGER loadtest_energy_gets_a_row_key AFTER INSERT ON loadtest_energy
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE loadtest_energy SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- spec_bench_energy
ALTER TABLE spec_bench_energy ADD COLUMN row_key TEXT;
UPDATE spec_bench_energy SET row_key = k.key FROM (
    SELECT x.row_id AS rid, r.uuid || '/spec_bench_energy/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.row_id) - 1) AS key
    FROM spec_bench_energy x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_bench_energy.row_id = k.rid;
CREATE UNIQUE INDEX spec_bench_energy_row_key ON spec_bench_energy(row_key);
CREATE TRIGGER spec_bench_energy_gets_a_row_key AFTER INSERT ON spec_bench_energy
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE spec_bench_energy SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- spec_synth
ALTER TABLE spec_synth ADD COLUMN row_key TEXT;
UPDATE spec_synth SET row_key = k.key FROM (
    SELECT x.id AS rid, r.uuid || '/spec_synth/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.id) - 1) AS key
    FROM spec_synth x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_synth.id = k.rid;
CREATE UNIQUE INDEX spec_synth_row_key ON spec_synth(row_key);
CREATE TRIGGER spec_synth_gets_a_row_key AFTER INSERT ON spec_synth
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE spec_synth SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- spec_synth_energy
ALTER TABLE spec_synth_energy ADD COLUMN row_key TEXT;
UPDATE spec_synth_energy SET row_key = k.key FROM (
    SELECT x.row_id AS rid, r.uuid || '/spec_synth_energy/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.row_id) - 1) AS key
    FROM spec_synth_energy x JOIN runs r ON r.id = x.run_id) AS k
WHERE spec_synth_energy.row_id = k.rid;
CREATE UNIQUE INDEX spec_synth_energy_row_key ON spec_synth_energy(row_key);
CREATE TRIGGER spec_synth_energy_gets_a_row_key AFTER INSERT ON spec_synth_energy
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE spec_synth_energy SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

-- serve_energy
ALTER TABLE serve_energy ADD COLUMN row_key TEXT;
UPDATE serve_energy SET row_key = k.key FROM (
    SELECT x.run_id AS rid, r.uuid || '/serve_energy/' || (ROW_NUMBER() OVER (PARTITION BY x.run_id ORDER BY x.run_id) - 1) AS key
    FROM serve_energy x JOIN runs r ON r.id = x.run_id) AS k
WHERE serve_energy.run_id = k.rid;
CREATE UNIQUE INDEX serve_energy_row_key ON serve_energy(row_key);
CREATE TRIGGER serve_energy_gets_a_row_key AFTER INSERT ON serve_energy
WHEN NEW.row_key IS NULL
BEGIN
    UPDATE serve_energy SET row_key = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE rowid = NEW.rowid;
END;

CREATE TRIGGER spec_gates_are_write_once
BEFORE UPDATE ON spec_gates
WHEN OLD.row_key IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'spec_gates: rows are write-once: a gate result is never edited; delete its run and gate again');
END;

CREATE TRIGGER spec_bench_rows_are_write_once
BEFORE UPDATE ON spec_bench
WHEN OLD.row_key IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'spec_bench: rows are write-once: a measurement is never edited; delete its run and measure again');
END;

CREATE TRIGGER spec_synth_rows_are_write_once
BEFORE UPDATE ON spec_synth
WHEN OLD.row_key IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'spec_synth: rows are write-once: a measurement is never edited; delete its run and measure again');
END;
