-- memwall store: every compute peak carries its plausibility bound
-- (cores × clock × lanes × ops per lane × issue ports) and where its clock came from.
-- Rows stored before this have no bound (NULL) and are no longer used as a roof:
-- the kernels that measured them could be hoisted by the compiler (an AVX2 int8
-- peak ~20× what the CPU can do), so nothing shows that they are physically possible.

ALTER TABLE peak_results ADD COLUMN bound_gflops REAL;       -- GFLOP/s (GOP/s for int8), ≥ gflops
ALTER TABLE peak_results ADD COLUMN clock_ghz REAL;          -- the bound's clock
ALTER TABLE peak_results ADD COLUMN clock_source TEXT;      -- sysfs cpuinfo_max_freq | measured dependent-add chain
