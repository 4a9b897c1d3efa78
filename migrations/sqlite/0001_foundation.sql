-- SQLite twin of migrations/postgres/0001_foundation.sql: only DDL types differ.
-- The foundation: the instance, organizations, users, projects, applications, members, keys.
-- Portable rules (DESIGN.md): flags are INTEGER 0/1, times are unix seconds (INTEGER), JSON is
-- TEXT. Case-insensitive uniqueness uses *_key columns normalised by latch, so PostgreSQL and
-- SQLite agree on non-ASCII text. The migrations/sqlite twin differs only in DDL types.

-- One row: the instance was bootstrapped.
CREATE TABLE instance (
    instance_id INTEGER PRIMARY KEY,
    default_org_id TEXT NOT NULL,
    created_at INTEGER NOT NULL
);

-- Settings and policies as JSON: owner_id '' is the instance, otherwise an organization.
CREATE TABLE setting (
    owner_id TEXT NOT NULL,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
    PRIMARY KEY (owner_id, kind)
);

CREATE TABLE org (
    org_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL UNIQUE,
    state INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL
);

CREATE TABLE org_domain (
    domain TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES org (org_id) ON DELETE CASCADE,
    is_verified INTEGER NOT NULL,
    is_primary INTEGER NOT NULL,
    validation_type INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX org_domain_org_idx ON org_domain (org_id);
CREATE UNIQUE INDEX org_domain_primary_key ON org_domain (org_id) WHERE is_primary = 1;

-- Human and machine users ("user" is reserved in PostgreSQL).
CREATE TABLE account (
    user_id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES org (org_id) ON DELETE CASCADE,
    user_type INTEGER NOT NULL,
    username TEXT NOT NULL,
    username_key TEXT NOT NULL UNIQUE,
    state INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
    first_name TEXT NOT NULL DEFAULT '',
    last_name TEXT NOT NULL DEFAULT '',
    nick_name TEXT NOT NULL DEFAULT '',
    display_name TEXT NOT NULL DEFAULT '',
    preferred_language TEXT NOT NULL DEFAULT '',
    gender INTEGER NOT NULL DEFAULT 0,
    email TEXT NOT NULL DEFAULT '',
    email_key TEXT NOT NULL DEFAULT '',
    email_verified INTEGER NOT NULL DEFAULT 0,
    phone TEXT NOT NULL DEFAULT '',
    phone_verified INTEGER NOT NULL DEFAULT 0,
    password_hash TEXT,
    password_change_required INTEGER NOT NULL DEFAULT 0,
    password_changed_at INTEGER,
    failed_password_attempts INTEGER NOT NULL DEFAULT 0,
    machine_name TEXT NOT NULL DEFAULT '',
    description TEXT NOT NULL DEFAULT '',
    access_token_type INTEGER NOT NULL DEFAULT 0,
    secret_digest BLOB
);
CREATE INDEX account_org_idx ON account (org_id);
CREATE INDEX account_email_idx ON account (email_key);

-- Public keys of machine users (jwt-bearer grant); the private half is never kept.
CREATE TABLE machine_key (
    key_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    key_type INTEGER NOT NULL,
    public_key TEXT NOT NULL,
    expires_at INTEGER,
    created_at INTEGER NOT NULL
);
CREATE INDEX machine_key_user_idx ON machine_key (user_id);

-- Personal access tokens, stored as SHA-256 digests.
CREATE TABLE pat (
    pat_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    token_digest BLOB NOT NULL UNIQUE,
    scopes TEXT NOT NULL,
    expires_at INTEGER,
    created_at INTEGER NOT NULL
);
CREATE INDEX pat_user_idx ON pat (user_id);

CREATE TABLE project (
    project_id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES org (org_id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    name_key TEXT NOT NULL,
    state INTEGER NOT NULL,
    role_assertion INTEGER NOT NULL,
    role_check INTEGER NOT NULL,
    has_project_check INTEGER NOT NULL,
    private_labeling INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
    UNIQUE (org_id, name_key)
);

CREATE TABLE project_role (
    project_id TEXT NOT NULL REFERENCES project (project_id) ON DELETE CASCADE,
    role_key TEXT NOT NULL,
    display_name TEXT NOT NULL,
    role_group TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
    PRIMARY KEY (project_id, role_key)
);

CREATE TABLE user_grant (
    user_grant_id TEXT PRIMARY KEY,
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    project_id TEXT NOT NULL REFERENCES project (project_id) ON DELETE CASCADE,
    org_id TEXT NOT NULL,
    role_keys TEXT NOT NULL,
    state INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
    UNIQUE (user_id, project_id)
);
CREATE INDEX user_grant_project_idx ON user_grant (project_id);

-- Administrative roles: member_kind 'iam' (scope_id ''), 'org' or 'project' (scope_id = its id).
CREATE TABLE member (
    member_kind TEXT NOT NULL,
    scope_id TEXT NOT NULL,
    user_id TEXT NOT NULL REFERENCES account (user_id) ON DELETE CASCADE,
    roles TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
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
    state INTEGER NOT NULL,
    app_kind INTEGER NOT NULL,
    client_id TEXT NOT NULL UNIQUE,
    secret_digest BLOB,
    auth_method INTEGER NOT NULL,
    config TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
    UNIQUE (project_id, name_key)
);

CREATE TABLE app_key (
    key_id TEXT PRIMARY KEY,
    app_id TEXT NOT NULL REFERENCES app (app_id) ON DELETE CASCADE,
    key_type INTEGER NOT NULL,
    public_key TEXT NOT NULL,
    expires_at INTEGER,
    created_at INTEGER NOT NULL
);
CREATE INDEX app_key_app_idx ON app_key (app_id);

-- Signing keys. generation is unique so that two replicas rotating at once create one key.
-- private_key is AES-256-GCM under a key derived from the master key, bound to key_id.
CREATE TABLE web_key (
    key_id TEXT PRIMARY KEY,
    generation INTEGER NOT NULL UNIQUE,
    alg TEXT NOT NULL,
    spec TEXT NOT NULL,
    public_jwk TEXT NOT NULL,
    private_key BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    changed_at INTEGER NOT NULL,
    activate_at INTEGER
);
