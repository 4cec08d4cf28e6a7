-- SQLite 0023 (the server's roof and KV type of a load point) on PostgreSQL.
ALTER TABLE loadtest_points ADD COLUMN roof_source TEXT;
ALTER TABLE loadtest_points ADD COLUMN kv_type TEXT;
