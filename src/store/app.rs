//! OIDC and API applications. The OIDC configuration is kept as JSON.

use serde::{Deserialize, Serialize};
use sqlx::FromRow;

use super::query::{Builder, Page};
use super::{Conn, Result, fold, from_json, to_json};
use crate::domain::enums::{
    ApiAuthMethod, AppState, OidcAppType, OidcAuthMethod, OidcGrantType, OidcResponseType, OidcTokenType,
    TextQueryMethod,
};

/// Everything an OIDC application is configured with, except its name and auth method.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(default)]
pub struct OidcConfig {
    pub redirect_uris: Vec<String>,
    pub response_types: Vec<OidcResponseType>,
    pub grant_types: Vec<OidcGrantType>,
    pub app_type: OidcAppType,
    pub post_logout_redirect_uris: Vec<String>,
    pub dev_mode: bool,
    pub access_token_type: OidcTokenType,
    pub access_token_role_assertion: bool,
    pub id_token_role_assertion: bool,
    pub id_token_userinfo_assertion: bool,
    /// Allowed clock skew in milliseconds (0 to 5000).
    pub clock_skew_ms: i64,
    pub additional_origins: Vec<String>,
    pub skip_native_app_success_page: bool,
    pub back_channel_logout_uri: String,
    /// `{"loginV1": {}}` or `{"loginV2": {"baseUri": ...}}`, kept as given.
    pub login_version: Option<serde_json::Value>,
}

#[derive(Debug, Clone)]
pub enum AppKind {
    Oidc { auth_method: OidcAuthMethod, config: OidcConfig },
    Api { auth_method: ApiAuthMethod },
}

#[derive(Debug, Clone)]
pub struct App {
    pub app_id: String,
    pub project_id: String,
    pub org_id: String,
    pub name: String,
    pub state: AppState,
    pub client_id: String,
    pub secret_digest: Option<Vec<u8>>,
    pub kind: AppKind,
    pub created_at: i64,
    pub changed_at: i64,
}

const KIND_OIDC: i64 = 1;
const KIND_API: i64 = 2;

#[derive(FromRow)]
struct Row {
    app_id: String,
    project_id: String,
    org_id: String,
    name: String,
    state: i64,
    app_kind: i64,
    client_id: String,
    secret_digest: Option<Vec<u8>>,
    auth_method: i64,
    config: String,
    created_at: i64,
    changed_at: i64,
}

impl TryFrom<Row> for App {
    type Error = super::StoreError;
    fn try_from(r: Row) -> Result<Self> {
        let kind = if r.app_kind == KIND_API {
            AppKind::Api { auth_method: ApiAuthMethod::from_number(r.auth_method).unwrap_or_default() }
        } else {
            AppKind::Oidc {
                auth_method: OidcAuthMethod::from_number(r.auth_method).unwrap_or_default(),
                config: from_json("app.config", &r.config)?,
            }
        };
        Ok(App {
            app_id: r.app_id,
            project_id: r.project_id,
            org_id: r.org_id,
            name: r.name,
            state: AppState::from_number(r.state).unwrap_or_default(),
            client_id: r.client_id,
            secret_digest: r.secret_digest,
            kind,
            created_at: r.created_at,
            changed_at: r.changed_at,
        })
    }
}

fn parts(kind: &AppKind) -> (i64, i64, String) {
    match kind {
        AppKind::Oidc { auth_method, config } => (KIND_OIDC, auth_method.number(), to_json(config)),
        AppKind::Api { auth_method } => (KIND_API, auth_method.number(), "{}".into()),
    }
}

const SELECT: &str = "SELECT app_id, project_id, org_id, name, state, app_kind, client_id, secret_digest, \
     auth_method, config, created_at, changed_at FROM app";

pub async fn insert(c: &mut Conn, a: &App) -> Result<()> {
    let (kind, auth, config) = parts(&a.kind);
    sqlx::query(
        "INSERT INTO app (app_id, project_id, org_id, name, name_key, state, app_kind, client_id, secret_digest, \
         auth_method, config, created_at, changed_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)",
    )
    .bind(&a.app_id)
    .bind(&a.project_id)
    .bind(&a.org_id)
    .bind(&a.name)
    .bind(fold(&a.name))
    .bind(a.state.number())
    .bind(kind)
    .bind(&a.client_id)
    .bind(a.secret_digest.clone())
    .bind(auth)
    .bind(config)
    .bind(a.created_at)
    .execute(&mut *c)
    .await?;
    Ok(())
}

pub async fn get(c: &mut Conn, project_id: &str, app_id: &str) -> Result<Option<App>> {
    let row: Option<Row> = sqlx::query_as(&format!("{SELECT} WHERE project_id = $1 AND app_id = $2"))
        .bind(project_id)
        .bind(app_id)
        .fetch_optional(&mut *c)
        .await?;
    row.map(App::try_from).transpose()
}

pub async fn get_by_client_id(c: &mut Conn, client_id: &str) -> Result<Option<App>> {
    let row: Option<Row> =
        sqlx::query_as(&format!("{SELECT} WHERE client_id = $1")).bind(client_id).fetch_optional(&mut *c).await?;
    row.map(App::try_from).transpose()
}

pub async fn name_taken(c: &mut Conn, project_id: &str, name: &str) -> Result<bool> {
    let row: Option<(String,)> = sqlx::query_as("SELECT app_id FROM app WHERE project_id = $1 AND name_key = $2")
        .bind(project_id)
        .bind(fold(name))
        .fetch_optional(&mut *c)
        .await?;
    Ok(row.is_some())
}

/// Renames an application; false when it is gone. A name taken meanwhile in the project is
/// [`super::StoreError::Conflict`].
pub async fn rename(c: &mut Conn, app_id: &str, name: &str, now: i64) -> Result<bool> {
    let r = sqlx::query("UPDATE app SET name = $1, name_key = $2, changed_at = $3 WHERE app_id = $4")
        .bind(name)
        .bind(fold(name))
        .bind(now)
        .bind(app_id)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Replaces the auth method and configuration.
pub async fn update_kind(c: &mut Conn, app_id: &str, kind: &AppKind, now: i64) -> Result<bool> {
    let (_, auth, config) = parts(kind);
    let r = sqlx::query("UPDATE app SET auth_method = $1, config = $2, changed_at = $3 WHERE app_id = $4")
        .bind(auth)
        .bind(config)
        .bind(now)
        .bind(app_id)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn set_secret(c: &mut Conn, app_id: &str, digest: Option<Vec<u8>>, now: i64) -> Result<bool> {
    let r = sqlx::query("UPDATE app SET secret_digest = $1, changed_at = $2 WHERE app_id = $3")
        .bind(digest)
        .bind(now)
        .bind(app_id)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Moves an application from state `from` to `to`; false when it was not in `from`.
pub async fn set_state(c: &mut Conn, app_id: &str, from: AppState, to: AppState, now: i64) -> Result<bool> {
    let r = sqlx::query("UPDATE app SET state = $1, changed_at = $2 WHERE app_id = $3 AND state = $4")
        .bind(to.number())
        .bind(now)
        .bind(app_id)
        .bind(from.number())
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Deletes what the protocol keeps for the applications that `clients` selects (a query of
/// client ids with one parameter, `$1` = `value`): refresh tokens, codes, pending sign-ins and
/// back-channel registrations. They have no foreign keys: left behind, they would come back to
/// life with an import that brings the same client ids again.
pub(super) async fn forget_clients(c: &mut Conn, clients: &str, value: &str) -> Result<()> {
    for table in ["refresh_token", "auth_code", "auth_request", "session_client"] {
        sqlx::query(&format!("DELETE FROM {table} WHERE client_id IN ({clients})"))
            .bind(value)
            .execute(&mut *c)
            .await?;
    }
    Ok(())
}

/// Deletes an application with its keys and what the protocol keeps for it.
pub async fn delete(c: &mut Conn, app_id: &str) -> Result<bool> {
    forget_clients(c, "SELECT client_id FROM app WHERE app_id = $1", app_id).await?;
    let r = sqlx::query("DELETE FROM app WHERE app_id = $1").bind(app_id).execute(&mut *c).await?;
    Ok(r.rows_affected() == 1)
}

pub async fn search(
    c: &mut Conn,
    project_id: &str,
    name: Option<(&str, TextQueryMethod)>,
    page: Page,
) -> Result<(Vec<App>, i64)> {
    let mut filter = Builder::new(" WHERE project_id = ");
    filter.text(project_id);
    if let Some((v, m)) = name {
        filter.push(" AND ");
        filter.text_match("name", v, m);
    }
    let (where_sql, args) = filter.into_parts();
    let total =
        Builder::with_args(&format!("SELECT COUNT(*) FROM app{where_sql}"), args.clone()).fetch_count(c).await?;
    let mut list = Builder::with_args(&format!("{SELECT}{where_sql}"), args);
    list.page("app_id", page);
    let rows: Vec<Row> = list.fetch_all(c).await?;
    let apps = rows.into_iter().map(App::try_from).collect::<Result<Vec<_>>>()?;
    Ok((apps, total))
}

pub async fn list_by_org(c: &mut Conn, org_id: &str) -> Result<Vec<App>> {
    let rows: Vec<Row> =
        sqlx::query_as(&format!("{SELECT} WHERE org_id = $1 ORDER BY app_id")).bind(org_id).fetch_all(&mut *c).await?;
    rows.into_iter().map(App::try_from).collect()
}

pub async fn get_by_id(c: &mut Conn, app_id: &str) -> Result<Option<App>> {
    let row: Option<Row> =
        sqlx::query_as(&format!("{SELECT} WHERE app_id = $1")).bind(app_id).fetch_optional(&mut *c).await?;
    row.map(App::try_from).transpose()
}
