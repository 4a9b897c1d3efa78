-- A sign-in moves the browser's pending requests (other tabs) to its new cookie by the old one.
CREATE INDEX auth_request_ua_key_idx ON auth_request (ua_key);
