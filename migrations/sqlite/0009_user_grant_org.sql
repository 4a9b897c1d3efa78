-- ListUserGrants reads an organization's grants.
CREATE INDEX user_grant_org_idx ON user_grant (org_id);
