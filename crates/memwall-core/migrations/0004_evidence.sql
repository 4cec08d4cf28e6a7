-- Issue 4: roofline evidence.
-- Every bench row also carries its compute side, so the roofline (arithmetic
-- intensity on x, FLOP/s on y) is drawn from stored numbers only.
ALTER TABLE bench_results ADD COLUMN flops_per_token REAL;   -- mean FLOPs per token of the test
ALTER TABLE bench_results ADD COLUMN intensity REAL;         -- FLOP per byte read (arithmetic intensity)
ALTER TABLE bench_results ADD COLUMN achieved_gflops REAL;   -- avg_ts × flops_per_token ÷ 1e9

-- KV-cache bytes per token: formula vs the engine's own sequence-state size.
CREATE TABLE kv_verify_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    model_filename TEXT NOT NULL,
    cache_type TEXT NOT NULL,
    n INTEGER NOT NULL,                         -- tokens in the first state; the second has 2n
    predicted_bytes_per_token REAL NOT NULL,    -- formula, sliding-window aware, growth n → 2n
    formula_bytes_per_token INTEGER NOT NULL,   -- 2 × layers × kv_heads × head_dim × bytes (all layers)
    state_n INTEGER NOT NULL,
    state_2n INTEGER NOT NULL,
    measured_state_bytes_per_token REAL NOT NULL,
    metadata_bytes_per_token REAL NOT NULL,     -- llama.cpp cell metadata in the state (12 B/cell/cache)
    measured_kv_bytes_per_token REAL NOT NULL,
    ratio REAL NOT NULL,                        -- measured KV ÷ predicted
    rss_bytes_per_token REAL,                   -- peak-RSS growth during prefill ÷ n (the wrong method)
    rss_ratio REAL,
    build_commit TEXT NOT NULL
);
