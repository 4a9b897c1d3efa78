-- SQLite twin of migrations/postgres/0005_revocation_feed.sql. SQLite has one writer at a time,
-- so rows commit in the order of an ever-growing id, and a poll reads the rows after the
-- largest id it saw. AUTOINCREMENT keeps ids of swept rows from being given out again.
CREATE TABLE revocation_feed (
    txid INTEGER PRIMARY KEY AUTOINCREMENT,
    revoked_key TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
INSERT INTO revocation_feed (revoked_key, created_at, expires_at)
    SELECT revoked_key, created_at, expires_at FROM revocation;
DROP TABLE revocation;
ALTER TABLE revocation_feed RENAME TO revocation;
CREATE INDEX revocation_expires_idx ON revocation (expires_at);
