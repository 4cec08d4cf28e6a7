-- memwall store: the measuring guard's findings per run.
-- guard_json: the GuardReport of a run that measured under the guard (bench,
-- spec-gate, spec-bench, frontier cells, kv): power before/after, thermal
-- before/after, pages swapped out in between (null when the OS does not report
-- the counter), the capacity checks (needed vs available bytes, or skipped) and
-- the warnings. NULL for runs that measured nothing under it (older runs, stream).

ALTER TABLE runs ADD COLUMN guard_json TEXT;
