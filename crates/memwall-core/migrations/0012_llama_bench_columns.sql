-- bench_results takes llama-bench's columns, names, types and encodings (its
-- `test::get_fields()`), so that memwall's exports are read by llama.cpp's
-- scripts/compare-llama-bench.py.

-- `backend` held "<back end>; <llama_print_system_info()>": split into llama-bench's
-- `backends` and memwall's `system_info`.
ALTER TABLE bench_results ADD COLUMN backends TEXT NOT NULL DEFAULT '';
ALTER TABLE bench_results ADD COLUMN system_info TEXT NOT NULL DEFAULT '';
UPDATE bench_results SET
    backends = CASE WHEN instr(backend, ';') > 0
                    THEN trim(substr(backend, 1, instr(backend, ';') - 1))
                    ELSE trim(backend) END,
    system_info = CASE WHEN instr(backend, ';') > 0
                       THEN trim(substr(backend, instr(backend, ';') + 1))
                       ELSE '' END;
ALTER TABLE bench_results DROP COLUMN backend;

-- flash_attn: 'auto' | 'on' | 'off' becomes llama.cpp's llama_flash_attn_type (-1, 1, 0).
ALTER TABLE bench_results RENAME COLUMN flash_attn TO flash_attn_text;
ALTER TABLE bench_results ADD COLUMN flash_attn INTEGER NOT NULL DEFAULT -1;
UPDATE bench_results SET flash_attn = CASE flash_attn_text WHEN 'on' THEN 1 WHEN 'off' THEN 0 ELSE -1 END;
ALTER TABLE bench_results DROP COLUMN flash_attn_text;

-- GPUs are listed ", "-separated, as llama-bench lists them.
UPDATE bench_results SET gpu_info = replace(gpu_info, '; ', ', ');

-- memwall's commit count; unknown for rows stored before it was recorded.
ALTER TABLE bench_results ADD COLUMN build_number INTEGER;

-- llama.cpp parameters memwall has never exposed or changed: llama.cpp's defaults, in
-- llama-bench's encoding (true of every row stored so far, too).
ALTER TABLE bench_results ADD COLUMN cpu_mask TEXT NOT NULL DEFAULT '0x0';
ALTER TABLE bench_results ADD COLUMN cpu_strict INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bench_results ADD COLUMN poll INTEGER NOT NULL DEFAULT 50;
ALTER TABLE bench_results ADD COLUMN n_cpu_moe INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bench_results ADD COLUMN split_mode TEXT NOT NULL DEFAULT 'layer';
ALTER TABLE bench_results ADD COLUMN main_gpu INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bench_results ADD COLUMN no_kv_offload INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bench_results ADD COLUMN devices TEXT NOT NULL DEFAULT 'auto';
ALTER TABLE bench_results ADD COLUMN tensor_split TEXT NOT NULL DEFAULT '0.00';
ALTER TABLE bench_results ADD COLUMN tensor_buft_overrides TEXT NOT NULL DEFAULT 'none';
ALTER TABLE bench_results ADD COLUMN load_mode TEXT NOT NULL DEFAULT 'auto';
ALTER TABLE bench_results ADD COLUMN lazy_mode TEXT NOT NULL DEFAULT 'auto';
ALTER TABLE bench_results ADD COLUMN embeddings INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bench_results ADD COLUMN no_op_offload INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bench_results ADD COLUMN no_host INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bench_results ADD COLUMN repack INTEGER NOT NULL DEFAULT 1;
ALTER TABLE bench_results ADD COLUMN fit_target INTEGER NOT NULL DEFAULT 0;
ALTER TABLE bench_results ADD COLUMN fit_min_ctx INTEGER NOT NULL DEFAULT 0;
