-- The sweep deletes a refresh token once its idle expiry has passed (which is never later than
-- its absolute expiry): from then on no use of it is served, and a chain rotated every few
-- minutes kept every rotated row to its absolute expiry (90 days by default). The index the
-- sweep reads moves from the absolute expiry to the idle one.
DROP INDEX refresh_token_expires_idx;
CREATE INDEX refresh_token_idle_idx ON refresh_token (idle_expires_at);
