-- SQLite twin of migrations/postgres/0003_migration.sql: only DDL types differ.
-- Second factors and imported identity-provider links (user import and export).

-- A TOTP secret (AES-256-GCM under a key derived from the master key, bound to the user id)
-- and the last time step used, so no code works twice.
ALTER TABLE account ADD COLUMN otp_secret BLOB;
ALTER TABLE account ADD COLUMN otp_last_step INTEGER;
ALTER TABLE account ADD COLUMN failed_otp_attempts INTEGER NOT NULL DEFAULT 0;

-- Links to external identity providers, kept from imports for later use.
CREATE TABLE user_idp_link (
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    config_id TEXT NOT NULL,
    external_user_id TEXT NOT NULL,
    display_name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (user_id, config_id, external_user_id)
);
