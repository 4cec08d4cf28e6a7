-- SQLite 0026 on PostgreSQL.
-- Other processes' GPU use (issue 39 §6): NVML's per-process SM utilisation summed
-- over every process but memwall's, on the busiest GPU, percent of each sample
-- period (sampler_series), and its mean over a row's timed intervals in every table
-- holding an energy summary. NULL where NVML's process query is missing (no NVIDIA
-- driver, an old driver) and in rows stored before this column existed.
ALTER TABLE sampler_series ADD COLUMN gpu_other_util_pct DOUBLE PRECISION;
ALTER TABLE row_energy ADD COLUMN other_gpu_util_pct DOUBLE PRECISION;
ALTER TABLE loadtest_energy ADD COLUMN other_gpu_util_pct DOUBLE PRECISION;
ALTER TABLE spec_bench_energy ADD COLUMN other_gpu_util_pct DOUBLE PRECISION;
ALTER TABLE spec_synth_energy ADD COLUMN other_gpu_util_pct DOUBLE PRECISION;
ALTER TABLE serve_energy ADD COLUMN other_gpu_util_pct DOUBLE PRECISION;
