//! `POST /admin/v1/import`: organizations with their users, projects, applications, grants,
//! members and policies, from an export document (`data_orgsv1`, a JSON string), the object the
//! migration tool writes (`dataOrgs`), or an object in a Google Cloud Storage bucket
//! (`data_orgsv1_gcs`).
//!
//! Each organization is checked as a whole first (every problem is reported, nothing is written
//! when there is one) and then written in one transaction, so a failing organization stays as it
//! was while the others go on. Ids are kept. What already exists is left alone and listed under
//! `skipped`, so importing a document twice changes nothing the second time. `dryRun` does all
//! of it, including the writes, and rolls every transaction back.

use std::collections::HashMap;

use axum::Json;
use axum::extract::{Request, State};
use serde::{Deserialize, Serialize};

use super::data::{Document, GcsTarget};
use super::export::{deadline_error, timeout};
use super::gcs;
use super::import_org::{self, Index, Ledger, Outcome, Target};
use crate::api::error::ApiResult;
use crate::api::json::read_limited;
use crate::api::types::is_false;
use crate::api::{ApiError, Caller};
use crate::app::AppState;
use crate::domain::roles::Permission;
use crate::management::import::notify;
use crate::store::fold;

/// How long an import cut short by its timeout waits for a commit that had begun, so as to
/// say whether that organization is in.
const COMMIT_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

/// Largest request body the import reads (other routes keep 1 MiB), once the caller is
/// authorized.
pub const MAX_BODY: usize = 512 * 1024 * 1024;

#[derive(Deserialize, Default, serde::Serialize, utoipa::ToSchema)]
#[serde(default)]
pub struct ImportRequest {
    #[serde(rename = "dataOrgs", alias = "data_orgs")]
    data_orgs: Option<Document>,
    #[serde(rename = "dataOrgsv1", alias = "data_orgsv1")]
    data_orgsv1: Option<String>,
    #[serde(rename = "dataOrgsv1Gcs", alias = "data_orgsv1_gcs", alias = "dataOrgsGcs", alias = "data_orgs_gcs")]
    gcs: Option<GcsTarget>,
    timeout: Option<String>,
    #[serde(rename = "dryRun", alias = "dry_run")]
    dry_run: bool,
    // Sources of the platform latch follows that latch does not read.
    #[serde(
        rename = "dataOrgsLocal",
        alias = "data_orgs_local",
        alias = "dataOrgsv1Local",
        alias = "data_orgsv1_local"
    )]
    #[serde(skip_serializing)]
    #[schema(value_type = Option<Object>)]
    local: Option<serde::de::IgnoredAny>,
    #[serde(rename = "dataOrgsS3", alias = "data_orgs_s3", alias = "dataOrgsv1S3", alias = "data_orgsv1_s3")]
    #[serde(skip_serializing)]
    #[schema(value_type = Option<Object>)]
    s3: Option<serde::de::IgnoredAny>,
}

/// One problem (in `errors`) or one object left as it was (in `skipped`).
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ImportItem {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub id: String,
    pub message: String,
}

impl ImportItem {
    pub fn new(kind: &'static str, id: impl Into<String>, message: impl Into<String>) -> Self {
        Self { kind, id: id.into(), message: message.into() }
    }
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GrantRef {
    pub project_id: String,
    pub user_id: String,
}

#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UserLinkRef {
    pub user_id: String,
    pub external_user_id: String,
    pub display_name: String,
    pub idp_id: String,
}

/// What one organization received.
#[derive(Debug, Clone, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SuccessOrg {
    pub org_id: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub project_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub project_roles: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub oidc_app_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_app_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub human_user_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub machine_user_ids: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub user_grants: Vec<GrantRef>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub org_members: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub project_members: Vec<GrantRef>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub user_links: Vec<UserLinkRef>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub domains: Vec<String>,
}

#[derive(Debug, Default, Serialize, utoipa::ToSchema)]
pub struct Success {
    pub orgs: Vec<SuccessOrg>,
}

#[derive(Debug, Default, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImportResponse {
    pub errors: Vec<ImportItem>,
    pub success: Success,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<ImportItem>,
    #[serde(skip_serializing_if = "is_false")]
    pub dry_run: bool,
}

/// Imports organizations; set exactly one source.
#[utoipa::path(post, path = "/import", request_body = ImportRequest, responses((status = 200, body = ImportResponse)))]
pub async fn import(
    State(state): State<AppState>,
    caller: Caller,
    request: Request,
) -> ApiResult<Json<ImportResponse>> {
    // The caller is authorized before the body, up to 512 MiB, is read.
    caller.require(Permission::IamWrite)?;
    let body = read_limited(request, MAX_BODY).await?;
    let req = parse_request(&body)?;
    drop(body);
    let r = "ImportDataRequest";
    let limit = timeout(r, req.timeout.as_deref())?;
    if req.local.is_some() || req.s3.is_some() {
        return Err(ApiError::invalid(format!(
            "invalid {r}: local files and S3 are not sources latch reads; use data_orgsv1, dataOrgs or data_orgsv1_gcs"
        )));
    }
    let sources = [req.data_orgs.is_some(), req.data_orgsv1.is_some(), req.gcs.is_some()];
    if sources.iter().filter(|s| **s).count() != 1 {
        return Err(ApiError::invalid(format!(
            "invalid {r}: set exactly one of data_orgsv1, dataOrgs and data_orgsv1_gcs"
        )));
    }
    let bucket = match &req.gcs {
        Some(t) => Some(gcs::Bucket::from_target(&state.settings, t, "data_orgsv1_gcs")?),
        None => None,
    };
    let dry_run = req.dry_run;
    let ledger = Ledger::default();
    let work = async {
        let doc = match (req.data_orgs, req.data_orgsv1, bucket) {
            (Some(doc), _, _) => doc,
            (_, Some(text), _) => parse_document("data_orgsv1", text.as_bytes())?,
            (_, _, Some(b)) => parse_document("data_orgsv1_gcs", &b.download().await?)?,
            _ => unreachable!("exactly one source was checked above"),
        };
        run(&state, doc, dry_run, &ledger).await
    };
    let finished = tokio::time::timeout(limit, work).await;
    // Cut short, the import may leave a commit in flight: what it committed is known once that
    // commit has ended, waited for a while.
    let done = ledger.settle(COMMIT_GRACE).await;
    // The users of every organization committed get their messages, whatever came after; those
    // of a commit that ends later get them when it does.
    if !done.notify.is_empty() {
        state.background.spawn(send_messages(state.clone(), done.notify));
    }
    if done.committing.is_some() {
        let state = state.clone();
        state.clone().background.spawn(async move {
            let late = ledger.settle(std::time::Duration::MAX).await;
            if !late.notify.is_empty() {
                send_messages(state, late.notify).await;
            }
        });
    }
    match finished {
        Ok(report) => Ok(Json(report?)),
        Err(_) => {
            let mut e = deadline_error("import");
            if !done.orgs.is_empty() {
                e.message =
                    format!("{}; these organizations were imported before it: {}", e.message, done.orgs.join(", "));
            }
            match &done.committing {
                Some(org) => {
                    e.message = format!(
                        "{}; the commit of organization {org} had begun and not ended {}s after the timeout: look it up before importing it again",
                        e.message,
                        COMMIT_GRACE.as_secs()
                    )
                }
                None if done.orgs.is_empty() => e.message = format!("{}; no organization was imported", e.message),
                None => e.message = format!("{} (any organization not yet committed was rolled back)", e.message),
            }
            Err(e)
        }
    }
}

fn json_error(field: &str, e: serde_path_to_error::Error<serde_json::Error>) -> ApiError {
    let path = e.path().to_string();
    if path == "." {
        ApiError::invalid(format!("invalid {field}: {}", e.inner()))
    } else {
        ApiError::invalid(format!("invalid {field}: {path}: {}", e.inner()))
    }
}

/// Documents written with protobuf field names (`org_id`) go through the key normaliser of the
/// JSON API; camelCase documents (what latch and the migration tool write) are read directly.
fn snake_keys(raw: &[u8]) -> bool {
    memchr_any(raw, b"\"org_id\"") || memchr_any(raw, b"\"human_users\"")
}

fn memchr_any(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn parse_request(body: &[u8]) -> ApiResult<ImportRequest> {
    if body.iter().all(|b| b.is_ascii_whitespace()) {
        return Err(ApiError::invalid("invalid ImportDataRequest: the body is empty"));
    }
    if snake_keys(body) {
        return crate::api::json::parse(body);
    }
    if crate::api::json::has_nul_escape(body) {
        return Err(ApiError::invalid("invalid ImportDataRequest: text must not contain the NUL character"));
    }
    let mut de = serde_json::Deserializer::from_slice(body);
    let req: ImportRequest =
        serde_path_to_error::deserialize(&mut de).map_err(|e| json_error("ImportDataRequest", e))?;
    de.end().map_err(|e| ApiError::invalid(format!("invalid ImportDataRequest: {e}")))?;
    Ok(req)
}

/// Reads an export document: `{"orgs": [...]}`.
fn parse_document(field: &str, raw: &[u8]) -> ApiResult<Document> {
    if crate::api::json::has_nul_escape(raw) {
        return Err(ApiError::invalid(format!("invalid {field}: text must not contain the NUL character")));
    }
    let value_first = snake_keys(raw);
    let doc: Document = if value_first {
        let v: serde_json::Value = serde_json::from_slice(raw)
            .map_err(|e| ApiError::invalid(format!("invalid {field}: not a JSON export document: {e}")))?;
        serde_path_to_error::deserialize(crate::api::json::normalize(v)).map_err(|e| json_error(field, e))?
    } else {
        let mut de = serde_json::Deserializer::from_slice(raw);
        let doc = serde_path_to_error::deserialize(&mut de).map_err(|e| match e.inner().classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Eof => {
                ApiError::invalid(format!("invalid {field}: not a JSON export document: {}", e.inner()))
            }
            _ => json_error(field, e),
        })?;
        de.end().map_err(|e| ApiError::invalid(format!("invalid {field}: {e}")))?;
        doc
    };
    if doc.orgs.is_empty() {
        // An empty document must say so at its top level: an import request body put in a
        // bucket (`latch migrate`'s output, {"dataOrgs": {"orgs": [...]}}) holds its "orgs" one
        // level down and would otherwise import nothing and answer success.
        let keys: std::collections::BTreeMap<String, serde::de::IgnoredAny> =
            serde_json::from_slice(raw).map_err(|e| ApiError::invalid(format!("invalid {field}: {e}")))?;
        if keys.contains_key("dataOrgs") || keys.contains_key("data_orgs") {
            return Err(ApiError::invalid(format!(
                "invalid {field}: this is an import request body, not an export document: put the value of its \
                 \"dataOrgs\" in the bucket, or send the body itself to /admin/v1/import"
            )));
        }
        if !keys.contains_key("orgs") {
            return Err(ApiError::invalid(format!("invalid {field}: not an export document: it has no \"orgs\"")));
        }
    }
    Ok(doc)
}

/// Parses an import request and checks every organization of its document as on an empty
/// instance, without the store (the fuzz targets' entry point): the problems found. A bucket
/// source is not downloaded.
pub fn check_offline(body: &[u8], now: i64) -> ApiResult<Vec<ImportItem>> {
    let req = parse_request(body)?;
    timeout("ImportDataRequest", req.timeout.as_deref())?;
    let doc = match (req.data_orgs, req.data_orgsv1) {
        (Some(doc), _) => doc,
        (_, Some(text)) => parse_document("data_orgsv1", text.as_bytes())?,
        _ => return Ok(Vec::new()),
    };
    let duplicates = duplicates(&doc);
    Ok(doc.orgs.iter().enumerate().flat_map(|(i, org)| import_org::check_offline(i, org, &duplicates, now)).collect())
}

/// Imports every organization of `doc` in order. An error of the store (internal or
/// unavailable) in one organization stops the import there; when organizations before it were
/// imported the answer is still the report, with that error and the organizations not
/// attempted under `errors`, since what was committed stays.
async fn run(state: &AppState, doc: Document, dry_run: bool, ledger: &Ledger) -> ApiResult<ImportResponse> {
    let mut report = ImportResponse { dry_run, ..ImportResponse::default() };
    let duplicates = duplicates(&doc);
    let mut index = {
        let mut c = state.db.conn().await?;
        Index::load(&mut c).await?
    };
    let mut target = Target::new(dry_run, ledger.clone());
    let mut orgs = doc.orgs.into_iter().enumerate();
    while let Some((i, org)) = orgs.next() {
        let org_id = org.org_id.trim().to_string();
        let outcome = match import_org::import(state, i, org, &mut index, &duplicates, &mut target).await {
            Ok(o) => o,
            Err(e) if ledger.any() => {
                let note = "the import stopped here: the organizations before it were imported, those after it were not attempted";
                report.errors.push(ImportItem::new(
                    "org",
                    &org_id,
                    format!("{} (organization {org_id} was not imported; {note})", e.message),
                ));
                for (_, rest) in orgs.by_ref() {
                    let id = rest.org_id.trim();
                    let message = format!("not attempted: the import stopped at organization {org_id}");
                    report.errors.push(ImportItem::new("org", id, message));
                }
                break;
            }
            Err(e) => return Err(e),
        };
        let Outcome { success, errors, skipped } = outcome;
        report.errors.extend(errors);
        report.skipped.extend(skipped);
        report.success.orgs.extend(success);
    }
    target.finish().await?;
    Ok(report)
}

/// User names and user ids that occur more than once in the document: every occurrence after
/// the first, as (organization index, user id) -> what it repeats.
pub type Duplicates = HashMap<(usize, String), String>;

fn duplicates(doc: &Document) -> Duplicates {
    let mut names: HashMap<String, String> = HashMap::new();
    let mut ids: HashMap<&str, ()> = HashMap::new();
    let mut out = Duplicates::new();
    for (i, org) in doc.orgs.iter().enumerate() {
        let humans = org.human_users.iter().map(|u| (u.user_id.as_str(), u.user.user_name.as_str()));
        let machines = org.machine_users.iter().map(|u| (u.user_id.as_str(), u.user.user_name.as_str()));
        for (id, name) in humans.chain(machines) {
            let key = fold(name.trim());
            if ids.insert(id, ()).is_some() && !id.is_empty() {
                out.insert((i, id.to_string()), format!("the user id '{id}' occurs more than once in the document"));
            } else if let Some(first) = names.get(&key).filter(|_| !key.is_empty()) {
                out.insert(
                    (i, id.to_string()),
                    format!(
                        "the user name '{}' occurs more than once in the document (also user {first})",
                        name.trim()
                    ),
                );
            } else {
                names.insert(key, id.to_string());
            }
        }
    }
    out
}

/// SPEC.md 4.11 for every imported human user, after the import answered: a verification code
/// when the address is not verified, an initial-password code when no password is set.
async fn send_messages(state: AppState, user_ids: Vec<String>) {
    let mut failed = 0usize;
    for id in &user_ids {
        let sent = match state.db.conn().await {
            Ok(mut c) => notify(&state, &mut c, id).await.is_ok(),
            Err(_) => false,
        };
        if !sent {
            failed += 1;
        }
    }
    // Through SMTP the messages go out in tasks of their own (Mailer::dispatch), which log what
    // they could not deliver: what is counted here is the codes stored.
    if failed > 0 {
        tracing::warn!(users = user_ids.len(), failed, "some codes of an import could not be stored");
    } else {
        tracing::info!(users = user_ids.len(), "codes of an import stored, their messages on their way");
    }
}
