-- The live sampler beside load tests: per load level (a loadtest_points row) the
-- energy figures of that level's phase of the run's recording (the recording itself
-- goes to the sampler_* tables under the loadtest run). The counters are the whole
-- machine's, so when the server runs on the same machine as the client the energy is
-- both together. A NULL figure was not measured: the reason is in `reason`.
CREATE TABLE loadtest_energy (
    point_id INTEGER PRIMARY KEY REFERENCES loadtest_points(id) ON DELETE CASCADE,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    samples INTEGER NOT NULL,
    mean_power_w REAL,
    energy_j REAL,
    j_per_token REAL,
    tokens_per_wh REAL,
    energy_source TEXT NOT NULL,
    reason TEXT,
    peak_temp_c REAL,
    throttled INTEGER,
    live_dram_gbps REAL,
    gpu_mem_util_pct REAL,
    CHECK (mean_power_w IS NULL OR mean_power_w >= 0),
    CHECK (energy_j IS NULL OR energy_j >= 0),
    CHECK (j_per_token IS NULL OR j_per_token > 0)
);
CREATE INDEX loadtest_energy_run ON loadtest_energy(run_id);
