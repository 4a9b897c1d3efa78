-- The time of the last wrong second-factor code: the pace of further tries (store::credentials::otp_claim)
-- counts from it, not from changed_at, which other writes (a wrong password, a profile change) move.
ALTER TABLE account ADD COLUMN otp_failed_at BIGINT;
