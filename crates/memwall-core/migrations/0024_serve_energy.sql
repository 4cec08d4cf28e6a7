-- A `serve` run's energy: the serving window (ready → stop, stored as the interval of
-- phase `serving` in sampler_intervals) integrated over the sampler series, divided
-- by every token the server generated (requests that completed, were cancelled or
-- failed). NULL figures: not measured (`reason` says why).
CREATE TABLE serve_energy (
    run_id INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    samples INTEGER NOT NULL,
    mean_power_w REAL,
    energy_j REAL,
    j_per_token REAL,
    tokens_per_wh REAL,
    energy_source TEXT NOT NULL,
    energy_scope TEXT,
    reason TEXT,
    tokens INTEGER,
    timed_ns INTEGER,
    covered_ns INTEGER,
    idle_power_w REAL,
    j_per_token_above_idle REAL,
    peak_temp_c REAL,
    throttled INTEGER,
    live_dram_gbps REAL,
    gpu_mem_util_pct REAL,
    other_cpu_cores REAL,
    steal_cores REAL,
    CHECK (mean_power_w IS NULL OR mean_power_w >= 0),
    CHECK (energy_j IS NULL OR energy_j >= 0)
);
