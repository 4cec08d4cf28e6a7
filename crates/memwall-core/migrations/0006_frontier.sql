-- memwall store, schema 6: the quantization frontier (issue 6).
-- One row of frontier_cells per (arm, measure, settings), written in one
-- transaction together with its runs row (kind 'frontier'), its bench_results
-- rows (speed cells) and its frontier_items rows (task cells): a killed frontier
-- run leaves no partial cell. Units are in the names (_bytes, _ns; tok/s for speed).

CREATE TABLE frontier_cells (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    source_file TEXT NOT NULL,
    source_sha256 TEXT NOT NULL,
    source_quant TEXT NOT NULL,
    arm_quant TEXT NOT NULL,            -- F16 | Q8_0 | ... | the source's own type
    arm_file TEXT NOT NULL,
    arm_sha256 TEXT NOT NULL,
    arm_relation TEXT NOT NULL,         -- above | source | below (bits per weight vs the source)
    arm_file_bytes INTEGER NOT NULL,
    arm_streamed_bytes INTEGER NOT NULL, -- weight bytes read per decode step (ModelFacts)
    arm_bits_per_weight REAL,
    measure TEXT NOT NULL,              -- speed | ppl:<dataset> | task:<name>
    config_key TEXT NOT NULL,           -- 16 hex of sha256(measure, settings JSON): the cell identity
    config_json TEXT NOT NULL,
    value REAL,                         -- headline: tg tok/s | PPL | accuracy (0..1)
    value_unc REAL,                     -- tg std | PPL +/- | NULL
    ci_low REAL,                        -- Wilson 95 % (tasks)
    ci_high REAL,
    n INTEGER,                          -- repetitions | tokens scored | items
    result_json TEXT NOT NULL,          -- the full result (BenchRecord ids, PplResult, TaskResult less items)
    started_at TEXT NOT NULL,
    finished_at TEXT NOT NULL,
    build_commit TEXT NOT NULL,
    engine_build TEXT NOT NULL,
    n_threads INTEGER NOT NULL,
    hostname TEXT NOT NULL,
    cpu_info TEXT NOT NULL
);

CREATE INDEX frontier_cells_key ON frontier_cells(arm_sha256, measure, config_key);
CREATE INDEX frontier_cells_run ON frontier_cells(run_id);

CREATE TABLE frontier_items (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    cell_id INTEGER NOT NULL REFERENCES frontier_cells(id) ON DELETE CASCADE,
    item_id TEXT NOT NULL,              -- dataset item id (gsm8k/test/17, HumanEval/0, Mercury_...)
    prompt TEXT NOT NULL,               -- exact prompt after the model's chat template
    n_prompt_tokens INTEGER NOT NULL,   -- its token count
    output TEXT NOT NULL,
    n_gen_tokens INTEGER NOT NULL,
    extracted TEXT NOT NULL,
    expected TEXT NOT NULL,
    correct INTEGER NOT NULL
);

CREATE INDEX frontier_items_cell ON frontier_items(cell_id);
