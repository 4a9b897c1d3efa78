//! The first start: with an empty store, create the default organization, a human
//! administrator, a machine administrator with a personal access token (written to a file), and
//! the first signing key, all in one transaction. Replicas starting together on one database
//! race for the instance row; exactly one wins, the others find the work done.

use std::io::Write;
use std::path::Path;

use crate::app::AppState;
use crate::crypto::keys::KeySpec;
use crate::crypto::secret;
use crate::domain::enums::{AccessTokenType, DomainValidationType, OrgState, UserState};
use crate::domain::settings::PasswordComplexityPolicy;
use crate::domain::validate::slug;
use crate::id::new_id;
use crate::keys::KeyError;
use crate::store::user::{Human, Kind, Machine, User};
use crate::store::{StoreError, instance, key, member, org, setting, user};

#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("{0}")]
    Config(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Keys(#[from] KeyError),
    #[error("cannot write the admin token to {path}: {error}")]
    PatFile { path: String, error: std::io::Error },
    #[error("password hashing failed: {0}")]
    Hash(String),
}

/// What the first start created (None when the store was bootstrapped already).
#[derive(Debug)]
pub struct FirstStart {
    pub org_id: String,
    pub admin_user_id: String,
    pub machine_user_id: String,
    /// Set when the password was generated (it is shown once).
    pub generated_password: Option<String>,
}

/// A password that satisfies the default complexity policy.
fn generate_password() -> String {
    format!("{}-Aa1", secret::new_secret().chars().take(20).collect::<String>())
}

pub async fn run(state: &AppState) -> Result<Option<FirstStart>, BootstrapError> {
    let cfg = &state.settings.first_instance;
    {
        let mut c = state.db.conn().await?;
        if instance::default_org(&mut c).await?.is_some() {
            return Ok(None);
        }
    }
    let (password, generated) = match &cfg.admin_password {
        Some(p) => {
            let problems = PasswordComplexityPolicy::default().violations(p);
            if !problems.is_empty() {
                return Err(BootstrapError::Config(format!(
                    "configuration error: firstinstance.admin_password (LATCH_FIRSTINSTANCE_ADMIN_PASSWORD) does not meet the password policy: it {}",
                    problems.join(", ")
                )));
            }
            (p.clone(), None)
        }
        None => {
            let p = generate_password();
            (p.clone(), Some(p))
        }
    };
    // Hashed off the hashing threads, so no argon2 memory stays behind after the first start.
    let params = state.hasher.params();
    let pw = password.clone();
    let hash = tokio::task::spawn_blocking(move || crate::crypto::password::PasswordHasher::hash_blocking(params, &pw))
        .await
        .map_err(|e| BootstrapError::Hash(e.to_string()))?
        .map_err(|e| BootstrapError::Hash(e.to_string()))?;
    let pat_token = secret::new_secret();

    let now = state.clock.now();
    let org_id = new_id();
    let domain = format!("{}.{}", slug(&cfg.org_name), state.settings.external_host());
    let mut tx = state.db.begin().await?;
    if !instance::claim(&mut tx, &org_id, now).await? {
        // Another replica bootstrapped while we prepared.
        return Ok(None);
    }
    org::insert(&mut tx, &org_id, &cfg.org_name, OrgState::Active, now).await?;
    org::insert_domain(
        &mut tx,
        &org::OrgDomain {
            domain: domain.clone(),
            org_id: org_id.clone(),
            is_verified: true,
            is_primary: true,
            validation_type: DomainValidationType::Unspecified,
            created_at: now,
        },
    )
    .await?;

    let admin_id = new_id();
    let email = cfg.admin_email.clone().unwrap_or_else(|| format!("{}@{domain}", slug(&cfg.admin_username)));
    user::insert(
        &mut tx,
        &User {
            user_id: admin_id.clone(),
            org_id: org_id.clone(),
            username: cfg.admin_username.clone(),
            state: UserState::Active,
            created_at: now,
            changed_at: now,
            tokens_valid_from: now,
            org_domain: String::new(),
            org_active: true,
            read_at: None,
            kind: Kind::Human(Human {
                first_name: "Latch".into(),
                last_name: "Administrator".into(),
                display_name: "Latch Administrator".into(),
                preferred_language: "en".into(),
                email,
                email_verified: true,
                password_hash: Some(hash),
                password_change_required: true,
                password_changed_at: Some(now),
                ..Human::default()
            }),
        },
    )
    .await?;

    let machine_id = new_id();
    user::insert(
        &mut tx,
        &User {
            user_id: machine_id.clone(),
            org_id: org_id.clone(),
            username: cfg.machine_username.clone(),
            state: UserState::Active,
            created_at: now,
            changed_at: now,
            tokens_valid_from: now,
            org_domain: String::new(),
            org_active: true,
            read_at: None,
            kind: Kind::Machine(Machine {
                name: "Latch administrator (service account)".into(),
                description: "Created at the first start for scripts and automation".into(),
                access_token_type: AccessTokenType::Bearer,
                secret_digest: None,
            }),
        },
    )
    .await?;
    for uid in [&admin_id, &machine_id] {
        member::upsert(&mut tx, member::Scope::Iam, "", uid, &["IAM_OWNER".to_string()], now).await?;
        member::upsert(&mut tx, member::Scope::Org, &org_id, uid, &["ORG_OWNER".to_string()], now).await?;
    }
    key::insert_pat(
        &mut tx,
        &key::Pat {
            pat_id: new_id(),
            user_id: machine_id.clone(),
            scopes: crate::oauth::scope::pat_scopes(),
            expires_at: None,
            created_at: now,
        },
        &secret::digest(&pat_token),
    )
    .await?;
    // The defaults become explicit rows so that later default changes in code do not alter a
    // running instance silently.
    setting::save(&mut tx, setting::INSTANCE, &PasswordComplexityPolicy::default(), now).await?;
    state.keys.create(&mut tx, KeySpec::Rsa { bits: 2048 }, Some(now)).await?;
    // The token's file before the commit: the store keeps only its digest, so a file that
    // cannot be written after a commit (a read-only path) would leave an instance nobody can
    // administer, the first start being over. Written first, a failure rolls the start back
    // and the next start tries again (overwriting the file).
    write_secret_file(&cfg.pat_path, &pat_token)?;
    tx.commit().await.map_err(StoreError::from)?;

    state.keys.reload().await?;
    tracing::info!(org_id = %org_id, domain = %domain, pat_path = %cfg.pat_path.display(), "first start: created the default organization and administrators");
    Ok(Some(FirstStart { org_id, admin_user_id: admin_id, machine_user_id: machine_id, generated_password: generated }))
}

/// Writes `content` to `path` readable by the owner only (0600), creating its folder.
pub fn write_secret_file(path: &Path, content: &str) -> Result<(), BootstrapError> {
    let fail = |error| BootstrapError::PatFile { path: path.display().to_string(), error };
    if let Some(parent) = path.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(fail)?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(path).map_err(fail)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
    }
    f.write_all(content.as_bytes()).map_err(fail)?;
    f.write_all(b"\n").map_err(fail)?;
    Ok(())
}
