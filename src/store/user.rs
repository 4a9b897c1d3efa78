//! Human and machine users (table `account`).

use sqlx::FromRow;

use super::query::{Builder, Page};
use super::{Conn, Result, flag, fold};
use crate::domain::enums::{AccessTokenType, Gender, OrgState, TextQueryMethod, UserFieldName, UserState, UserType};

#[derive(Debug, Clone, Default)]
pub struct Human {
    pub first_name: String,
    pub last_name: String,
    pub nick_name: String,
    pub display_name: String,
    pub preferred_language: String,
    pub gender: Gender,
    pub email: String,
    pub email_verified: bool,
    pub phone: String,
    pub phone_verified: bool,
    pub password_hash: Option<String>,
    pub password_change_required: bool,
    pub password_changed_at: Option<i64>,
    pub failed_password_attempts: i64,
    /// The TOTP secret, encrypted (see `crate::crypto::aead::Purpose::OtpSecret`).
    pub otp_secret: Option<Vec<u8>>,
    pub otp_last_step: Option<i64>,
    pub failed_otp_attempts: i64,
}

#[derive(Debug, Clone, Default)]
pub struct Machine {
    pub name: String,
    pub description: String,
    pub access_token_type: AccessTokenType,
    pub secret_digest: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
pub enum Kind {
    Human(Human),
    Machine(Machine),
}

#[derive(Debug, Clone)]
pub struct User {
    pub user_id: String,
    pub org_id: String,
    pub username: String,
    pub state: UserState,
    pub created_at: i64,
    pub changed_at: i64,
    /// Tokens, authorization codes and browser sessions of this user issued (authenticated)
    /// before this second do not count: the creation time, so that an account reusing a deleted
    /// account's id inherits none of its tokens, then the time an administrator last locked or
    /// deactivated the user or set its password. Credentials (passwords, secrets, keys, personal
    /// access tokens) are not affected.
    pub tokens_valid_from: i64,
    pub kind: Kind,
    /// The primary domain of the user's organization (read-only, joined).
    pub org_domain: String,
    /// The user's organization is not deactivated (read-only, joined).
    pub org_active: bool,
    /// When this copy was read, for a copy kept by the replica's cache (`crate::cache`); None
    /// for one read for the request at hand. Tokens issued from a copy are dated no later
    /// (`crate::oauth::issue::Grant::checked_at`).
    pub read_at: Option<i64>,
}

impl User {
    /// May sign in and hold tokens: the user is active and so is its organization. (A user in
    /// state Initial, without a password yet, may finish signing in by setting one: see
    /// `login::flow::not_signing_in`.)
    pub fn is_active(&self) -> bool {
        self.state == UserState::Active && self.org_active
    }

    pub fn user_type(&self) -> UserType {
        match self.kind {
            Kind::Human(_) => UserType::Human,
            Kind::Machine(_) => UserType::Machine,
        }
    }

    pub fn human(&self) -> Option<&Human> {
        match &self.kind {
            Kind::Human(h) => Some(h),
            Kind::Machine(_) => None,
        }
    }

    pub fn machine(&self) -> Option<&Machine> {
        match &self.kind {
            Kind::Machine(m) => Some(m),
            Kind::Human(_) => None,
        }
    }

    /// `username@primarydomain`.
    pub fn login_name(&self) -> String {
        if self.org_domain.is_empty() {
            self.username.clone()
        } else {
            format!("{}@{}", self.username, self.org_domain)
        }
    }
}

#[derive(FromRow)]
struct Row {
    user_id: String,
    org_id: String,
    user_type: i64,
    username: String,
    state: i64,
    created_at: i64,
    changed_at: i64,
    tokens_valid_from: i64,
    first_name: String,
    last_name: String,
    nick_name: String,
    display_name: String,
    preferred_language: String,
    gender: i64,
    email: String,
    email_verified: i64,
    phone: String,
    phone_verified: i64,
    password_hash: Option<String>,
    password_change_required: i64,
    password_changed_at: Option<i64>,
    failed_password_attempts: i64,
    otp_secret: Option<Vec<u8>>,
    otp_last_step: Option<i64>,
    failed_otp_attempts: i64,
    machine_name: String,
    description: String,
    access_token_type: i64,
    secret_digest: Option<Vec<u8>>,
    org_domain: Option<String>,
    org_state: Option<i64>,
}

impl From<Row> for User {
    fn from(r: Row) -> Self {
        let kind = if r.user_type == UserType::Machine.number() {
            Kind::Machine(Machine {
                name: r.machine_name,
                description: r.description,
                access_token_type: AccessTokenType::from_number(r.access_token_type).unwrap_or_default(),
                secret_digest: r.secret_digest,
            })
        } else {
            Kind::Human(Human {
                first_name: r.first_name,
                last_name: r.last_name,
                nick_name: r.nick_name,
                display_name: r.display_name,
                preferred_language: r.preferred_language,
                gender: Gender::from_number(r.gender).unwrap_or_default(),
                email: r.email,
                email_verified: r.email_verified != 0,
                phone: r.phone,
                phone_verified: r.phone_verified != 0,
                password_hash: r.password_hash,
                password_change_required: r.password_change_required != 0,
                password_changed_at: r.password_changed_at,
                failed_password_attempts: r.failed_password_attempts,
                otp_secret: r.otp_secret,
                otp_last_step: r.otp_last_step,
                failed_otp_attempts: r.failed_otp_attempts,
            })
        };
        User {
            user_id: r.user_id,
            org_id: r.org_id,
            username: r.username,
            state: UserState::from_number(r.state).unwrap_or_default(),
            created_at: r.created_at,
            changed_at: r.changed_at,
            tokens_valid_from: r.tokens_valid_from,
            kind,
            org_domain: r.org_domain.unwrap_or_default(),
            org_active: r.org_state != Some(OrgState::Inactive.number()),
            read_at: None,
        }
    }
}

// The columns of [`Row`] and the join that gives the primary domain, as literals so that other
// statements of the store can be put together from them at compile time.
macro_rules! user_columns {
    () => {
        "a.user_id, a.org_id, a.user_type, a.username, a.state, a.created_at, a.changed_at, \
             a.tokens_valid_from, a.first_name, a.last_name, a.nick_name, a.display_name, a.preferred_language, a.gender, a.email, \
             a.email_verified, a.phone, a.phone_verified, a.password_hash, a.password_change_required, \
             a.password_changed_at, a.failed_password_attempts, a.otp_secret, a.otp_last_step, a.failed_otp_attempts, \
             a.machine_name, a.description, \
             a.access_token_type, a.secret_digest, d.domain AS org_domain, o.state AS org_state"
    };
}
/// Joined to `account a`: its organization's primary domain and the organization's state.
macro_rules! user_domain_join {
    () => {
        "LEFT JOIN org_domain d ON d.org_id = a.org_id AND d.is_primary = 1 LEFT JOIN org o ON o.org_id = a.org_id"
    };
}
pub(super) use {user_columns, user_domain_join};

const FROM: &str = concat!("account a ", user_domain_join!());
const SELECT: &str = concat!("SELECT ", user_columns!(), " FROM account a ", user_domain_join!());

/// A user from a row that carries [`user_columns`] (within a larger query).
pub(super) fn from_row(row: &sqlx::any::AnyRow) -> sqlx::Result<User> {
    Ok(User::from(Row::from_row(row)?))
}

pub async fn insert(c: &mut Conn, u: &User) -> Result<()> {
    let h = u.human().cloned().unwrap_or_default();
    let m = u.machine().cloned().unwrap_or_default();
    sqlx::query(
        "INSERT INTO account (user_id, org_id, user_type, username, username_key, state, created_at, changed_at, \
         first_name, last_name, nick_name, display_name, preferred_language, gender, email, email_key, \
         email_verified, phone, phone_verified, password_hash, password_change_required, password_changed_at, \
         machine_name, description, access_token_type, secret_digest, otp_secret, tokens_valid_from) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, \
         $21, $22, $23, $24, $25, $26, $27)",
    )
    .bind(&u.user_id)
    .bind(&u.org_id)
    .bind(u.user_type().number())
    .bind(&u.username)
    .bind(fold(&u.username))
    .bind(u.state.number())
    .bind(u.created_at)
    .bind(h.first_name)
    .bind(h.last_name)
    .bind(h.nick_name)
    .bind(h.display_name)
    .bind(h.preferred_language)
    .bind(h.gender.number())
    .bind(&h.email)
    .bind(fold(&h.email))
    .bind(flag(h.email_verified))
    .bind(h.phone)
    .bind(flag(h.phone_verified))
    .bind(h.password_hash)
    .bind(flag(h.password_change_required))
    .bind(h.password_changed_at)
    .bind(m.name)
    .bind(m.description)
    .bind(m.access_token_type.number())
    .bind(m.secret_digest)
    .bind(h.otp_secret)
    .bind(u.tokens_valid_from)
    .execute(&mut *c)
    .await?;
    Ok(())
}

pub async fn get(c: &mut Conn, user_id: &str) -> Result<Option<User>> {
    let row: Option<Row> =
        sqlx::query_as(&format!("{SELECT} WHERE a.user_id = $1")).bind(user_id).fetch_optional(&mut *c).await?;
    Ok(row.map(User::from))
}

#[derive(FromRow)]
struct RowAndRevocation {
    #[sqlx(flatten)]
    row: Row,
    revoked: i64,
}

/// A user, and whether any of `revoked_keys` is revoked, in one round trip: the hot path of
/// introspection and userinfo.
pub async fn get_checking_revocation(
    c: &mut Conn,
    user_id: &str,
    revoked_keys: &[String],
) -> Result<Option<(User, bool)>> {
    let revoked = if revoked_keys.is_empty() {
        "0".to_string()
    } else {
        let marks: Vec<String> = (0..revoked_keys.len()).map(|i| format!("${}", i + 2)).collect();
        format!("(SELECT COUNT(*) FROM revocation WHERE revoked_key IN ({}))", marks.join(", "))
    };
    let sql = format!("SELECT {}, {revoked} AS revoked FROM {FROM} WHERE a.user_id = $1", user_columns!());
    let mut q = sqlx::query_as::<_, RowAndRevocation>(&sql).bind(user_id);
    for k in revoked_keys {
        q = q.bind(k);
    }
    let row = q.fetch_optional(&mut *c).await?;
    Ok(row.map(|r| (User::from(r.row), r.revoked > 0)))
}

/// A user by user name, case-insensitively (user names are unique in the instance).
pub async fn get_by_username(c: &mut Conn, username: &str) -> Result<Option<User>> {
    let row: Option<Row> = sqlx::query_as(&format!("{SELECT} WHERE a.username_key = $1"))
        .bind(fold(username))
        .fetch_optional(&mut *c)
        .await?;
    Ok(row.map(User::from))
}

/// Whether a user outside `org_id` has a user name ending in `@domain` (folded).
pub async fn username_in_domain_elsewhere(c: &mut Conn, org_id: &str, domain: &str) -> Result<bool> {
    let at = format!("@{}", fold(domain));
    let row: Option<(String,)> = sqlx::query_as(
        "SELECT user_id FROM account WHERE org_id <> $1 AND length(username_key) > length($2) \
         AND substr(username_key, length(username_key) - length($2) + 1) = $2 LIMIT 1",
    )
    .bind(org_id)
    .bind(&at)
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.is_some())
}

/// Whether a human has the address (compared as addresses are, case-folded).
pub async fn email_taken(c: &mut Conn, email: &str) -> Result<bool> {
    let row: Option<(String,)> =
        sqlx::query_as("SELECT user_id FROM account WHERE email_key = $1 AND user_type = 1 LIMIT 1")
            .bind(fold(email))
            .fetch_optional(&mut *c)
            .await?;
    Ok(row.is_some())
}

pub async fn username_taken(c: &mut Conn, username: &str) -> Result<bool> {
    let row: Option<(String,)> = sqlx::query_as("SELECT user_id FROM account WHERE username_key = $1")
        .bind(fold(username))
        .fetch_optional(&mut *c)
        .await?;
    Ok(row.is_some())
}

/// Whether `username` at one of `org_id`'s domains is the user name of some account (that
/// account's name would then be the user's login name at that domain: `alice` of the
/// organization with example.com against a user named `alice@example.com`).
/// `except`: a user id not to count (the user being renamed).
pub async fn username_at_org_domain_taken(c: &mut Conn, org_id: &str, username: &str, except: &str) -> Result<bool> {
    let row: Option<(String,)> = sqlx::query_as(
        "SELECT a.user_id FROM org_domain d JOIN account a ON a.username_key = $2 || '@' || d.domain \
         WHERE d.org_id = $1 AND a.user_id <> $3 LIMIT 1",
    )
    .bind(org_id)
    .bind(fold(username))
    .bind(except)
    .fetch_optional(&mut *c)
    .await?;
    Ok(row.is_some())
}

/// Renames a user; false when it is gone. A name taken meanwhile is [`super::StoreError::Conflict`].
pub async fn set_username(c: &mut Conn, user_id: &str, username: &str, now: i64) -> Result<bool> {
    let r = sqlx::query("UPDATE account SET username = $1, username_key = $2, changed_at = $3 WHERE user_id = $4")
        .bind(username)
        .bind(fold(username))
        .bind(now)
        .bind(user_id)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

/// Sets a user's state; a user made active (unlocked, reactivated) starts with no wrong
/// passwords or second-factor codes counted (the lockout policy's counts and the second factor's
/// pace, see `credentials::otp_claim`).
pub async fn set_state(c: &mut Conn, user_id: &str, state: UserState, now: i64) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE account SET state = $1, changed_at = $2, \
         failed_password_attempts = CASE WHEN $1 = 1 THEN 0 ELSE failed_password_attempts END, \
         failed_otp_attempts = CASE WHEN $1 = 1 THEN 0 ELSE failed_otp_attempts END, \
         otp_failed_at = CASE WHEN $1 = 1 THEN NULL ELSE otp_failed_at END WHERE user_id = $3",
    )
    .bind(state.number())
    .bind(now)
    .bind(user_id)
    .execute(&mut *c)
    .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn update_profile(c: &mut Conn, user_id: &str, h: &Human, now: i64) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE account SET first_name = $1, last_name = $2, nick_name = $3, display_name = $4, \
         preferred_language = $5, gender = $6, changed_at = $7 WHERE user_id = $8 AND user_type = 1",
    )
    .bind(&h.first_name)
    .bind(&h.last_name)
    .bind(&h.nick_name)
    .bind(&h.display_name)
    .bind(&h.preferred_language)
    .bind(h.gender.number())
    .bind(now)
    .bind(user_id)
    .execute(&mut *c)
    .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn update_email(c: &mut Conn, user_id: &str, email: &str, verified: bool, now: i64) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE account SET email = $1, email_key = $2, email_verified = $3, changed_at = $4 \
         WHERE user_id = $5 AND user_type = 1",
    )
    .bind(email)
    .bind(fold(email))
    .bind(flag(verified))
    .bind(now)
    .bind(user_id)
    .execute(&mut *c)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Sets a password hash; an INITIAL user becomes ACTIVE.
/// Makes the user's tokens, codes and browser sessions issued before `now` count no more. A
/// cut-off only moves forward: a replica whose clock is behind never moves it back (which would
/// bring the tokens in between back).
pub async fn cut_off_tokens(c: &mut Conn, user_id: &str, now: i64) -> Result<()> {
    sqlx::query(&format!("UPDATE account SET tokens_valid_from = {LATER_CUT_OFF} WHERE user_id = $2"))
        .bind(now)
        .bind(user_id)
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// The later of the stored cut-off and `$1` (portable: no GREATEST on SQLite, no scalar MAX on
/// PostgreSQL).
pub(super) const LATER_CUT_OFF: &str = "CASE WHEN tokens_valid_from > $1 THEN tokens_valid_from ELSE $1 END";

/// [`cut_off_tokens`] for every user of organization `org_id`.
pub async fn cut_off_org_tokens(c: &mut Conn, org_id: &str, now: i64) -> Result<()> {
    sqlx::query(&format!("UPDATE account SET tokens_valid_from = {LATER_CUT_OFF} WHERE org_id = $2"))
        .bind(now)
        .bind(org_id)
        .execute(&mut *c)
        .await?;
    Ok(())
}

pub async fn set_machine_secret(c: &mut Conn, user_id: &str, digest: Option<Vec<u8>>, now: i64) -> Result<bool> {
    let r = sqlx::query("UPDATE account SET secret_digest = $1, changed_at = $2 WHERE user_id = $3 AND user_type = 2")
        .bind(digest)
        .bind(now)
        .bind(user_id)
        .execute(&mut *c)
        .await?;
    Ok(r.rows_affected() == 1)
}

pub async fn delete(c: &mut Conn, user_id: &str) -> Result<bool> {
    sqlx::query("DELETE FROM member WHERE user_id = $1").bind(user_id).execute(&mut *c).await?;
    let r = sqlx::query("DELETE FROM account WHERE user_id = $1").bind(user_id).execute(&mut *c).await?;
    Ok(r.rows_affected() == 1)
}

/// Filters of the user search; the top level is AND-combined.
#[derive(Debug, Clone)]
pub enum UserQuery {
    UserName(String, TextQueryMethod),
    FirstName(String, TextQueryMethod),
    LastName(String, TextQueryMethod),
    NickName(String, TextQueryMethod),
    DisplayName(String, TextQueryMethod),
    Email(String, TextQueryMethod),
    LoginName(String, TextQueryMethod),
    State(UserState),
    Type(UserType),
    InUserIds(Vec<String>),
    Or(Vec<UserQuery>),
    And(Vec<UserQuery>),
    Not(Box<UserQuery>),
}

fn push_query(b: &mut Builder, q: &UserQuery) {
    match q {
        UserQuery::UserName(v, m) => {
            b.text_match("a.username", v, *m);
        }
        UserQuery::FirstName(v, m) => {
            b.text_match("a.first_name", v, *m);
        }
        UserQuery::LastName(v, m) => {
            b.text_match("a.last_name", v, *m);
        }
        UserQuery::NickName(v, m) => {
            b.text_match("a.nick_name", v, *m);
        }
        UserQuery::DisplayName(v, m) => {
            b.text_match("a.display_name", v, *m);
        }
        UserQuery::Email(v, m) => {
            b.text_match("a.email", v, *m);
        }
        UserQuery::LoginName(v, m) => {
            b.text_match("(a.username || '@' || COALESCE(d.domain, ''))", v, *m);
        }
        UserQuery::State(s) => {
            b.push("a.state = ").int(s.number());
        }
        UserQuery::Type(t) => {
            b.push("a.user_type = ").int(t.number());
        }
        UserQuery::InUserIds(ids) => {
            if ids.is_empty() {
                b.push("1 = 0");
            } else {
                b.push("a.user_id IN (");
                for (i, id) in ids.iter().enumerate() {
                    if i > 0 {
                        b.push(", ");
                    }
                    b.text(id.clone());
                }
                b.push(")");
            }
        }
        UserQuery::Or(qs) | UserQuery::And(qs) => {
            let op = if matches!(q, UserQuery::Or(_)) { " OR " } else { " AND " };
            if qs.is_empty() {
                b.push("1 = 1");
            } else {
                b.push("(");
                for (i, sub) in qs.iter().enumerate() {
                    if i > 0 {
                        b.push(op);
                    }
                    push_query(b, sub);
                }
                b.push(")");
            }
        }
        UserQuery::Not(sub) => {
            b.push("NOT (");
            push_query(b, sub);
            b.push(")");
        }
    }
}

fn order_column(f: UserFieldName) -> &'static str {
    match f {
        UserFieldName::Unspecified => "a.user_id",
        UserFieldName::UserName => "a.username_key",
        UserFieldName::FirstName => "a.first_name",
        UserFieldName::LastName => "a.last_name",
        UserFieldName::NickName => "a.nick_name",
        UserFieldName::DisplayName => "a.display_name",
        UserFieldName::Email => "a.email_key",
        UserFieldName::State => "a.state",
        UserFieldName::Type => "a.user_type",
        UserFieldName::CreationDate => "a.created_at",
    }
}

/// Users of `org_id` matching every query, with the total count.
pub async fn search(
    c: &mut Conn,
    org_id: &str,
    queries: &[UserQuery],
    sort: UserFieldName,
    page: Page,
) -> Result<(Vec<User>, i64)> {
    let mut filter = Builder::new(" WHERE a.org_id = ");
    filter.text(org_id);
    for q in queries {
        filter.push(" AND ");
        push_query(&mut filter, q);
    }
    let (where_sql, args) = filter.into_parts();
    let count = Builder::with_args(&format!("SELECT COUNT(*) FROM {FROM}{where_sql}"), args.clone());
    let total = count.fetch_count(c).await?;
    let mut list = Builder::with_args(&format!("{SELECT}{where_sql}"), args);
    let col = order_column(sort);
    let order = if col == "a.user_id" { col.to_string() } else { format!("{col}, a.user_id") };
    list.page(&order, page);
    let rows: Vec<Row> = list.fetch_all(c).await?;
    Ok((rows.into_iter().map(User::from).collect(), total))
}

pub async fn update_machine(
    c: &mut Conn,
    user_id: &str,
    name: &str,
    description: &str,
    access_token_type: AccessTokenType,
    now: i64,
) -> Result<bool> {
    let r = sqlx::query(
        "UPDATE account SET machine_name = $1, description = $2, access_token_type = $3, changed_at = $4 \
         WHERE user_id = $5 AND user_type = 2",
    )
    .bind(name)
    .bind(description)
    .bind(access_token_type.number())
    .bind(now)
    .bind(user_id)
    .execute(&mut *c)
    .await?;
    Ok(r.rows_affected() == 1)
}

/// Marks `email` verified, if it is still the user's address: one an administrator set after
/// the code (sent to the old address) was checked stays unverified.
pub async fn set_email_verified(c: &mut Conn, user_id: &str, email: &str, now: i64) -> Result<()> {
    sqlx::query("UPDATE account SET email_verified = 1, changed_at = $1 WHERE user_id = $2 AND email = $3")
        .bind(now)
        .bind(user_id)
        .bind(email)
        .execute(&mut *c)
        .await?;
    Ok(())
}

/// The user a login name means when it is no user name (which
/// [`super::auth_request::name_user`] looks up): `username@domain` of one of its organization's
/// domains, or an e-mail address that exactly one human user has.
pub async fn find_by_domain_or_email(c: &mut Conn, login: &str, by_email: bool) -> Result<Option<User>> {
    let login = login.trim();
    let Some((name, domain)) = login.rsplit_once('@') else { return Ok(None) };
    // Both lookups run, each reading the whole user, whatever the first finds: a name that means
    // someone takes the same steps as one that means no one.
    let by_domain: Option<Row> = sqlx::query_as(&format!(
        "{SELECT} JOIN org_domain od ON od.org_id = a.org_id WHERE a.username_key = $1 AND od.domain = $2"
    ))
    .bind(fold(name))
    .bind(domain.to_ascii_lowercase())
    .fetch_optional(&mut *c)
    .await?;
    let mut by_address: Vec<Row> = if by_email {
        sqlx::query_as(&format!("{SELECT} WHERE a.email_key = $1 AND a.user_type = 1 LIMIT 2"))
            .bind(fold(login))
            .fetch_all(&mut *c)
            .await?
    } else {
        Vec::new()
    };
    let only_one = by_address.len() == 1;
    Ok(by_domain.or_else(|| by_address.pop().filter(|_| only_one)).map(User::from))
}

/// An identity-provider link kept from an import.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdpLink {
    pub config_id: String,
    pub external_user_id: String,
    pub display_name: String,
}

pub async fn insert_idp_link(c: &mut Conn, user_id: &str, l: &IdpLink, now: i64) -> Result<()> {
    sqlx::query(
        "INSERT INTO user_idp_link (user_id, config_id, external_user_id, display_name, created_at) \
         VALUES ($1, $2, $3, $4, $5) ON CONFLICT (user_id, config_id, external_user_id) DO NOTHING",
    )
    .bind(user_id)
    .bind(&l.config_id)
    .bind(&l.external_user_id)
    .bind(&l.display_name)
    .bind(now)
    .execute(&mut *c)
    .await?;
    Ok(())
}

/// The identity-provider links of every user of an organization, by user id.
pub async fn idp_links_by_org(c: &mut Conn, org_id: &str) -> Result<std::collections::HashMap<String, Vec<IdpLink>>> {
    let rows: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT l.user_id, l.config_id, l.external_user_id, l.display_name FROM user_idp_link l \
         JOIN account a ON a.user_id = l.user_id WHERE a.org_id = $1 ORDER BY l.user_id, l.config_id",
    )
    .bind(org_id)
    .fetch_all(&mut *c)
    .await?;
    let mut out: std::collections::HashMap<String, Vec<IdpLink>> = std::collections::HashMap::new();
    for (user_id, config_id, external_user_id, display_name) in rows {
        out.entry(user_id).or_default().push(IdpLink { config_id, external_user_id, display_name });
    }
    Ok(out)
}

/// Every user of an organization, in id order.
pub async fn list_by_org(c: &mut Conn, org_id: &str) -> Result<Vec<User>> {
    let rows: Vec<Row> = sqlx::query_as(&format!("{SELECT} WHERE a.org_id = $1 ORDER BY a.user_id"))
        .bind(org_id)
        .fetch_all(&mut *c)
        .await?;
    Ok(rows.into_iter().map(User::from).collect())
}

/// Every user name key and id of the instance with its organization (for imports, which check
/// thousands of names at once).
pub async fn all_names(c: &mut Conn) -> Result<Vec<(String, String, String)>> {
    Ok(sqlx::query_as("SELECT username_key, user_id, org_id FROM account").fetch_all(&mut *c).await?)
}

/// The e-mail address keys of every human user (login names too: a human signs in with an
/// address no other human has).
pub async fn human_email_keys(c: &mut Conn) -> Result<Vec<String>> {
    Ok(sqlx::query_scalar("SELECT email_key FROM account WHERE user_type = 1 AND email_key <> ''")
        .fetch_all(&mut *c)
        .await?)
}

/// Inserts many users with one statement per hundred.
pub async fn insert_many(c: &mut Conn, users: &[User]) -> Result<()> {
    use super::query::Arg;
    let rows = users
        .iter()
        .map(|u| {
            let h = u.human().cloned().unwrap_or_default();
            let m = u.machine().cloned().unwrap_or_default();
            vec![
                Arg::Text(u.user_id.clone()),
                Arg::Text(u.org_id.clone()),
                Arg::Int(u.user_type().number()),
                Arg::Text(u.username.clone()),
                Arg::Text(fold(&u.username)),
                Arg::Int(u.state.number()),
                Arg::Int(u.created_at),
                Arg::Int(u.changed_at),
                Arg::Text(h.first_name),
                Arg::Text(h.last_name),
                Arg::Text(h.nick_name),
                Arg::Text(h.display_name),
                Arg::Text(h.preferred_language),
                Arg::Int(h.gender.number()),
                Arg::Text(fold(&h.email)),
                Arg::Text(h.email),
                Arg::Int(flag(h.email_verified)),
                Arg::Text(h.phone),
                Arg::Int(flag(h.phone_verified)),
                Arg::OptText(h.password_hash),
                Arg::Int(flag(h.password_change_required)),
                Arg::OptInt(h.password_changed_at),
                Arg::Text(m.name),
                Arg::Text(m.description),
                Arg::Int(m.access_token_type.number()),
                Arg::OptBytes(m.secret_digest),
                Arg::OptBytes(h.otp_secret),
                Arg::Int(u.tokens_valid_from),
            ]
        })
        .collect();
    super::query::insert_rows(
        c,
        "INSERT INTO account (user_id, org_id, user_type, username, username_key, state, created_at, changed_at, \
         first_name, last_name, nick_name, display_name, preferred_language, gender, email_key, email, \
         email_verified, phone, phone_verified, password_hash, password_change_required, password_changed_at, \
         machine_name, description, access_token_type, secret_digest, otp_secret, tokens_valid_from) VALUES",
        rows,
        100,
    )
    .await
}
