-- STREAM rows say which memory they measured: 'cpu' (host DRAM, every row before
-- this migration) or a GPU ('CUDA0 NVIDIA H200'). A CPU ceiling is only ever read
-- from 'cpu' rows and a GPU-offloaded row's ceiling only from its device's rows.
ALTER TABLE stream_results ADD COLUMN device TEXT NOT NULL DEFAULT 'cpu';
