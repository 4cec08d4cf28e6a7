-- Every run carries a UUID (RFC 4122 version 4, lowercase text): its identity across
-- stores. `memwall push` copies a run to a shared PostgreSQL store only when no run
-- there has its UUID, so pushing twice adds nothing. Old rows get one here; new rows
-- get one at insert (the trigger below fills a missing one, so every writer of `runs`
-- is covered). SQLite cannot add a NOT NULL column without a constant default: the
-- trigger and the unique index stand in for it.
ALTER TABLE runs ADD COLUMN uuid TEXT;

UPDATE runs SET uuid = lower(
    hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
    || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
    || '-' || hex(randomblob(6)))
WHERE uuid IS NULL;

CREATE UNIQUE INDEX runs_uuid ON runs(uuid);

CREATE TRIGGER runs_get_a_uuid AFTER INSERT ON runs
WHEN NEW.uuid IS NULL
BEGIN
    UPDATE runs SET uuid = lower(
        hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2)
        || '-' || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2)
        || '-' || hex(randomblob(6)))
    WHERE id = NEW.id;
END;
