-- The foundation: the instance, organizations, users, projects, applications, members, keys.
-- Portable rules (DESIGN.md): flags are BIGINT 0/1, times are unix seconds (BIGINT), JSON is
-- TEXT. Case-insensitive uniqueness uses *_key columns normalised by latch, so PostgreSQL and
-- SQLite agree on non-ASCII text. The migrations/sqlite twin differs only in DDL types.

-- One row: the instance was bootstrapped.
CREATE TABLE instance (
    instance_id BIGINT PRIMARY KEY,
    default_org_id TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- Settings and policies as JSON: owner_id '' is the instance, otherwise an organization.
CREATE TABLE setting (
    owner_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    changed_at BIGINT NOT NULL,
    PRIMARY KEY (owner_id, kind)
);

CREATE TABLE org (
    org_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL UNIQUE,
    state BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    changed_at BIGINT NOT NULL
);

CREATE TABLE org_domain (
    domain TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES org (org_id) ON DELETE CASCADE,
    is_verified BIGINT NOT NULL,
    is_primary BIGINT NOT NULL,
    validation_type BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX org_domain_org_idx ON org_domain (org_id);
CREATE UNIQUE INDEX org_domain_primary_key ON org_domain (org_id) WHERE is_primary = 1;

-- Human and machine users ("user" is reserved in PostgreSQL).
CREATE TABLE account (
    user_id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES org (org_id) ON DELETE CASCADE,
    user_type BIGINT NOT NULL,
    username TEXT NOT NULL,
    username_key TEXT NOT NULL UNIQUE,
    state BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    changed_at BIGINT NOT NULL,
    first_name TEXT NOT NULL DEFAULT '',
    last_name TEXT NOT NULL DEFAULT '',
    nick_name TEXT NOT NULL DEFAULT '',
    display_name TEXT NOT NULL DEFAULT '',
    preferred_language TEXT NOT NULL DEFAULT '',
    gender BIGINT NOT NULL DEFAULT 0,
    email TEXT NOT NULL DEFAULT '',
    email_key TEXT NOT NULL DEFAULT '',
    email_verified BIGINT NOT NULL DEFAULT 0,
    phone TEXT NOT NULL DEFAULT '',
    phone_verified BIGINT NOT NULL DEFAULT 0,
    password_hash TEXT,
    password_change_required BIGINT NOT NULL DEFAULT 0,
    password_changed_at BIGINT,
    failed_password_attempts BIGINT NOT NULL DEFAULT 0,
    machine_name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    access_token_type BIGINT NOT NULL DEFAULT 0,
    secret_digest BYTEA
);
CREATE INDEX account_org_idx ON account (org_id);
CREATE INDEX account_email_idx ON account (email_key);

-- Public keys of machine users (jwt-bearer grant); the private half is never kept.
CREATE TABLE machine_key (
    key_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    key_type BIGINT NOT NULL,
    public_key TEXT NOT NULL,
    expires_at BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX machine_key_user_idx ON machine_key (user_id);

-- Personal access tokens, stored as SHA-256 digests.
CREATE TABLE pat (
    pat_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    token_digest BYTEA NOT NULL UNIQUE,
    scopes TEXT NOT NULL,
    expires_at BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX pat_user_idx ON pat (user_id);

CREATE TABLE project (
    project_id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES org (org_id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    state BIGINT NOT NULL,
    role_assertion BIGINT NOT NULL,
    role_check BIGINT NOT NULL,
    has_project_check BIGINT NOT NULL,
    private_labeling BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    changed_at BIGINT NOT NULL,
    UNIQUE (org_id, name_key)
);

CREATE TABLE project_role (
    project_id TEXT NOT NULL REFERENCES project (project_id) ON DELETE CASCADE,
    role_key TEXT NOT NULL,
    display_name TEXT NOT NULL,
    role_group TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    changed_at BIGINT NOT NULL,
    PRIMARY KEY (project_id, role_key)
);

CREATE TABLE user_grant (
    user_grant_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES project (project_id) ON DELETE CASCADE,
    org_id TEXT NOT NULL,
    role_keys TEXT NOT NULL,
    state BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    changed_at BIGINT NOT NULL,
    UNIQUE (user_id, project_id)
);
CREATE INDEX user_grant_project_idx ON user_grant (project_id);

-- Administrative roles: member_kind 'iam' (scope_id ''), 'org' or 'project' (scope_id = its id).
CREATE TABLE member (
    member_kind TEXT NOT NULL,
    scope_id TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    roles TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    changed_at BIGINT NOT NULL,
    PRIMARY KEY (member_kind, scope_id, user_id)
);
CREATE INDEX member_user_idx ON member (user_id);

-- OIDC (app_kind 1) and API (app_kind 2) applications; the OIDC configuration is JSON.
CREATE TABLE app (
    app_id TEXT PRIMARY KEY,
    project_id TEXT NOT NULL REFERENCES project (project_id) ON DELETE CASCADE,
    org_id TEXT NOT NULL,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    state BIGINT NOT NULL,
    app_kind BIGINT NOT NULL,
    client_id TEXT NOT NULL UNIQUE,
    secret_digest BYTEA,
    auth_method BIGINT NOT NULL,
    config TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    changed_at BIGINT NOT NULL,
    UNIQUE (project_id, name_key)
);

CREATE TABLE app_key (
    key_id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES app (app_id) ON DELETE CASCADE,
    key_type BIGINT NOT NULL,
    public_key TEXT NOT NULL,
    expires_at BIGINT,
    created_at BIGINT NOT NULL
);
CREATE INDEX app_key_app_idx ON app_key (app_id);

-- Signing keys. generation is unique so that two replicas rotating at once create one key.
-- private_key is AES-256-GCM under a key derived from the master key, bound to key_id.
CREATE TABLE web_key (
    key_id TEXT PRIMARY KEY,
    generation BIGINT NOT NULL UNIQUE,
    alg TEXT NOT NULL,
    spec TEXT NOT NULL,
    public_jwk TEXT NOT NULL,
    private_key BYTEA NOT NULL,
    created_at BIGINT NOT NULL,
    changed_at BIGINT NOT NULL,
    activate_at BIGINT
);
