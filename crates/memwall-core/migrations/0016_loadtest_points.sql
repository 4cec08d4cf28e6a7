-- memwall store: load-test points. One row per load level (a concurrency or a
-- request rate) of a `loadtest` run, with the target's provenance, vLLM's metric
-- statistics (ms), the bandwidth-normalised columns and the raw per-request samples
-- (JSON) the statistics derive from. NULL: not measured (the note says why).
CREATE TABLE loadtest_points (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    -- key columns (what was measured)
    url TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    request_model TEXT NOT NULL,
    mode TEXT NOT NULL CHECK (mode IN ('closed', 'open')),
    concurrency INTEGER CHECK (concurrency IS NULL OR concurrency >= 1),
    rate_rps REAL CHECK (rate_rps IS NULL OR rate_rps > 0),
    burstiness REAL CHECK (burstiness IS NULL OR burstiness > 0),
    input_tokens INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    shared_prefix_tokens INTEGER NOT NULL,
    ignore_eos INTEGER NOT NULL,
    seed INTEGER NOT NULL,
    slo TEXT NOT NULL,
    -- provenance
    server_model TEXT,
    server_header TEXT,
    system_fingerprint TEXT,
    model_file TEXT,
    build_commit TEXT NOT NULL,
    measured_at TEXT NOT NULL,
    hostname TEXT NOT NULL,
    -- measurements
    n_sent INTEGER NOT NULL,
    n_completed INTEGER NOT NULL CHECK (n_completed >= 1 AND n_completed <= n_sent),
    n_rejected INTEGER NOT NULL,
    n_failed INTEGER NOT NULL CHECK (n_completed + n_rejected + n_failed = n_sent),
    retry_after_max_s REAL,
    duration_s REAL NOT NULL CHECK (duration_s > 0),
    total_input_tokens INTEGER,
    total_output_tokens INTEGER NOT NULL CHECK (total_output_tokens >= n_completed),
    token_source TEXT NOT NULL CHECK (token_source IN ('usage', 'tokenizer', 'chunks')),
    request_throughput_rps REAL NOT NULL,
    output_throughput_tps REAL NOT NULL,
    ttft_mean_ms REAL, ttft_median_ms REAL, ttft_p90_ms REAL, ttft_p99_ms REAL,
    tpot_mean_ms REAL, tpot_median_ms REAL, tpot_p90_ms REAL, tpot_p99_ms REAL,
    itl_mean_ms REAL, itl_median_ms REAL, itl_p90_ms REAL, itl_p99_ms REAL,
    e2el_mean_ms REAL, e2el_median_ms REAL, e2el_p90_ms REAL, e2el_p99_ms REAL,
    goodput_rps REAL,
    mean_cached_tokens REAL,
    bytes_per_token REAL,
    implied_gbps REAL,
    stream_gbps REAL,
    pct_of_stream REAL,
    bandwidth_note TEXT,
    first_error TEXT,
    samples_json TEXT NOT NULL,
    CHECK (ttft_median_ms IS NULL OR ttft_median_ms >= 0),
    CHECK (ttft_mean_ms IS NULL OR e2el_mean_ms IS NULL OR ttft_mean_ms <= e2el_mean_ms)
);

CREATE INDEX loadtest_points_run ON loadtest_points(run_id);
