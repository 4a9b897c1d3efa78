//! Machine users: their client secret, key pairs (jwt-bearer grant) and personal access tokens.

use axum::Json;
use axum::extract::{Path, State};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::users::{
    AddUserResponse, check_login_name_free, check_user_name, check_username_domain, load_user, load_user_to_change,
};
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, ListDetails, ListQuery, ListResponse, parse_ts, ts};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::crypto::{keys, secret};
use crate::domain::enums::{AccessTokenType, KeyType, UserState};
use crate::domain::roles::Permission;
use crate::domain::validate;
use crate::id::new_id;
use crate::store::key::{self, Owner, Pat, PublicKey};
use crate::store::user::{Kind, Machine, User};
use crate::store::{Conn, user};

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct AddMachineUserRequest {
    #[schema(required = true, min_length = 1, max_length = 200)]
    user_name: String,
    #[schema(required = true, min_length = 1, max_length = 200)]
    name: String,
    description: String,
    access_token_type: AccessTokenType,
    user_id: Option<String>,
}

#[utoipa::path(post, path = "/users/machine", request_body = AddMachineUserRequest, responses((status = 200, body = AddUserResponse)))]
pub async fn add_machine(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<AddMachineUserRequest>,
) -> ApiResult<Json<AddUserResponse>> {
    caller.require(Permission::UserWrite)?;
    let r = "AddMachineUserRequest";
    check_user_name(r, &req.user_name)?;
    validate::required(r, "name", &req.name, 200)?;
    validate::max(r, "description", &req.description, 500)?;
    if let Some(id) = &req.user_id {
        validate::required(r, "userId", id, 200)?;
    }
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let user_id = insert_machine(
        &mut tx,
        &caller.org_id,
        req.user_id.clone(),
        req.user_name.trim(),
        Machine {
            name: req.name.trim().to_string(),
            description: req.description.trim().to_string(),
            access_token_type: req.access_token_type,
            secret_digest: None,
        },
        now,
    )
    .await?;
    tx.commit().await?;
    Ok(Json(AddUserResponse { user_id, details: Details::created(now, &caller.org_id) }))
}

/// A machine user's user name is the client_id of its client_credentials tokens (and names it
/// at revocation), and the first entry of their audience: the client id of an application, of
/// any organization, would make its tokens pass for that application's, a project's id for
/// tokens of that project's applications (resource servers take a token whose audience names
/// their project), and a user's id would match that user's jwt-bearer tokens (whose client_id
/// is the user id).
pub async fn check_machine_name(c: &mut Conn, name: &str) -> ApiResult<()> {
    if crate::store::app::get_by_client_id(c, name).await?.is_some() {
        return Err(ApiError::invalid("the user name is the client id of an application; choose another user name")
            .with_id("USER-NameIsClientId"));
    }
    if crate::store::project::get(c, name).await?.is_some() {
        return Err(ApiError::invalid("the user name is the id of a project; choose another user name")
            .with_id("USER-NameIsProjectId"));
    }
    if user::get(c, name).await?.is_some() {
        return Err(
            ApiError::invalid("the user name is a user's id; choose another user name").with_id("USER-NameIsUserId")
        );
    }
    Ok(())
}

/// A machine user's id is the client_id of its jwt-bearer tokens and the first entry of their
/// audience: an id the caller chose must not be an application's client id or a project's id
/// (of any organization), nor the user name of another machine user (the client_id of that
/// user's client_credentials tokens).
async fn check_machine_id(c: &mut Conn, id: &str) -> ApiResult<()> {
    if crate::store::app::get_by_client_id(c, id).await?.is_some() {
        return Err(ApiError::invalid("the user id is the client id of an application; choose another user id")
            .with_id("USER-IdIsClientId"));
    }
    if crate::store::project::get(c, id).await?.is_some() {
        return Err(ApiError::invalid("the user id is the id of a project; choose another user id")
            .with_id("USER-IdIsProjectId"));
    }
    if user::username_taken(c, id).await? {
        return Err(
            ApiError::invalid("the user id is a user's name; choose another user id").with_id("USER-IdIsUserName")
        );
    }
    Ok(())
}

pub async fn insert_machine(
    c: &mut Conn,
    org_id: &str,
    user_id: Option<String>,
    username: &str,
    m: Machine,
    now: i64,
) -> ApiResult<String> {
    check_username_domain(c, org_id, username).await?;
    if user::username_taken(c, username).await? {
        return Err(ApiError::exists("a user with this user name already exists").with_id("USER-AlreadyExists"));
    }
    check_login_name_free(c, org_id, username, None).await?;
    check_machine_name(c, username.trim()).await?;
    let user_id = match user_id {
        Some(id) => {
            check_machine_id(c, &id).await?;
            id
        }
        // Its id is the client id of its jwt-bearer tokens: none an import chose for a project
        // or an application (see `fresh_audience_id`).
        None => crate::management::apps::fresh_audience_id(c, new_id).await?,
    };
    if user::get(c, &user_id).await?.is_some() {
        return Err(ApiError::exists("a user with this id already exists").with_id("USER-AlreadyExists"));
    }
    user::insert(
        c,
        &User {
            user_id: user_id.clone(),
            org_id: org_id.to_string(),
            username: username.to_string(),
            state: UserState::Active,
            created_at: now,
            changed_at: now,
            tokens_valid_from: now,
            kind: Kind::Machine(m),
            org_domain: String::new(),
            org_active: true,
            read_at: None,
        },
    )
    .await?;
    Ok(user_id)
}

fn require_machine(u: &User) -> ApiResult<&Machine> {
    u.machine().ok_or_else(|| ApiError::precondition("the user is not a machine user").with_id("USER-NotMachine"))
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateMachineRequest {
    #[schema(required = true, min_length = 1, max_length = 200)]
    name: String,
    description: String,
    access_token_type: AccessTokenType,
}

#[utoipa::path(put, path = "/users/{user_id}/machine", request_body = UpdateMachineRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_machine(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<UpdateMachineRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    validate::required("UpdateMachineRequest", "name", &req.name, 200)?;
    validate::max("UpdateMachineRequest", "description", &req.description, 500)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    require_machine(&u)?;
    user::update_machine(&mut tx, &user_id, req.name.trim(), req.description.trim(), req.access_token_type, now)
        .await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = MachineSecretResponse)]
#[serde(rename_all = "camelCase")]
pub struct SecretResponse {
    client_id: String,
    client_secret: String,
    details: Details,
}

/// A new client secret for the client_credentials grant; the client id is the user name. The
/// secret is shown only in this response.
#[utoipa::path(put, path = "/users/{user_id}/secret", responses((status = 200, body = SecretResponse)))]
pub async fn generate_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<SecretResponse>> {
    caller.require(Permission::UserWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    require_machine(&u)?;
    let client_secret = secret::new_secret();
    // A user deleted since it was read gets no secret that nothing would take.
    crate::management::users::still_there(
        user::set_machine_secret(&mut tx, &user_id, Some(secret::digest(&client_secret)), now).await?,
    )?;
    tx.commit().await?;
    Ok(Json(SecretResponse { client_id: u.username.clone(), client_secret, details: Details::changed(now, &u.org_id) }))
}

#[utoipa::path(delete, path = "/users/{user_id}/secret", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_secret(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    if require_machine(&u)?.secret_digest.is_none() {
        return Err(ApiError::not_found("the user has no secret").with_id("USER-NoSecret"));
    }
    crate::management::users::still_there(user::set_machine_secret(&mut tx, &user_id, None, now).await?)?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct AddKeyRequest {
    #[serde(rename = "type")]
    #[schema(required = true, schema_with = crate::management::machine::json_key_type_schema)]
    key_type: KeyType,
    expiration_date: Option<String>,
    public_key: Option<String>,
}

/// The schema of `type` in add-key requests: latch makes JSON keys only.
pub fn json_key_type_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new().schema_type(Type::String).enum_values(Some([KeyType::Json.name()])).into()
}

/// The checked parts of an add-key request: expiry and, when the caller brings one, the PEM
/// public key.
pub struct KeyInput {
    pub expires_at: Option<i64>,
    pub public_pem: Option<String>,
}

fn decode_b64(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    STANDARD
        .decode(s)
        .or_else(|_| STANDARD_NO_PAD.decode(s))
        .or_else(|_| URL_SAFE.decode(s))
        .or_else(|_| URL_SAFE_NO_PAD.decode(s))
        .ok()
}

pub fn check_key_input(
    req: &str,
    key_type: KeyType,
    expiration: Option<&str>,
    public_key: Option<&str>,
    now: i64,
) -> ApiResult<KeyInput> {
    if key_type != KeyType::Json {
        return Err(ApiError::invalid(format!("invalid {req}.type: value must be KEY_TYPE_JSON")));
    }
    let expires_at = match expiration.filter(|s| !s.is_empty()) {
        Some(s) => {
            let t = parse_ts(&format!("{req}.expirationDate"), s)?;
            if t <= now {
                return Err(ApiError::invalid(format!("invalid {req}.expirationDate: must be in the future")));
            }
            Some(t)
        }
        None => None,
    };
    let public_pem = match public_key.filter(|s| !s.is_empty()) {
        Some(b64) => {
            let pem = decode_b64(b64).and_then(|b| String::from_utf8(b).ok()).ok_or_else(|| {
                ApiError::invalid(format!("invalid {req}.publicKey: must be the base64 of a PEM public key"))
            })?;
            if keys::classify_public_pem(&pem).is_none() {
                return Err(ApiError::invalid(format!(
                    "invalid {req}.publicKey: not a PEM public key latch verifies signatures with (RSA of 2048 to 8192 bits, EC on P-256, Ed25519)"
                )));
            }
            Some(pem)
        }
        None => None,
    };
    Ok(KeyInput { expires_at, public_pem })
}

/// A key to store: its public half and, for a pair latch generated, the private half, handed
/// out once.
pub struct KeyMaterial {
    expires_at: Option<i64>,
    public_pem: String,
    private_pem: Option<String>,
}

/// The key the caller brought, or a new pair (generated off the runtime). Called before the
/// transaction that stores it, so that no transaction waits for the generation.
pub async fn key_material(input: KeyInput) -> ApiResult<KeyMaterial> {
    let expires_at = input.expires_at;
    Ok(match input.public_pem {
        Some(public_pem) => KeyMaterial { expires_at, public_pem, private_pem: None },
        None => {
            let kp = tokio::task::spawn_blocking(keys::generate_client_key)
                .await
                .map_err(ApiError::internal)?
                .map_err(ApiError::internal)?;
            KeyMaterial { expires_at, public_pem: kp.public_pem, private_pem: Some(kp.private_pem) }
        }
    })
}

/// Stores a public key; returns the key id and, for a generated pair, the private key PEM.
pub async fn store_key(
    c: &mut Conn,
    owner: Owner,
    owner_id: &str,
    m: KeyMaterial,
    now: i64,
) -> ApiResult<(String, Option<String>)> {
    let key_id = new_id();
    key::insert_key(
        c,
        owner,
        &PublicKey {
            key_id: key_id.clone(),
            owner_id: owner_id.to_string(),
            key_type: KeyType::Json,
            public_key: m.public_pem,
            expires_at: m.expires_at,
            created_at: now,
        },
    )
    .await?;
    Ok((key_id, m.private_pem))
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddKeyResponse {
    key_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_details: Option<String>,
    details: Details,
}

#[utoipa::path(post, path = "/users/{user_id}/keys", request_body = AddKeyRequest, responses((status = 200, body = AddKeyResponse)))]
pub async fn add_key(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<AddKeyRequest>,
) -> ApiResult<Json<AddKeyResponse>> {
    caller.require(Permission::UserWrite)?;
    let now = state.clock.now();
    let input = check_key_input(
        "AddMachineKeyRequest",
        req.key_type,
        req.expiration_date.as_deref(),
        req.public_key.as_deref(),
        now,
    )?;
    {
        let mut c = state.db.conn().await?;
        require_machine(&load_user_to_change(&mut c, &caller, &user_id).await?)?;
    }
    let material = key_material(input).await?;
    // Checked again where the key is stored: the user may have become an administrator while
    // the pair was generated.
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    require_machine(&u)?;
    let (key_id, private_pem) = store_key(&mut tx, Owner::User, &u.user_id, material, now).await?;
    tx.commit().await?;
    let key_details = private_pem.map(|pem| {
        let file = json!({"type": "serviceaccount", "keyId": key_id, "key": pem, "userId": user_id});
        STANDARD.encode(file.to_string())
    });
    Ok(Json(AddKeyResponse { key_id, key_details, details: Details::created(now, &u.org_id) }))
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeyView {
    id: String,
    details: Details,
    #[serde(rename = "type")]
    key_type: KeyType,
    #[serde(skip_serializing_if = "Option::is_none")]
    expiration_date: Option<String>,
}

impl KeyView {
    pub fn new(k: &PublicKey, owner: &str) -> Self {
        KeyView {
            id: k.key_id.clone(),
            details: Details::created(k.created_at, owner),
            key_type: k.key_type,
            expiration_date: k.expires_at.map(ts),
        }
    }
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[schema(as = ListMachineKeysOrPatsRequest)]
#[serde(default, rename_all = "camelCase")]
pub struct ListRequest {
    query: ListQuery,
}

pub fn paginate<T, V>(items: Vec<T>, query: &ListQuery, now: i64, view: impl Fn(&T) -> V) -> ApiResult<ListResponse<V>>
where
    V: Serialize,
{
    let page = query.page()?;
    let total = items.len() as i64;
    let mut items: Vec<&T> = items.iter().collect();
    if !page.asc {
        items.reverse();
    }
    Ok(ListResponse {
        details: ListDetails::new(total, now),
        sorting_column: None,
        result: items.into_iter().skip(page.offset as usize).take(page.limit as usize).map(view).collect(),
    })
}

#[utoipa::path(post, path = "/users/{user_id}/keys/_search", request_body = ListRequest, responses((status = 200, body = ListResponse<KeyView>)))]
pub async fn list_keys(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<ListRequest>,
) -> ApiResult<Json<ListResponse<KeyView>>> {
    caller.require(Permission::UserRead)?;
    let mut c = state.db.conn().await?;
    let u = load_user(&mut c, &caller, &user_id).await?;
    let keys = key::list_keys(&mut c, Owner::User, &user_id).await?;
    Ok(Json(paginate(keys, &req.query, state.clock.now(), |k| KeyView::new(k, &u.org_id))?))
}

#[derive(Serialize, utoipa::ToSchema)]
#[schema(as = GetMachineKeyResponse)]
pub struct GetKeyResponse {
    key: KeyView,
}

#[utoipa::path(get, path = "/users/{user_id}/keys/{key_id}", responses((status = 200, body = GetKeyResponse)))]
pub async fn get_key(
    State(state): State<AppState>,
    caller: Caller,
    Path((user_id, key_id)): Path<(String, String)>,
) -> ApiResult<Json<GetKeyResponse>> {
    caller.require(Permission::UserRead)?;
    let mut c = state.db.conn().await?;
    let u = load_user(&mut c, &caller, &user_id).await?;
    let k = key::get_key(&mut c, Owner::User, &user_id, &key_id)
        .await?
        .ok_or_else(|| ApiError::not_found("key not found").with_id("KEY-NotFound"))?;
    Ok(Json(GetKeyResponse { key: KeyView::new(&k, &u.org_id) }))
}

#[utoipa::path(delete, path = "/users/{user_id}/keys/{key_id}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_key(
    State(state): State<AppState>,
    caller: Caller,
    Path((user_id, key_id)): Path<(String, String)>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    let u = load_user_to_change(&mut c, &caller, &user_id).await?;
    if !key::delete_key(&mut c, Owner::User, &user_id, &key_id).await? {
        return Err(ApiError::not_found("key not found").with_id("KEY-NotFound"));
    }
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct AddPatRequest {
    expiration_date: Option<String>,
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddPatResponse {
    token_id: String,
    token: String,
    details: Details,
}

/// A personal access token; shown only in this response, stored as its SHA-256 digest.
#[utoipa::path(post, path = "/users/{user_id}/pats", request_body = AddPatRequest, responses((status = 200, body = AddPatResponse)))]
pub async fn add_pat(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<AddPatRequest>,
) -> ApiResult<Json<AddPatResponse>> {
    caller.require(Permission::UserWrite)?;
    let now = state.clock.now();
    let expires_at = match req.expiration_date.as_deref().filter(|s| !s.is_empty()) {
        Some(s) => {
            let t = parse_ts("AddPersonalAccessTokenRequest.expirationDate", s)?;
            if t <= now {
                return Err(ApiError::invalid(
                    "invalid AddPersonalAccessTokenRequest.expirationDate: must be in the future",
                ));
            }
            Some(t)
        }
        None => None,
    };
    // The check and the insert in one transaction, as for keys.
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    require_machine(&u)?;
    let token = secret::new_secret();
    let token_id = new_id();
    key::insert_pat(
        &mut tx,
        &Pat {
            pat_id: token_id.clone(),
            user_id: user_id.clone(),
            scopes: crate::oauth::scope::pat_scopes(),
            expires_at,
            created_at: now,
        },
        &secret::digest(&token),
    )
    .await?;
    tx.commit().await?;
    Ok(Json(AddPatResponse { token_id, token, details: Details::created(now, &u.org_id) }))
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatView {
    id: String,
    details: Details,
    #[serde(skip_serializing_if = "Option::is_none")]
    expiration_date: Option<String>,
    scopes: Vec<String>,
}

#[utoipa::path(post, path = "/users/{user_id}/pats/_search", request_body = ListRequest, responses((status = 200, body = ListResponse<PatView>)))]
pub async fn list_pats(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<ListRequest>,
) -> ApiResult<Json<ListResponse<PatView>>> {
    caller.require(Permission::UserRead)?;
    let mut c = state.db.conn().await?;
    let u = load_user(&mut c, &caller, &user_id).await?;
    let pats = key::list_pats(&mut c, &user_id).await?;
    Ok(Json(paginate(pats, &req.query, state.clock.now(), |p| PatView {
        id: p.pat_id.clone(),
        details: Details::created(p.created_at, &u.org_id),
        expiration_date: p.expires_at.map(ts),
        scopes: p.scopes.clone(),
    })?))
}

#[utoipa::path(delete, path = "/users/{user_id}/pats/{token_id}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove_pat(
    State(state): State<AppState>,
    caller: Caller,
    Path((user_id, token_id)): Path<(String, String)>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    let u = load_user_to_change(&mut c, &caller, &user_id).await?;
    if !key::delete_pat(&mut c, &user_id, &token_id).await? {
        return Err(ApiError::not_found("token not found").with_id("PAT-NotFound"));
    }
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}
