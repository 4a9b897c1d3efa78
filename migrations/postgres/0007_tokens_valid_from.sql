-- Tokens, codes and browser sessions of a user issued before this second do not count. Set to
-- the creation time when an account is created (so an account that reuses a deleted account's
-- id does not inherit its tokens), and to the time of the change when an administrator locks or
-- deactivates the user or sets its password. 0 for accounts created before this migration.
ALTER TABLE account ADD COLUMN tokens_valid_from BIGINT NOT NULL DEFAULT 0;
