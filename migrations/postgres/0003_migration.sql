-- Second factors and imported identity-provider links (user import and export).

-- A TOTP secret (AES-256-GCM under a key derived from the master key, bound to the user id)
-- and the last time step used, so no code works twice.
ALTER TABLE account ADD COLUMN otp_secret BYTEA;
ALTER TABLE account ADD COLUMN otp_last_step BIGINT;
ALTER TABLE account ADD COLUMN failed_otp_attempts BIGINT NOT NULL DEFAULT 0;

-- Links to external identity providers, kept from imports for later use.
CREATE TABLE user_idp_link (
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    config_id TEXT NOT NULL,
    external_user_id TEXT NOT NULL,
    display_name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, config_id, external_user_id)
);
