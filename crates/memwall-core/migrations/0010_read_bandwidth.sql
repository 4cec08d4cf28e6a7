-- The read-only STREAM kernel beside triad.
-- stream_results.kernel is free text, so read rows need no schema change there.
-- Every bench row names the STREAM kernel behind bandwidth_gbps / ceiling_ts / achieved
-- (rows stored before this column existed used triad), and carries the decode ceiling
-- computed with the read kernel's bandwidth (NULL for pp rows and when not measured).
ALTER TABLE bench_results ADD COLUMN bandwidth_kernel TEXT NOT NULL DEFAULT 'triad';
ALTER TABLE bench_results ADD COLUMN read_bandwidth_gbps REAL;      -- read kernel best, 1e9 B/s
ALTER TABLE bench_results ADD COLUMN decode_ceiling_ts_read REAL;   -- n_seqs × read bandwidth ÷ mean bytes per step
ALTER TABLE bench_results ADD COLUMN achieved_read REAL;            -- avg_ts ÷ decode_ceiling_ts_read
