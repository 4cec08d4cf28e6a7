-- A load point's bandwidth share is of the server's roof, not the client's STREAM:
-- where that roof came from (memwall serve's published STREAM, or the one the user
-- named with --roof), and the KV-cache type its bytes per token were computed at
-- (the server's own). NULL: not known (the note says why).
ALTER TABLE loadtest_points ADD COLUMN roof_source TEXT;
ALTER TABLE loadtest_points ADD COLUMN kv_type TEXT;
