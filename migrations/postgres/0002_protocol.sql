-- The browser flow and the tokens: pending authorization requests, browser sessions,
-- authorization codes, refresh tokens, revocations, the opaque-token key, one-time codes sent
-- by e-mail, and used assertion ids. Secrets (codes, tokens, cookie values) are stored as
-- SHA-256 digests only.

-- A pending /authorize request; its id is in the login page URL. ua_key binds it to the
-- browser that started it (digest of the latch_ua cookie).
CREATE TABLE auth_request (
    auth_request_id TEXT PRIMARY KEY,
    ua_key BYTEA NOT NULL,
    client_id TEXT NOT NULL,
    params TEXT NOT NULL,
    csrf_token TEXT NOT NULL,
    user_id TEXT,
    progress TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX auth_request_expires_idx ON auth_request (expires_at);

-- One session per user per browser.
CREATE TABLE session (
    session_id TEXT PRIMARY KEY,
    ua_key BYTEA NOT NULL,
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    auth_time BIGINT NOT NULL,
    amr TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    last_used_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    UNIQUE (ua_key, user_id)
);
CREATE INDEX session_user_idx ON session (user_id);
CREATE INDEX session_expires_idx ON session (expires_at);

CREATE TABLE auth_code (
    code_hash BYTEA PRIMARY KEY,
    grant_id TEXT NOT NULL,
    client_id TEXT NOT NULL,
    data TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    used_at BIGINT
);
CREATE INDEX auth_code_expires_idx ON auth_code (expires_at);

-- Refresh tokens rotate: each use marks the token rotated and issues the next one of the same
-- grant (chain); presenting a rotated token revokes the whole grant.
CREATE TABLE refresh_token (
    token_hash BYTEA PRIMARY KEY,
    grant_id TEXT NOT NULL,
    client_id TEXT NOT NULL,
    user_id TEXT NOT NULL,
    session_id TEXT,
    data TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    idle_expires_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    rotated_at BIGINT,
    revoked_at BIGINT
);
CREATE INDEX refresh_token_grant_idx ON refresh_token (grant_id);
CREATE INDEX refresh_token_session_idx ON refresh_token (session_id);
CREATE INDEX refresh_token_expires_idx ON refresh_token (expires_at);

-- Revoked access tokens ('t:' + jti), ended sessions ('s:' + session id) and revoked grants
-- ('g:' + grant id), kept until every token they could concern has expired.
CREATE TABLE revocation (
    revoked_key TEXT PRIMARY KEY,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX revocation_expires_idx ON revocation (expires_at);

-- The AES-256-GCM key of opaque access tokens, encrypted under the master key.
CREATE TABLE token_key (
    generation BIGINT PRIMARY KEY,
    key_enc BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);

-- One-time codes sent by e-mail (address verification, initial password).
CREATE TABLE user_code (
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    purpose TEXT NOT NULL,
    code_hash BYTEA NOT NULL,
    attempts BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (user_id, purpose)
);

-- Client and jwt-bearer assertion ids seen, refused again until the assertion expires.
CREATE TABLE assertion_jti (
    jti_key TEXT PRIMARY KEY,
    expires_at BIGINT NOT NULL
);
CREATE INDEX assertion_jti_expires_idx ON assertion_jti (expires_at);
