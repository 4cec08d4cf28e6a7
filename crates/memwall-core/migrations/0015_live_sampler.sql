-- Live machine state recorded beside a run: the sampler's counters (available or
-- not, with the reason), its phases, its time series, and per bench row the energy
-- figures of that row's phase. A NULL figure was not measured (the counter is
-- unavailable: the reason is in sampler_counters / row_energy.reason).
CREATE TABLE sampler_counters (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    source TEXT NOT NULL,
    available INTEGER NOT NULL,
    reason TEXT
);
CREATE INDEX sampler_counters_run ON sampler_counters(run_id);

CREATE TABLE sampler_phases (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL
);
CREATE INDEX sampler_phases_run ON sampler_phases(run_id);

CREATE TABLE sampler_series (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    hz REAL NOT NULL,
    t_ns INTEGER NOT NULL,
    cpu_energy_j REAL,
    dram_energy_j REAL,
    gpu_energy_j REAL,
    cpu_power_w REAL,
    dram_power_w REAL,
    gpu_power_w REAL,
    cpu_temp_c REAL,
    gpu_temp_c REAL,
    cpu_mhz REAL,
    gpu_sm_mhz REAL,
    gpu_mem_mhz REAL,
    gpu_mem_util_pct REAL,
    dram_gbps REAL,
    mem_used_bytes INTEGER,
    mem_total_bytes INTEGER,
    swap_used_bytes INTEGER,
    swap_in_pages INTEGER,
    swap_out_pages INTEGER,
    thermal_state TEXT
);
CREATE INDEX sampler_series_run ON sampler_series(run_id, t_ns);

CREATE TABLE row_energy (
    row_id INTEGER PRIMARY KEY REFERENCES bench_results(id) ON DELETE CASCADE,
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
    implied_bandwidth_gbps REAL
);
CREATE INDEX row_energy_run ON row_energy(run_id);
