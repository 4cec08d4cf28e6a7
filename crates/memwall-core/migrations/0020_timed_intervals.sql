-- Energy over the timed work only, an idle baseline, and a busy machine flagged.
--
-- sampler_intervals: the timed part of every repetition (a bench test's repetition,
-- a load level's measured span, a spec run's timed decode), in the recording's
-- timebase (ns since the sampler started), under the phase it belongs to. The idle
-- baseline taken before the first test is the phase `idle` with one interval.
-- Energy figures integrate the sampler series over exactly these intervals.
CREATE TABLE sampler_intervals (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    phase TEXT NOT NULL,
    rep INTEGER NOT NULL CHECK (rep >= 0),
    start_ns INTEGER NOT NULL CHECK (start_ns >= 0),
    end_ns INTEGER NOT NULL,
    CHECK (end_ns >= start_ns)
);
CREATE INDEX sampler_intervals_run ON sampler_intervals(run_id, phase);

-- CPU time of the whole machine and of memwall's own process, cumulative since the
-- sampler started (/proc/stat and /proc/self/stat), s: other processes' share of
-- the CPUs during an interval is (Δbusy − Δown) ÷ Δt cores; steal is time the
-- hypervisor gave another guest.
ALTER TABLE sampler_series ADD COLUMN cpu_busy_s REAL;
ALTER TABLE sampler_series ADD COLUMN cpu_steal_s REAL;
ALTER TABLE sampler_series ADD COLUMN own_cpu_s REAL;

-- Every table holding an energy summary gains: what the energy covers (scope), the
-- token count it is divided by, the timed time and the part of it between reads,
-- the run's idle power and J/token above idle, and other processes' CPU use.
ALTER TABLE row_energy ADD COLUMN energy_scope TEXT;
ALTER TABLE row_energy ADD COLUMN tokens INTEGER;
ALTER TABLE row_energy ADD COLUMN timed_ns INTEGER;
ALTER TABLE row_energy ADD COLUMN covered_ns INTEGER;
ALTER TABLE row_energy ADD COLUMN idle_power_w REAL;
ALTER TABLE row_energy ADD COLUMN j_per_token_above_idle REAL;
ALTER TABLE row_energy ADD COLUMN other_cpu_cores REAL;
ALTER TABLE row_energy ADD COLUMN steal_cores REAL;

ALTER TABLE loadtest_energy ADD COLUMN energy_scope TEXT;
ALTER TABLE loadtest_energy ADD COLUMN tokens INTEGER;
ALTER TABLE loadtest_energy ADD COLUMN timed_ns INTEGER;
ALTER TABLE loadtest_energy ADD COLUMN covered_ns INTEGER;
ALTER TABLE loadtest_energy ADD COLUMN idle_power_w REAL;
ALTER TABLE loadtest_energy ADD COLUMN j_per_token_above_idle REAL;
ALTER TABLE loadtest_energy ADD COLUMN other_cpu_cores REAL;
ALTER TABLE loadtest_energy ADD COLUMN steal_cores REAL;

ALTER TABLE spec_bench_energy ADD COLUMN energy_scope TEXT;
ALTER TABLE spec_bench_energy ADD COLUMN tokens INTEGER;
ALTER TABLE spec_bench_energy ADD COLUMN timed_ns INTEGER;
ALTER TABLE spec_bench_energy ADD COLUMN covered_ns INTEGER;
ALTER TABLE spec_bench_energy ADD COLUMN idle_power_w REAL;
ALTER TABLE spec_bench_energy ADD COLUMN j_per_token_above_idle REAL;
ALTER TABLE spec_bench_energy ADD COLUMN other_cpu_cores REAL;
ALTER TABLE spec_bench_energy ADD COLUMN steal_cores REAL;

ALTER TABLE spec_synth_energy ADD COLUMN energy_scope TEXT;
ALTER TABLE spec_synth_energy ADD COLUMN tokens INTEGER;
ALTER TABLE spec_synth_energy ADD COLUMN timed_ns INTEGER;
ALTER TABLE spec_synth_energy ADD COLUMN covered_ns INTEGER;
ALTER TABLE spec_synth_energy ADD COLUMN idle_power_w REAL;
ALTER TABLE spec_synth_energy ADD COLUMN j_per_token_above_idle REAL;
ALTER TABLE spec_synth_energy ADD COLUMN other_cpu_cores REAL;
ALTER TABLE spec_synth_energy ADD COLUMN steal_cores REAL;
