-- SQLite 0024 (a serve run's energy) on PostgreSQL.
-- A `serve` run's energy: the serving window (ready → stop, stored as the interval of
-- phase `serving` in sampler_intervals) integrated over the sampler series, divided
-- by every token the server generated (requests that completed, were cancelled or
-- failed). NULL figures: not measured (`reason` says why).
CREATE TABLE serve_energy (
    run_id BIGINT PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    samples BIGINT NOT NULL,
    mean_power_w DOUBLE PRECISION,
    energy_j DOUBLE PRECISION,
    j_per_token DOUBLE PRECISION,
    tokens_per_wh DOUBLE PRECISION,
    energy_source TEXT NOT NULL,
    energy_scope TEXT,
    reason TEXT,
    tokens BIGINT,
    timed_ns BIGINT,
    covered_ns BIGINT,
    idle_power_w DOUBLE PRECISION,
    j_per_token_above_idle DOUBLE PRECISION,
    peak_temp_c DOUBLE PRECISION,
    throttled BIGINT,
    live_dram_gbps DOUBLE PRECISION,
    gpu_mem_util_pct DOUBLE PRECISION,
    other_cpu_cores DOUBLE PRECISION,
    steal_cores DOUBLE PRECISION,
    CHECK (mean_power_w IS NULL OR mean_power_w >= 0),
    CHECK (energy_j IS NULL OR energy_j >= 0)
);
