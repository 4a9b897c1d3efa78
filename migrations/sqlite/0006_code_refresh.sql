-- A code that grants offline_access carries what its first refresh token will hold, so that the
-- exchange marks the code used and stores that refresh token in one statement (one commit
-- instead of two). NULL in codes without offline_access, in codes minted before this migration
-- and in codes minted by a replica that predates it: their exchange stores the token by itself.
ALTER TABLE auth_code ADD COLUMN user_id TEXT;
ALTER TABLE auth_code ADD COLUMN session_id TEXT;
ALTER TABLE auth_code ADD COLUMN refresh_data TEXT;
