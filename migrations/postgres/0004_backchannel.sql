-- Back-channel logout (OpenID Connect Back-Channel Logout 1.0): which applications received
-- tokens in which browser session, so that ending the session can notify each of them. Only
-- applications with a back-channel logout URI are noted. Kept until the session expires.
CREATE TABLE session_client (
    session_id TEXT NOT NULL,
    client_id TEXT NOT NULL,
    expires_at BIGINT NOT NULL,
    PRIMARY KEY (session_id, client_id)
);
CREATE INDEX session_client_expires_idx ON session_client (expires_at);
