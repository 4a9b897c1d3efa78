-- Until when a signing key stays published at least, whenever it retires: set on every key
-- when the access or ID token lifetime is shortened, to the end of the longest lifetime a token
-- it signed before could have (plus the refresh interval and a minute). NULL: no such bound;
-- a retired key then stays for the refresh interval plus the current longest lifetime plus a
-- minute after it stopped signing.
ALTER TABLE web_key ADD COLUMN keep_until BIGINT;
