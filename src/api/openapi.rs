//! The OpenAPI 3.1 description of the JSON APIs, served at `GET /openapi.json`. It is generated
//! from the handlers' `#[utoipa::path]` annotations and the `ToSchema` of their request and
//! response types; the test `openapi` checks that it lists exactly the operations of the route
//! tables ([`areas`]).

use axum::Json;
use axum::http::Method;
use utoipa::OpenApi as _;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Ref, RefOr, Response, ResponseBuilder,
};

use super::routes::Table;
use crate::{admin, management, v2};

/// The route tables of the JSON APIs, which the router serves.
pub fn areas() -> Vec<Table> {
    vec![management::api(), admin::api(), v2::api()]
}

/// The error body every API answers failures with.
#[derive(serde::Serialize, utoipa::ToSchema)]
#[schema(example = json!({"code": 5, "message": "user not found (USER-NotFound)", "details": [{
    "@type": "type.googleapis.com/latch.v1.ErrorDetail", "id": "USER-NotFound", "message": "user not found"}]}))]
pub struct Error {
    /// The gRPC status code (3 invalid argument, 5 not found, 16 unauthenticated, ...).
    pub code: i32,
    pub message: String,
    /// Present when the error case has a stable identifier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Vec<ErrorDetail>>,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    #[serde(rename = "@type")]
    pub type_url: String,
    /// The stable identifier of the error case, such as `USER-NotFound`.
    pub id: String,
    pub message: String,
}

/// The failures any operation may answer, each with the [`Error`] body.
const ERRORS: &[(&str, &str)] = &[
    ("400", "invalid argument or failed precondition"),
    ("401", "no valid access token"),
    ("403", "the caller lacks the permission"),
    ("404", "the object does not exist"),
    ("409", "the object already exists"),
    ("503", "the store is unavailable"),
];

/// The whole document.
pub fn document() -> OpenApi {
    let info = InfoBuilder::new()
        .title("latch API")
        .version(env!("CARGO_PKG_VERSION"))
        .description(Some(
            "The management (/management/v1), admin (/admin/v1) and v2 APIs of latch, in the v1 REST \
             shapes of ZITADEL. Requests may use camelCase or snake_case field names; responses use \
             camelCase and omit zero values.",
        ))
        .build();
    let error_ref = || RefOr::Ref(Ref::from_schema_name("Error"));
    let mut components = ComponentsBuilder::new()
        .schema("Error", <Error as utoipa::PartialSchema>::schema())
        .schema("ErrorDetail", <ErrorDetail as utoipa::PartialSchema>::schema())
        .security_scheme("bearer", SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)));
    for (status, description) in ERRORS {
        let response: Response = ResponseBuilder::new()
            .description(*description)
            .content("application/json", ContentBuilder::new().schema(Some(error_ref())).build())
            .build();
        components = components.response(format!("Error{status}"), response);
    }
    let mut doc = OpenApiBuilder::new()
        .info(info)
        .components(Some(components.build()))
        .security(Some(vec![SecurityRequirement::new("bearer", Vec::<String>::new())]))
        .build()
        .nest(management::api().prefix, management::Doc::openapi())
        .nest(admin::api().prefix, admin::Doc::openapi())
        .nest(v2::api().prefix, v2::Doc::openapi());
    for (path, item) in doc.paths.paths.iter_mut() {
        for (method, op) in operations_mut(item) {
            finish(op, method, path);
        }
    }
    doc
}

fn operations_mut(item: &mut utoipa::openapi::PathItem) -> Vec<(Method, &mut Operation)> {
    [
        (Method::GET, item.get.as_mut()),
        (Method::PUT, item.put.as_mut()),
        (Method::POST, item.post.as_mut()),
        (Method::DELETE, item.delete.as_mut()),
        (Method::PATCH, item.patch.as_mut()),
    ]
    .into_iter()
    .filter_map(|(m, op)| op.map(|op| (m, op)))
    .collect()
}

/// `(method, path)` of every operation the document describes.
pub fn operations(doc: &OpenApi) -> Vec<(Method, String)> {
    let mut out = Vec::new();
    for (path, item) in &doc.paths.paths {
        let mut item = item.clone();
        for (method, _) in operations_mut(&mut item) {
            out.push((method, path.clone()));
        }
        for other in [&item.head, &item.options, &item.trace] {
            if other.is_some() {
                out.push((Method::OPTIONS, path.clone()));
            }
        }
    }
    out
}

/// A unique operation id (handler names repeat across modules), an optional request body, a
/// description on every answer and the shared error answers.
fn finish(op: &mut Operation, method: Method, path: &str) {
    let id: String = format!("{} {path}", method.as_str().to_ascii_lowercase())
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    op.operation_id = Some(id.split('_').filter(|s| !s.is_empty()).collect::<Vec<_>>().join("_"));
    // An empty body counts as `{}` (api::json), so no operation requires one.
    if let Some(RefOr::T(body)) = op.request_body.as_mut() {
        body.required = Some(utoipa::openapi::Required::False);
    }
    for response in op.responses.responses.values_mut() {
        if let RefOr::T(r) = response
            && r.description.is_empty()
        {
            r.description = "the result".to_string();
        }
    }
    for (status, _) in ERRORS {
        op.responses
            .responses
            .entry(status.to_string())
            .or_insert_with(|| RefOr::Ref(Ref::from_response_name(format!("Error{status}"))));
    }
}

/// `GET /openapi.json`.
pub async fn serve() -> Json<OpenApi> {
    Json(document())
}
