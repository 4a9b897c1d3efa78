//! Human users: create, read, search, state changes, e-mail, profile (passwords: `passwords`).

use axum::Json;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};

use super::passwords::hash_new_password;
use super::views::{EmailView, UserView};
use crate::api::error::ApiResult;
use crate::api::types::{Details, DetailsResponse, ListDetails, ListQuery, ListResponse, SearchBudget};
use crate::api::{ApiError, ApiJson, Caller};
use crate::app::AppState;
use crate::domain::enums::{Gender, TextQueryMethod, UserFieldName, UserState, UserType};
use crate::domain::roles::Permission;
use crate::domain::validate;
use crate::id::new_id;
use crate::store::user::{Human, Kind, User, UserQuery};
use crate::store::{Conn, member, org, user, user_code};

#[derive(Debug, Deserialize, Serialize, Default, Clone, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ProfileInput {
    #[schema(required = true, min_length = 1, max_length = 200)]
    pub first_name: String,
    #[schema(required = true, min_length = 1, max_length = 200)]
    pub last_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub nick_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub preferred_language: String,
    #[serde(skip_serializing_if = "Gender::is_default")]
    pub gender: Gender,
}

#[derive(Debug, Deserialize, Serialize, Default, Clone, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct EmailInput {
    #[schema(required = true, min_length = 1, max_length = 200)]
    pub email: String,
    #[serde(skip_serializing_if = "crate::api::types::is_false")]
    pub is_email_verified: bool,
}

#[derive(Debug, Deserialize, Serialize, Default, Clone, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct PhoneInput {
    pub phone: String,
    #[serde(skip_serializing_if = "crate::api::types::is_false")]
    pub is_phone_verified: bool,
}

/// The fields every way of creating a human user shares.
#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct HumanInput {
    #[schema(required = true, min_length = 1, max_length = 200)]
    pub user_name: String,
    #[schema(required = true)]
    pub profile: Option<ProfileInput>,
    #[schema(required = true)]
    pub email: Option<EmailInput>,
    pub phone: Option<PhoneInput>,
    /// `AddHumanUserRequest.initialPassword`.
    pub initial_password: String,
    /// `SetUpOrgRequest.human.password`.
    pub password: String,
}

pub fn validate_profile(req: &str, p: &ProfileInput) -> ApiResult<()> {
    validate::required(req, "profile.firstName", &p.first_name, 200)?;
    validate::required(req, "profile.lastName", &p.last_name, 200)?;
    validate::max(req, "profile.nickName", &p.nick_name, 200)?;
    validate::max(req, "profile.displayName", &p.display_name, 200)?;
    validate::max(req, "profile.preferredLanguage", &p.preferred_language, 10)?;
    for (field, value) in [
        ("profile.firstName", &p.first_name),
        ("profile.lastName", &p.last_name),
        ("profile.nickName", &p.nick_name),
        ("profile.displayName", &p.display_name),
        ("profile.preferredLanguage", &p.preferred_language),
    ] {
        validate::no_controls(req, field, value)?;
    }
    Ok(())
}

/// A user name: 1-200 characters, no spaces or control characters.
pub fn check_user_name(req: &str, name: &str) -> ApiResult<()> {
    validate::required(req, "userName", name, 200)?;
    if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ApiError::invalid(format!("invalid {req}.userName: value must not contain spaces")));
    }
    Ok(())
}

impl HumanInput {
    /// Checks the input and returns the user name and the human fields (without password).
    pub fn validate(&self, req: &str) -> ApiResult<(String, Human)> {
        check_user_name(req, &self.user_name)?;
        let profile = self
            .profile
            .as_ref()
            .ok_or_else(|| ApiError::invalid(format!("invalid {req}.profile: value is required")))?;
        validate_profile(req, profile)?;
        let email =
            self.email.as_ref().ok_or_else(|| ApiError::invalid(format!("invalid {req}.email: value is required")))?;
        validate::email(req, "email.email", email.email.trim())?;
        let (phone, phone_verified) = match &self.phone {
            Some(p) if !p.phone.is_empty() => {
                validate::phone(req, "phone.phone", p.phone.trim())?;
                (p.phone.trim().to_string(), p.is_phone_verified)
            }
            _ => (String::new(), false),
        };
        let display_name = if profile.display_name.trim().is_empty() {
            format!("{} {}", profile.first_name.trim(), profile.last_name.trim())
        } else {
            profile.display_name.trim().to_string()
        };
        Ok((
            self.user_name.trim().to_string(),
            Human {
                first_name: profile.first_name.trim().to_string(),
                last_name: profile.last_name.trim().to_string(),
                nick_name: profile.nick_name.trim().to_string(),
                display_name,
                preferred_language: profile.preferred_language.trim().to_string(),
                gender: profile.gender,
                email: email.email.trim().to_string(),
                email_verified: email.is_email_verified,
                phone,
                phone_verified,
                ..Human::default()
            },
        ))
    }
}

/// Refuses a user name that ends in `@` and a domain of another organization: it would be a
/// login name of that organization (`alice@example.com` is what alice of the organization with
/// the domain example.com types), so the user would take that person's sign-ins and count their
/// wrong passwords. ZITADEL refuses the same (DomainNotAllowedAsUsername).
pub async fn check_username_domain(c: &mut Conn, org_id: &str, username: &str) -> ApiResult<()> {
    // Folded as user names are compared (a KELVIN SIGN is a k there).
    let key = crate::store::fold(username);
    let Some((_, domain)) = key.rsplit_once('@') else { return Ok(()) };
    match org::get_domain(c, domain).await? {
        Some(d) if d.org_id != org_id => {
            Err(ApiError::invalid("the user name ends in a domain of another organization; choose another user name")
                .with_id("USER-DomainNotAllowedAsUsername"))
        }
        _ => Ok(()),
    }
}

/// Refuses a user name that is already another user's login name, or whose login names are
/// already another user's name: the login form looks a name up as a user name first, so the new
/// user would take the other's sign-ins (and count their wrong passwords). That is a name at a
/// domain (`alice@example.com`, for alice of the organization with example.com, in the
/// organization's own domain, which [`check_username_domain`] allows), an e-mail address only one
/// human has (it signs that human in), and, the other way round, a name whose login name at one
/// of the organization's domains is some user's name.
/// `except`: the user being renamed, whose own login names do not count.
pub async fn check_login_name_free(c: &mut Conn, org_id: &str, username: &str, except: Option<&str>) -> ApiResult<()> {
    let taken = || {
        ApiError::exists("the user name is another user's login name; choose another user name")
            .with_id("USER-LoginNameTaken")
    };
    let other = |u: &User| Some(u.user_id.as_str()) != except;
    if user::find_by_domain_or_email(c, username, true).await?.is_some_and(|u| other(&u)) {
        return Err(taken());
    }
    if user::username_at_org_domain_taken(c, org_id, username, except.unwrap_or_default()).await? {
        return Err(taken());
    }
    Ok(())
}

/// Inserts a human user after checking the user name is free in the instance.
pub async fn insert_human(
    c: &mut Conn,
    org_id: &str,
    user_id: Option<String>,
    username: &str,
    human: Human,
    now: i64,
) -> ApiResult<String> {
    check_username_domain(c, org_id, username).await?;
    if user::username_taken(c, username).await? {
        return Err(ApiError::exists("a user with this user name already exists").with_id("USER-AlreadyExists"));
    }
    check_login_name_free(c, org_id, username, None).await?;
    let user_id = user_id.unwrap_or_else(new_id);
    let state = if human.password_hash.is_some() { UserState::Active } else { UserState::Initial };
    user::insert(
        c,
        &User {
            user_id: user_id.clone(),
            org_id: org_id.to_string(),
            username: username.to_string(),
            state,
            created_at: now,
            changed_at: now,
            tokens_valid_from: now,
            kind: Kind::Human(human),
            org_domain: String::new(),
            org_active: true,
            read_at: None,
        },
    )
    .await
    .map_err(|e| match e {
        crate::store::StoreError::Conflict => ApiError::exists("the user already exists").with_id("USER-AlreadyExists"),
        other => other.into(),
    })?;
    Ok(user_id)
}

#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AddUserResponse {
    pub user_id: String,
    pub details: Details,
}

#[utoipa::path(post, path = "/users/human", request_body = HumanInput, responses((status = 200, body = AddUserResponse)))]
pub async fn add_human(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<HumanInput>,
) -> ApiResult<Json<AddUserResponse>> {
    caller.require(Permission::UserWrite)?;
    let (username, mut human) = req.validate("AddHumanUserRequest")?;
    if !req.initial_password.is_empty() {
        human.password_hash =
            Some(hash_new_password(&state, &caller.org_id, "AddHumanUserRequest", &req.initial_password).await?);
        // A password set by someone else must be changed at the first sign-in.
        human.password_change_required = true;
        human.password_changed_at = Some(state.clock.now());
    }
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let user_id = insert_human(&mut tx, &caller.org_id, None, &username, human, now).await?;
    tx.commit().await?;
    Ok(Json(AddUserResponse { user_id, details: Details::created(now, &caller.org_id) }))
}

/// Loads a user of the caller's organization (other organizations' users are "not found").
pub async fn load_user(c: &mut Conn, caller: &Caller, user_id: &str) -> ApiResult<User> {
    match user::get(c, user_id).await? {
        Some(u) if u.org_id == caller.org_id => Ok(u),
        _ => Err(ApiError::not_found("user not found").with_id("USER-NotFound")),
    }
}

/// User `user_id` of the caller's organization, to be changed (credentials, keys, state, e-mail,
/// profile, deletion). An administrator is changed only by a caller who may manage
/// administrators of that level: an instance member by one with `IamMemberWrite`, a member of
/// any organization or project by one with `OrgMemberWrite`; otherwise a user manager could
/// give itself an owner's powers by setting the owner's password or adding a token to its
/// account. Memberships count wherever they are: members need not belong to the organization,
/// so a user of this organization may own another. Everyone may change their own account.
pub async fn load_user_to_change(c: &mut Conn, caller: &Caller, user_id: &str) -> ApiResult<User> {
    let u = load_user(c, caller, user_id).await?;
    if u.user_id == caller.user_id {
        return Ok(u);
    }
    super::members::may_change_administrators(caller, member::held(c, &u.user_id).await?, "the user is")?;
    Ok(u)
}

/// A write that found no row: the user was deleted since it was read (on PostgreSQL a read
/// takes no lock), so the call answers as for an unknown user instead of reporting a change
/// nothing holds.
pub fn still_there(written: bool) -> ApiResult<()> {
    if written { Ok(()) } else { Err(ApiError::not_found("user not found").with_id("USER-NotFound")) }
}

pub fn require_human(u: &User) -> ApiResult<&Human> {
    u.human().ok_or_else(|| ApiError::precondition("the user is not a human user").with_id("USER-NotHuman"))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct GetUserResponse {
    pub(crate) user: UserView,
}

#[utoipa::path(get, path = "/users/{user_id}", responses((status = 200, body = GetUserResponse)))]
pub async fn get(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<GetUserResponse>> {
    caller.require(Permission::UserRead)?;
    let mut c = state.db.conn().await?;
    let u = load_user(&mut c, &caller, &user_id).await?;
    Ok(Json(GetUserResponse { user: UserView::from(&u) }))
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct TextQuery {
    #[serde(
        alias = "userName",
        alias = "firstName",
        alias = "lastName",
        alias = "nickName",
        alias = "displayName",
        alias = "emailAddress",
        alias = "loginName"
    )]
    value: String,
    method: TextQueryMethod,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct StateQuery {
    state: UserState,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct TypeQuery {
    #[serde(rename = "type")]
    kind: UserType,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct IdsQuery {
    user_ids: Vec<String>,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct QueriesQuery {
    #[schema(no_recursion)]
    queries: Vec<SearchQuery>,
}

#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct NotQuery {
    #[schema(no_recursion)]
    query: Option<Box<SearchQuery>>,
}

/// One element of `queries`: exactly one member is set.
#[derive(Deserialize, Default, Clone, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct SearchQuery {
    user_name_query: Option<TextQuery>,
    first_name_query: Option<TextQuery>,
    last_name_query: Option<TextQuery>,
    nick_name_query: Option<TextQuery>,
    display_name_query: Option<TextQuery>,
    email_query: Option<TextQuery>,
    login_name_query: Option<TextQuery>,
    state_query: Option<StateQuery>,
    type_query: Option<TypeQuery>,
    in_user_ids_query: Option<IdsQuery>,
    or_query: Option<QueriesQuery>,
    and_query: Option<QueriesQuery>,
    not_query: Option<NotQuery>,
}

const MAX_QUERY_DEPTH: usize = 5;

impl SearchQuery {
    fn convert(&self, depth: usize, b: &mut SearchBudget) -> ApiResult<UserQuery> {
        if depth > MAX_QUERY_DEPTH {
            return Err(ApiError::invalid("invalid ListUsersRequest.queries: nested too deeply"));
        }
        b.term()?;
        let mut found = Vec::new();
        if let Some(q) = &self.user_name_query {
            found.push(UserQuery::UserName(b.text(&q.value)?, q.method));
        }
        if let Some(q) = &self.first_name_query {
            found.push(UserQuery::FirstName(b.text(&q.value)?, q.method));
        }
        if let Some(q) = &self.last_name_query {
            found.push(UserQuery::LastName(b.text(&q.value)?, q.method));
        }
        if let Some(q) = &self.nick_name_query {
            found.push(UserQuery::NickName(b.text(&q.value)?, q.method));
        }
        if let Some(q) = &self.display_name_query {
            found.push(UserQuery::DisplayName(b.text(&q.value)?, q.method));
        }
        if let Some(q) = &self.email_query {
            found.push(UserQuery::Email(b.text(&q.value)?, q.method));
        }
        if let Some(q) = &self.login_name_query {
            found.push(UserQuery::LoginName(b.text(&q.value)?, q.method));
        }
        if let Some(q) = &self.state_query {
            found.push(UserQuery::State(q.state));
        }
        if let Some(q) = &self.type_query {
            found.push(UserQuery::Type(q.kind));
        }
        if let Some(q) = &self.in_user_ids_query {
            b.ids(q.user_ids.len())?;
            found.push(UserQuery::InUserIds(q.user_ids.clone()));
        }
        if let Some(q) = &self.or_query {
            found.push(UserQuery::Or(q.queries.iter().map(|s| s.convert(depth + 1, b)).collect::<ApiResult<_>>()?));
        }
        if let Some(q) = &self.and_query {
            found.push(UserQuery::And(q.queries.iter().map(|s| s.convert(depth + 1, b)).collect::<ApiResult<_>>()?));
        }
        if let Some(q) = &self.not_query {
            let inner = q
                .query
                .as_ref()
                .ok_or_else(|| ApiError::invalid("invalid ListUsersRequest.notQuery: query is required"))?;
            found.push(UserQuery::Not(Box::new(inner.convert(depth + 1, b)?)));
        }
        b.one_member(found.len())?;
        Ok(found.remove(0))
    }
}

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct ListUsersRequest {
    query: ListQuery,
    sorting_column: UserFieldName,
    queries: Vec<SearchQuery>,
}

#[utoipa::path(post, path = "/users/_search", request_body = ListUsersRequest, responses((status = 200, body = ListResponse<UserView>)))]
pub async fn list(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<ListUsersRequest>,
) -> ApiResult<Json<ListResponse<UserView>>> {
    caller.require(Permission::UserRead)?;
    let page = req.query.page()?;
    let mut budget = SearchBudget::new("ListUsersRequest");
    let queries = req.queries.iter().map(|q| q.convert(0, &mut budget)).collect::<ApiResult<Vec<_>>>()?;
    let mut c = state.db.conn().await?;
    let (users, total) = user::search(&mut c, &caller.org_id, &queries, req.sorting_column, page).await?;
    Ok(Json(ListResponse {
        details: ListDetails::new(total, state.clock.now()),
        sorting_column: (!req.sorting_column.is_default()).then(|| req.sorting_column.name().to_string()),
        result: users.iter().map(UserView::from).collect(),
    }))
}

/// A state change allowed only from the `from` states.
async fn change_state(
    state: &AppState,
    caller: &Caller,
    user_id: &str,
    from: &[UserState],
    to: UserState,
    what: &'static str,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, caller, user_id).await?;
    if !from.contains(&u.state) {
        return Err(ApiError::precondition(format!("the user cannot be {what} in state {}", u.state.name()))
            .with_id("USER-StateChange"));
    }
    if matches!(to, UserState::Locked | UserState::Inactive) {
        super::members::keep_an_owner(&mut tx, user_id, false).await?;
    }
    still_there(user::set_state(&mut tx, user_id, to, now).await?)?;
    // Locking or deactivating ends what the user holds: unlocking or reactivating later does
    // not bring back tokens, codes or sessions issued before.
    if matches!(to, UserState::Locked | UserState::Inactive) {
        user::cut_off_tokens(&mut tx, user_id, now).await?;
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}

#[derive(Deserialize, Default, Serialize, utoipa::ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct UpdateUserNameRequest {
    user_name: String,
}

/// Renames a user, with every rule a new user's name meets. A machine user's name is the client
/// id of its client_credentials tokens, so its clients use the new name from now on (its secret
/// and keys stay); its tokens issued under the old name end (another machine user may take it).
#[utoipa::path(put, path = "/users/{user_id}/username", request_body = UpdateUserNameRequest, responses((status = 200, body = DetailsResponse)))]
pub async fn update_username(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<UpdateUserNameRequest>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    check_user_name("UpdateUserNameRequest", &req.user_name)?;
    let name = req.user_name.trim();
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    if u.username == name {
        return Err(ApiError::precondition("the user name is unchanged").with_id("USER-UsernameNotChanged"));
    }
    check_username_domain(&mut tx, &u.org_id, name).await?;
    let taken = || ApiError::exists("a user with this user name already exists").with_id("USER-AlreadyExists");
    // Only the letters' case changed: the name is its own.
    if crate::store::fold(&u.username) != crate::store::fold(name) && user::username_taken(&mut tx, name).await? {
        return Err(taken());
    }
    check_login_name_free(&mut tx, &u.org_id, name, Some(&u.user_id)).await?;
    if u.machine().is_some() {
        crate::management::machine::check_machine_name(&mut tx, name).await?;
    }
    let renamed = user::set_username(&mut tx, &u.user_id, name, now).await.map_err(|e| match e {
        crate::store::StoreError::Conflict => taken(),
        other => other.into(),
    })?;
    if !renamed {
        return Err(ApiError::not_found("user not found").with_id("USER-NotFound"));
    }
    // A machine user's tokens name it by its user name (client_id): those of the old name end,
    // so that none outlives the name, which another machine user may take from now on.
    if u.machine().is_some() {
        user::cut_off_tokens(&mut tx, &u.user_id, now).await?;
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}

#[utoipa::path(post, path = "/users/{user_id}/_deactivate", responses((status = 200, body = DetailsResponse)))]
pub async fn deactivate(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    change_state(&state, &caller, &user_id, &[UserState::Active, UserState::Locked], UserState::Inactive, "deactivated")
        .await
}

#[utoipa::path(post, path = "/users/{user_id}/_reactivate", responses((status = 200, body = DetailsResponse)))]
pub async fn reactivate(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    change_state(&state, &caller, &user_id, &[UserState::Inactive], UserState::Active, "reactivated").await
}

#[utoipa::path(post, path = "/users/{user_id}/_lock", responses((status = 200, body = DetailsResponse)))]
pub async fn lock(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    change_state(&state, &caller, &user_id, &[UserState::Active, UserState::Initial], UserState::Locked, "locked").await
}

#[utoipa::path(post, path = "/users/{user_id}/_unlock", responses((status = 200, body = DetailsResponse)))]
pub async fn unlock(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    change_state(&state, &caller, &user_id, &[UserState::Locked], UserState::Active, "unlocked").await
}

#[utoipa::path(delete, path = "/users/{user_id}", responses((status = 200, body = DetailsResponse)))]
pub async fn remove(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserDelete)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    super::members::keep_an_owner(&mut tx, &u.user_id, false).await?;
    user::delete(&mut tx, &u.user_id).await?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}

#[derive(Serialize, utoipa::ToSchema)]
pub struct GetEmailResponse {
    details: Details,
    email: EmailView,
}

#[utoipa::path(get, path = "/users/{user_id}/email", responses((status = 200, body = GetEmailResponse)))]
pub async fn get_email(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
) -> ApiResult<Json<GetEmailResponse>> {
    caller.require(Permission::UserRead)?;
    let mut c = state.db.conn().await?;
    let u = load_user(&mut c, &caller, &user_id).await?;
    let h = require_human(&u)?;
    Ok(Json(GetEmailResponse {
        details: Details::read(u.created_at, u.changed_at, &u.org_id),
        email: EmailView { email: h.email.clone(), is_email_verified: h.email_verified },
    }))
}

#[utoipa::path(put, path = "/users/{user_id}/email", request_body = EmailInput, responses((status = 200, body = DetailsResponse)))]
pub async fn update_email(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<EmailInput>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    validate::email("UpdateHumanEmailRequest", "email", req.email.trim())?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    let h = require_human(&u)?;
    if h.email == req.email.trim() && h.email_verified == req.is_email_verified {
        return Err(ApiError::precondition("the e-mail address is unchanged").with_id("USER-EmailNotChanged"));
    }
    still_there(user::update_email(&mut tx, &user_id, req.email.trim(), req.is_email_verified, now).await?)?;
    // Codes e-mailed to the old address (verification, initial password) must not verify or
    // set up the new one.
    if h.email != req.email.trim() {
        user_code::delete_all(&mut tx, &user_id).await?;
    }
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}

#[utoipa::path(put, path = "/users/{user_id}/profile", request_body = ProfileInput, responses((status = 200, body = DetailsResponse)))]
pub async fn update_profile(
    State(state): State<AppState>,
    caller: Caller,
    Path(user_id): Path<String>,
    ApiJson(req): ApiJson<ProfileInput>,
) -> ApiResult<Json<DetailsResponse>> {
    caller.require(Permission::UserWrite)?;
    validate_profile("UpdateHumanProfileRequest", &req)?;
    let now = state.clock.now();
    let mut tx = state.db.begin().await?;
    let u = load_user_to_change(&mut tx, &caller, &user_id).await?;
    require_human(&u)?;
    let display_name = if req.display_name.trim().is_empty() {
        format!("{} {}", req.first_name.trim(), req.last_name.trim())
    } else {
        req.display_name.trim().to_string()
    };
    let h = Human {
        first_name: req.first_name.trim().to_string(),
        last_name: req.last_name.trim().to_string(),
        nick_name: req.nick_name.trim().to_string(),
        display_name,
        preferred_language: req.preferred_language.trim().to_string(),
        gender: req.gender,
        ..Human::default()
    };
    still_there(user::update_profile(&mut tx, &user_id, &h, now).await?)?;
    tx.commit().await?;
    Ok(Json(DetailsResponse { details: Details::changed(now, &u.org_id) }))
}
