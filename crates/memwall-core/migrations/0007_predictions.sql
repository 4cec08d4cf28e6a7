-- memwall store, schema 7: predictions in ink (issue 7).
-- A prediction sheet is written before a benchmark run and never changed:
-- sha256 = SHA-256("memwall-prediction-v1\n" || prev_sha256 || "\n" || created_at
-- || "\n" || payload_json), chained to the previous sheet (prev_sha256 = 'genesis'
-- for the first). The triggers refuse edits and deletions; memwall re-hashes every
-- sheet it reads, so edits made with the triggers dropped are detected.

CREATE TABLE prediction_sheets (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,            -- UTC RFC 3339, milliseconds
    hostname TEXT NOT NULL,
    prev_sha256 TEXT NOT NULL,
    payload_json TEXT NOT NULL,          -- SheetPayload, hashed exactly as stored
    sha256 TEXT NOT NULL UNIQUE
);

CREATE TRIGGER prediction_sheets_no_update BEFORE UPDATE ON prediction_sheets
BEGIN
    SELECT RAISE(ABORT, 'prediction sheets are write-once (predictions in ink)');
END;

CREATE TRIGGER prediction_sheets_no_delete BEFORE DELETE ON prediction_sheets
BEGIN
    SELECT RAISE(ABORT, 'prediction sheets are write-once (predictions in ink)');
END;

-- Scoring a sheet against a run (predicted vs measured); re-scoring replaces the row.
CREATE TABLE prediction_scores (
    sheet_id INTEGER NOT NULL REFERENCES prediction_sheets(id),
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    scored_at TEXT NOT NULL,
    result_json TEXT NOT NULL,           -- Scorecard
    PRIMARY KEY (sheet_id, run_id)
);
