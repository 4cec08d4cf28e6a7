-- memwall store, schema 1.
-- Column names of bench_results match llama-bench's where llama-bench has the
-- column (build_commit, model_filename, n_prompt, avg_ts, samples_ns, ...);
-- units are in the names (_bytes, _gbps, _ns, _ts = tokens/s).

CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,                 -- bench | stream | ...
    started_at TEXT NOT NULL,           -- UTC RFC 3339
    finished_at TEXT NOT NULL,
    build_commit TEXT NOT NULL,
    command TEXT NOT NULL,              -- the command line as typed
    cpu_info TEXT NOT NULL,
    cores_logical INTEGER NOT NULL,
    ram_bytes INTEGER NOT NULL,
    os TEXT NOT NULL,
    kernel TEXT NOT NULL,
    hostname TEXT NOT NULL,
    host_json TEXT NOT NULL,            -- the full HostInfo
    notes TEXT NOT NULL DEFAULT ''
);

CREATE TABLE stream_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    measured_at TEXT NOT NULL,
    kernel TEXT NOT NULL,               -- copy | scale | add | triad
    threads INTEGER NOT NULL,
    array_bytes INTEGER NOT NULL,
    passes INTEGER NOT NULL,
    best_gbps REAL NOT NULL,            -- STREAM's reported rate (min time), 1e9 B/s
    avg_gbps REAL NOT NULL,
    worst_gbps REAL NOT NULL,
    samples_ns TEXT NOT NULL,           -- JSON array, first pass excluded
    validated INTEGER NOT NULL,
    cpu_info TEXT NOT NULL,
    hostname TEXT NOT NULL
);

CREATE TABLE peak_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    measured_at TEXT NOT NULL,
    kind TEXT NOT NULL,                 -- f32 FMA | int8 dot
    threads INTEGER NOT NULL,
    gflops REAL NOT NULL,
    isa TEXT NOT NULL,
    cpu_info TEXT NOT NULL,
    hostname TEXT NOT NULL
);

CREATE TABLE bench_results (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    build_commit TEXT NOT NULL,
    engine TEXT NOT NULL,
    engine_build TEXT NOT NULL,
    backend TEXT NOT NULL,
    cpu_info TEXT NOT NULL,
    gpu_info TEXT NOT NULL,
    model_filename TEXT NOT NULL,
    model_type TEXT NOT NULL,
    model_size INTEGER NOT NULL,
    model_n_params INTEGER NOT NULL,
    model_sha256 TEXT NOT NULL,
    model_file_bytes INTEGER NOT NULL,
    quant TEXT NOT NULL,
    synthetic INTEGER NOT NULL,
    n_batch INTEGER NOT NULL,
    n_ubatch INTEGER NOT NULL,
    n_threads INTEGER NOT NULL,
    n_gpu_layers INTEGER NOT NULL,
    type_k TEXT NOT NULL,
    type_v TEXT NOT NULL,
    flash_attn TEXT NOT NULL,
    n_prompt INTEGER NOT NULL,
    n_gen INTEGER NOT NULL,
    n_depth INTEGER NOT NULL,
    n_seqs INTEGER NOT NULL,
    test_time TEXT NOT NULL,
    avg_ns INTEGER NOT NULL,
    stddev_ns INTEGER NOT NULL,
    avg_ts REAL,
    stddev_ts REAL,
    min_ts REAL,
    max_ts REAL,
    samples_ns TEXT NOT NULL,
    samples_ts TEXT NOT NULL,
    bandwidth_gbps REAL,
    stream_id INTEGER NOT NULL,
    peak_gflops REAL,
    peak_kind TEXT NOT NULL,
    streamed_bytes INTEGER NOT NULL,
    kv_bytes_per_token INTEGER NOT NULL,
    bytes_per_step REAL,
    ceiling_ts REAL,
    achieved REAL,
    implied_bandwidth_gbps REAL,
    cores_logical INTEGER NOT NULL,
    ram_bytes INTEGER NOT NULL,
    os TEXT NOT NULL,
    kernel TEXT NOT NULL,
    hostname TEXT NOT NULL,
    thermal_before TEXT NOT NULL,
    thermal_after TEXT NOT NULL,
    power_source TEXT NOT NULL,
    swap_out_pages INTEGER,
    warnings TEXT NOT NULL
);

CREATE INDEX bench_results_run ON bench_results(run_id);
CREATE INDEX bench_results_model ON bench_results(model_sha256, n_prompt, n_gen, n_depth);
CREATE INDEX stream_results_run ON stream_results(run_id);
