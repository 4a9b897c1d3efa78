//! The bulk import body (`admin.ImportDataRequest` in its JSON form) and a writer that streams
//! it user by user:
//!
//! `{"dataOrgs":{"orgs":[{"orgId":"<org>","humanUsers":[{"userId":..,"user":{..}},..]}]},"timeout":"30m0s"}`
//!
//! Field names are lowerCamelCase and empty fields are left out, as protobuf's JSON mapping
//! writes them. The body goes to a temporary file next to the output, renamed over it only when
//! complete, so a failed run never leaves half a body behind.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

use super::Error;
use crate::management::import::{self, ImportHumanUserRequest};
use crate::management::users::{EmailInput, PhoneInput, ProfileInput};

/// `DataHumanUser`: one user of the organization.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct HumanUser {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_id: String,
    pub user: ImportUser,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<UserState>,
}

/// The user states the tool writes; active is the default and left out.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub enum UserState {
    /// Cannot sign in until an administrator reactivates the user.
    #[serde(rename = "USER_STATE_INACTIVE")]
    Inactive,
}

/// `ImportHumanUserRequest` (SPEC.md 2.7).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ImportUser {
    pub user_name: String,
    pub profile: Profile,
    pub email: Email,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone: Option<Phone>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hashed_password: Option<HashedPassword>,
    #[serde(skip_serializing_if = "is_false")]
    pub password_change_required: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub otp_code: String,
}

impl ImportUser {
    /// The record as the import reads it (the body's JSON, deserialized), for the import's own
    /// checks.
    pub fn to_request(&self) -> ImportHumanUserRequest {
        let p = &self.profile;
        ImportHumanUserRequest {
            user_name: self.user_name.clone(),
            profile: Some(ProfileInput {
                first_name: p.first_name.clone(),
                last_name: p.last_name.clone(),
                nick_name: p.nick_name.clone(),
                display_name: p.display_name.clone(),
                preferred_language: p.preferred_language.clone(),
                ..ProfileInput::default()
            }),
            email: Some(EmailInput {
                email: self.email.email.clone(),
                is_email_verified: self.email.is_email_verified,
            }),
            phone: self
                .phone
                .as_ref()
                .map(|p| PhoneInput { phone: p.phone.clone(), is_phone_verified: p.is_phone_verified }),
            hashed_password: self.hashed_password.as_ref().map(|h| import::HashedPassword { value: h.value.clone() }),
            password_change_required: self.password_change_required,
            otp_code: self.otp_code.clone(),
            ..ImportHumanUserRequest::default()
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Profile {
    pub first_name: String,
    pub last_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub nick_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub preferred_language: String,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Email {
    pub email: String,
    #[serde(skip_serializing_if = "is_false")]
    pub is_email_verified: bool,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct Phone {
    pub phone: String,
    #[serde(skip_serializing_if = "is_false")]
    pub is_phone_verified: bool,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct HashedPassword {
    pub value: String,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Indentation of a user object inside the pretty-printed body.
const USER_INDENT: &[u8] = b"          ";

/// Writes the body one user at a time into a temporary file; [`BodyWriter::finish`] completes it
/// and renames it to the output path. Dropped unfinished, it removes the temporary file.
pub struct BodyWriter {
    out: Option<BufWriter<File>>,
    tmp: PathBuf,
    dest: PathBuf,
    pretty: bool,
    count: u64,
    buf: Vec<u8>,
}

impl BodyWriter {
    /// Creates the temporary file next to `dest` and writes the head of the body.
    pub fn create(dest: &Path, org: &str, pretty: bool) -> Result<Self, Error> {
        let name = dest
            .file_name()
            .ok_or_else(|| Error::Usage(format!("--output '{}' is not a file name", dest.display())))?;
        let dir = match dest.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let tmp = dir.join(format!(".{}.{}.tmp", name.to_string_lossy(), std::process::id()));
        // The body holds every password hash and OTP secret: readable by its owner alone.
        let mut options = File::options();
        options.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&tmp).map_err(|e| Error::Io {
            path: dest.to_path_buf(),
            source: std::io::Error::new(e.kind(), format!("cannot write the output: {e}")),
        })?;
        let mut w = Self {
            out: Some(BufWriter::with_capacity(1 << 16, file)),
            tmp,
            dest: dest.to_path_buf(),
            pretty,
            count: 0,
            buf: Vec::with_capacity(1024),
        };
        let org = json_string(org);
        let head = if pretty {
            format!(
                "{{\n  \"dataOrgs\": {{\n    \"orgs\": [\n      {{\n        \"orgId\": {org},\n        \"humanUsers\": ["
            )
        } else {
            format!("{{\"dataOrgs\":{{\"orgs\":[{{\"orgId\":{org},\"humanUsers\":[")
        };
        w.write(head.as_bytes())?;
        Ok(w)
    }

    /// Users written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn push(&mut self, user: &HumanUser) -> Result<(), Error> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let encoded = if self.pretty {
            serde_json::to_writer_pretty(&mut buf, user)
        } else {
            serde_json::to_writer(&mut buf, user)
        };
        encoded.map_err(|e| Error::Input(format!("cannot encode user '{}': {e}", user.user_id)))?;
        let first = self.count == 0;
        let result = if self.pretty {
            self.write(if first { b"\n" } else { b",\n" }).and_then(|()| self.write(USER_INDENT)).and_then(|()| {
                // JSON strings cannot hold a raw line break, so every one in `buf` is
                // layout and can take the extra indentation.
                let mut lines = buf.split(|b| *b == b'\n');
                if let Some(line) = lines.next() {
                    self.write(line)?;
                }
                for line in lines {
                    self.write(b"\n")?;
                    self.write(USER_INDENT)?;
                    self.write(line)?;
                }
                Ok(())
            })
        } else if first {
            self.write(&buf)
        } else {
            self.write(b",").and_then(|()| self.write(&buf))
        };
        self.buf = buf;
        result?;
        self.count += 1;
        Ok(())
    }

    /// Writes the tail with the timeout, flushes, syncs and renames the file to its place.
    pub fn finish(mut self, timeout: Duration) -> Result<u64, Error> {
        let timeout = json_string(&crate::domain::duration::format_go(timeout));
        let tail = if self.pretty {
            let close = if self.count == 0 { "]" } else { "\n        ]" };
            format!("{close}\n      }}\n    ]\n  }},\n  \"timeout\": {timeout}\n}}\n")
        } else {
            format!("]}}]}},\"timeout\":{timeout}}}\n")
        };
        self.write(tail.as_bytes())?;
        let Some(out) = self.out.take() else {
            return Err(Error::Input("the output was already finished".into()));
        };
        let file = out.into_inner().map_err(|e| Error::io(&self.tmp, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(&self.tmp, e))?;
        drop(file);
        if let Err(e) = std::fs::rename(&self.tmp, &self.dest) {
            let _ = std::fs::remove_file(&self.tmp);
            return Err(Error::io(&self.dest, e));
        }
        Ok(self.count)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), Error> {
        match self.out.as_mut() {
            Some(out) => out.write_all(bytes).map_err(|e| Error::io(&self.tmp, e)),
            None => Err(Error::Input("the output was already finished".into())),
        }
    }
}

impl Drop for BodyWriter {
    fn drop(&mut self) {
        if let Some(out) = self.out.take() {
            drop(out);
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn json_string(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(id: &str) -> HumanUser {
        HumanUser {
            user_id: id.into(),
            user: ImportUser {
                user_name: format!("name-{id}"),
                profile: Profile {
                    first_name: "Ada".into(),
                    last_name: "Lovelace \"Byron\"".into(),
                    ..Profile::default()
                },
                email: Email { email: "ada@example.com".into(), is_email_verified: true },
                phone: None,
                hashed_password: Some(HashedPassword { value: "$2b$10$abc".into() }),
                password_change_required: false,
                otp_code: String::new(),
            },
            state: (id == "2").then_some(UserState::Inactive),
        }
    }

    fn write(pretty: bool, users: &[HumanUser]) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("body.json");
        let mut w = BodyWriter::create(&dest, "org\"1", pretty).unwrap();
        for u in users {
            w.push(u).unwrap();
        }
        assert_eq!(w.finish(Duration::from_secs(1800)).unwrap(), users.len() as u64);
        let text = std::fs::read_to_string(&dest).unwrap();
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "only the body is left in the directory");
        // Password hashes and OTP secrets: for the owner's eyes only.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&dest).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{mode:o}");
        }
        (dir, text)
    }

    #[test]
    fn compact_body_has_the_import_shape() {
        let (_d, text) = write(false, &[user("1"), user("2")]);
        assert_eq!(
            text,
            concat!(
                r#"{"dataOrgs":{"orgs":[{"orgId":"org\"1","humanUsers":["#,
                r#"{"userId":"1","user":{"userName":"name-1","profile":{"firstName":"Ada","lastName":"Lovelace \"Byron\""},"email":{"email":"ada@example.com","isEmailVerified":true},"hashedPassword":{"value":"$2b$10$abc"}}},"#,
                r#"{"userId":"2","user":{"userName":"name-2","profile":{"firstName":"Ada","lastName":"Lovelace \"Byron\""},"email":{"email":"ada@example.com","isEmailVerified":true},"hashedPassword":{"value":"$2b$10$abc"}},"state":"USER_STATE_INACTIVE"}"#,
                r#"]}]},"timeout":"30m0s"}"#,
                "\n"
            )
        );
    }

    #[test]
    fn pretty_body_is_the_same_document() {
        let users = [user("1"), user("2"), user("3")];
        let (_d, compact) = write(false, &users);
        let (_e, pretty) = write(true, &users);
        assert!(pretty.lines().count() > 30, "{pretty}");
        assert!(pretty.contains("\n          {\n            \"userId\": \"1\","));
        let a: serde_json::Value = serde_json::from_str(&compact).unwrap();
        let b: serde_json::Value = serde_json::from_str(&pretty).unwrap();
        assert_eq!(a, b);
        for empty in [false, true] {
            let (_f, text) = write(empty, &[]);
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["dataOrgs"]["orgs"][0]["humanUsers"], serde_json::json!([]));
        }
    }

    #[test]
    fn the_record_checked_is_the_one_the_import_reads() {
        let mut u = user("1");
        u.user.profile.nick_name = "Countess".into();
        u.user.profile.display_name = "Ada L.".into();
        u.user.profile.preferred_language = "en".into();
        u.user.phone = Some(Phone { phone: "+41790000000".into(), is_phone_verified: true });
        u.user.password_change_required = true;
        u.user.otp_code = "JBSWY3DPEHPK3PXP".into();
        for u in [u, user("2")] {
            let read: crate::admin::data::DataHumanUser =
                serde_json::from_value(serde_json::to_value(&u).unwrap()).unwrap();
            assert_eq!(serde_json::to_value(&read.user).unwrap(), serde_json::to_value(u.user.to_request()).unwrap());
        }
    }

    #[test]
    fn an_unfinished_body_leaves_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("body.json");
        std::fs::write(&dest, "previous").unwrap();
        {
            let mut w = BodyWriter::create(&dest, "1", false).unwrap();
            w.push(&user("1")).unwrap();
        }
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "previous");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        let missing = dir.path().join("no/such/dir/body.json");
        let err = BodyWriter::create(&missing, "1", false).err().unwrap();
        assert!(err.to_string().contains("no/such/dir"), "{err}");
    }
}
