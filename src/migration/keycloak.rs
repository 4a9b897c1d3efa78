//! `latch migrate keycloak`: a realm export as `kc.sh export` writes it (`--file`: one realm,
//! or an array of realms; `--dir`: `<realm>-realm.json` plus `<realm>-users-<n>.json`) to the
//! import body.
//!
//! Per user: `id` to `userId`; `username`; `firstName`, `lastName` (filled in when missing);
//! `email`, `emailVerified`; the attributes `phoneNumber`, `phoneNumberVerified` and `locale`;
//! `enabled: false` to the inactive state; the `UPDATE_PASSWORD` required action to
//! `passwordChangeRequired`; the first password credential (Keycloak 10+ layout with
//! double-encoded `secretData`/`credentialData`, the flat pre-10 layout, or a plain-text
//! `value` as hand-written realms have, hashed here with argon2id); the first TOTP credential
//! with 6 digits, 30 s and SHA-1 to `otpCode`. Service accounts are skipped.

use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use serde::Deserialize;
use serde_json::Value;

use super::hash::HashError;
use super::realm::{self, FileReport};
use super::sink::{Candidate, Sink};
use super::{Error, Options, Summary, file_len, progress_bar};
use crate::crypto::password::{Argon2Params, PasswordHasher};

mod credential;
#[cfg(test)]
pub(crate) mod tests;

/// A user of a realm export; fields not listed are skipped unparsed.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KcUser {
    id: Option<String>,
    username: Option<String>,
    email: Option<String>,
    email_verified: Option<bool>,
    first_name: Option<String>,
    last_name: Option<String>,
    enabled: Option<bool>,
    attributes: Option<Attributes>,
    credentials: Option<Vec<credential::KcCredential>>,
    required_actions: Option<Vec<String>>,
    /// Set on users of a user federation (LDAP, Kerberos): their password is not in the export.
    federation_link: Option<String>,
    /// Links to identity providers (social or enterprise sign-in); not carried over.
    federated_identities: Option<Vec<Value>>,
    /// Set on a client's service-account user (`serviceAccountClientLink` in some versions).
    #[serde(alias = "serviceAccountClientLink")]
    service_account_client_id: Option<Value>,
}

/// The attributes the import has a field for. Keycloak writes each as an array of strings.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct Attributes {
    #[serde(rename = "phoneNumber")]
    phone_number: Option<Value>,
    #[serde(rename = "phoneNumberVerified")]
    phone_number_verified: Option<Value>,
    locale: Option<Value>,
}

/// The first string of an attribute value (`["x"]`, or a bare `"x"`).
fn first_string(v: &Option<Value>) -> String {
    match v {
        Some(Value::Array(items)) => match items.first() {
            Some(Value::String(s)) => s.clone(),
            _ => String::new(),
        },
        Some(Value::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// Converts a realm export. `realm` is a realm file or an export directory; `realm_name`
/// picks a realm when there are several.
pub fn run(opts: &Options, realm: &Path, realm_name: Option<&str>) -> Result<Summary, Error> {
    opts.validate()?;
    let plan = plan(realm, realm_name)?;
    let total = plan.files.iter().map(|p| file_len(p)).sum();
    let pb = progress_bar(opts.progress, total);
    let result = convert_files(opts, &plan, realm_name, &pb)
        .and_then(|sink| sink.finish(&format!("the realm in {}", realm.display())));
    pb.finish_and_clear();
    result
}

fn convert_files<'o>(
    opts: &'o Options,
    plan: &Plan,
    realm_name: Option<&str>,
    pb: &ProgressBar,
) -> Result<Sink<'o>, Error> {
    let mut sink = Sink::create(opts, pb.clone())?;
    let mut on_user = |u: KcUser| convert(u, &mut sink);
    for (i, file) in plan.files.iter().enumerate() {
        // In a directory export, the realm file has been picked by name already and the users
        // files hold that realm only.
        let want = if plan.directory { None } else { realm_name };
        let report = realm::read_file(file, want, &mut on_user, pb)?;
        if i == 0 {
            check_selection(file, realm_name, &report)?;
        }
    }
    Ok(sink)
}

/// The files to read, in order.
struct Plan {
    files: Vec<PathBuf>,
    directory: bool,
}

fn plan(realm: &Path, realm_name: Option<&str>) -> Result<Plan, Error> {
    let meta = std::fs::metadata(realm).map_err(|e| Error::io(realm, e))?;
    if !meta.is_dir() {
        return Ok(Plan { files: vec![realm.to_path_buf()], directory: false });
    }
    let mut realms = Vec::new();
    let mut names = Vec::new();
    for entry in std::fs::read_dir(realm).map_err(|e| Error::io(realm, e))? {
        let entry = entry.map_err(|e| Error::io(realm, e))?;
        if let Some(name) = entry.file_name().to_str() {
            if let Some(r) = name.strip_suffix("-realm.json") {
                realms.push(r.to_string());
            }
            names.push(name.to_string());
        }
    }
    realms.sort();
    let chosen = match (realm_name, realms.as_slice()) {
        (Some(want), _) if realms.iter().any(|r| r == want) => want.to_string(),
        (None, [only]) => only.clone(),
        (_, []) => {
            return Err(Error::Input(format!(
                "{} holds no <realm>-realm.json file of a Keycloak directory export",
                realm.display()
            )));
        }
        (Some(want), _) => {
            return Err(Error::Input(format!(
                "{} has no realm '{want}' (realms: {})",
                realm.display(),
                realms.join(", ")
            )));
        }
        (None, _) => {
            return Err(Error::Input(format!(
                "{} holds {} realms ({}); pick one with --realm-name",
                realm.display(),
                realms.len(),
                realms.join(", ")
            )));
        }
    };
    let prefix = format!("{chosen}-users-");
    let mut users: Vec<(u64, String)> = names
        .iter()
        .filter_map(|n| {
            let n_str = n.strip_prefix(&prefix)?.strip_suffix(".json")?;
            Some((n_str.parse().ok()?, n.clone()))
        })
        .collect();
    users.sort();
    let mut files = vec![realm.join(format!("{chosen}-realm.json"))];
    files.extend(users.into_iter().map(|(_, n)| realm.join(n)));
    Ok(Plan { files, directory: true })
}

/// After the realm file: the wanted realm was there, and without a name there was only one.
fn check_selection(file: &Path, realm_name: Option<&str>, report: &FileReport) -> Result<(), Error> {
    let list = || {
        let names: Vec<&str> = report.realms.iter().map(|r| if r.is_empty() { "(unnamed)" } else { r }).collect();
        names.join(", ")
    };
    match realm_name {
        Some(want) if !report.matched => {
            Err(Error::Input(format!("{} has no realm '{want}' (realms: {})", file.display(), list())))
        }
        None if report.realms.len() > 1 => Err(Error::Input(format!(
            "{} holds {} realms ({}); pick one with --realm-name",
            file.display(),
            report.realms.len(),
            list()
        ))),
        _ => Ok(()),
    }
}

/// One user: skipped, or mapped and handed to the sink.
fn convert(u: KcUser, sink: &mut Sink<'_>) -> Result<(), Error> {
    sink.seen();
    let user_name = u.username.clone().unwrap_or_default();
    let label = if user_name.is_empty() { u.id.clone().unwrap_or_default() } else { user_name.clone() };
    if u.service_account_client_id.as_ref().is_some_and(|v| !v.is_null()) {
        sink.skip(&label, "service account");
        return Ok(());
    }
    let credentials = u.credentials.unwrap_or_default();
    let password_credential = credential::password(&credentials);
    let password = match password_credential {
        None => None,
        Some(c) => match c.hash() {
            Ok(h) => Some(h),
            Err(HashError::Unsupported(algorithm)) if sink.options().skip_unsupported => {
                sink.skip(&label, &format!("unsupported password algorithm '{algorithm}'"));
                return Ok(());
            }
            Err(HashError::Unsupported(algorithm)) => {
                return Err(Error::Unsupported { user: label, algorithm });
            }
            Err(HashError::Malformed(msg)) => {
                return Err(Error::Credential { user: label, msg: format!("password credential: {msg}") });
            }
        },
    };
    if password.is_none() && u.federation_link.is_some() {
        sink.notice(&label, "federated user (LDAP, Kerberos), its password is not in the export");
    }
    let password = match password {
        Some(credential::Password::Hash(h)) => Some(h),
        Some(credential::Password::Plain(p)) => {
            sink.notice(&label, "plain-text password hashed with argon2id");
            let h = PasswordHasher::hash_blocking(Argon2Params::default(), &p)
                .map_err(|e| Error::Credential { user: label.clone(), msg: e.to_string() })?;
            Some(h)
        }
        None => None,
    };
    let otp = match credential::otp(&credentials) {
        credential::Otp::None => None,
        credential::Otp::Code { code, more } => {
            if more {
                sink.notice(&label, "several OTP devices, one imported");
            }
            Some(code)
        }
        credential::Otp::NotPortable(why) => {
            sink.notice(&label, &format!("OTP not imported: {why}"));
            None
        }
    };
    if u.federated_identities.as_ref().is_some_and(|l| !l.is_empty()) {
        sink.notice(&label, "identity-provider links (federatedIdentities) not imported");
    }
    if credentials.iter().any(credential::KcCredential::is_webauthn) {
        sink.notice(&label, "security keys and passkeys not imported (not portable)");
    }
    let temporary = password_credential.is_some_and(|c| c.temporary());
    let update_password = u.required_actions.as_ref().is_some_and(|a| a.iter().any(|x| x == "UPDATE_PASSWORD"));
    let attributes = u.attributes.unwrap_or_default();
    sink.accept(Candidate {
        label,
        user_id: u.id.unwrap_or_default(),
        user_name,
        first_name: u.first_name.unwrap_or_default(),
        last_name: u.last_name.unwrap_or_default(),
        email: u.email.unwrap_or_default(),
        email_verified: u.email_verified.unwrap_or(false),
        phone: first_string(&attributes.phone_number),
        phone_verified: first_string(&attributes.phone_number_verified) == "true",
        locale: first_string(&attributes.locale),
        password_change_required: password.is_some() && (temporary || update_password),
        password,
        otp,
        inactive: u.enabled == Some(false),
        ..Candidate::default()
    })
}
