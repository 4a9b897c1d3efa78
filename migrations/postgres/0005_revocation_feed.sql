-- Each replica mirrors the revocation table in memory and polls it for what is new. A row
-- carries the id of the transaction that wrote it; a poll reads the rows of transactions at or
-- after the oldest one still running at its previous poll (pg_snapshot_xmin), so a revocation
-- committed late, out of id order, is never skipped.
ALTER TABLE revocation ADD COLUMN txid xid8 NOT NULL DEFAULT pg_current_xact_id();
CREATE INDEX revocation_txid_idx ON revocation (txid);
