//! The OpenAPI document (`GET /openapi.json`) against the route tables the router is built from:
//! every operation served under /management/v1, /admin/v1 and /v2 is described with its method,
//! and the document describes nothing the router lacks.

use std::collections::BTreeSet;

use latch::api::openapi::{areas, document, operations};
use serde_json::{Value, json};

use crate::harness::{Backend, TestServer};

fn routed() -> BTreeSet<(String, String)> {
    areas().iter().flat_map(|t| t.operations()).map(|(m, p)| (m.to_string(), p)).collect()
}

#[test]
fn document_describes_exactly_the_routed_operations() {
    let doc = document();
    let documented: BTreeSet<(String, String)> =
        operations(&doc).into_iter().map(|(m, p)| (m.to_string(), p)).collect();
    let routed = routed();
    assert!(routed.len() > 80, "the route tables list {} operations", routed.len());
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(
        undocumented.is_empty(),
        "routed but not in the document (add #[utoipa::path] to the handler and list it in the area's Doc): {undocumented:?}"
    );
    assert!(unrouted.is_empty(), "in the document but not routed: {unrouted:?}");
}

#[test]
fn every_operation_is_complete() {
    let doc = serde_json::to_value(document()).unwrap();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    let mut ids = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let what = format!("{method} {path}");
            assert!(ids.insert(op["operationId"].as_str().unwrap().to_string()), "{what}: operationId repeats");
            // Each `{name}` of the path is a declared path parameter.
            let declared: BTreeSet<&str> = op["parameters"]
                .as_array()
                .map(|ps| ps.iter().filter(|p| p["in"] == "path").filter_map(|p| p["name"].as_str()).collect())
                .unwrap_or_default();
            let template: BTreeSet<&str> =
                path.split('/').filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}'))).collect();
            assert_eq!(declared, template, "{what}: path parameters");
            for (status, response) in op["responses"].as_object().unwrap() {
                let described =
                    response.get("$ref").is_some() || response["description"].as_str().is_some_and(|d| !d.is_empty());
                assert!(described, "{what}: response {status} has no description (OpenAPI requires one)");
            }
            let ok = &op["responses"]["200"]["content"]["application/json"]["schema"];
            assert!(ok.is_object(), "{what}: no 200 response schema");
            for status in ["400", "401", "403", "404", "409", "503"] {
                assert!(op["responses"][status].is_object(), "{what}: no {status} response");
            }
        }
    }
    // Every reference resolves.
    let text = doc.to_string();
    for r in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &r[..r.find('"').unwrap()];
        assert!(schemas.contains_key(name), "dangling reference to schema {name}");
    }
}

/// The router really serves what the tables list: without a token each documented operation
/// answers 401 from its handler's authentication (an unrouted one would answer 404 or 405), and
/// `/openapi.json` is the document.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn served_document_and_routes() {
    let srv = TestServer::start(Backend::Sqlite).await;
    let r = srv.call_as(None, None, "GET", "/openapi.json", json!(null)).await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.body, serde_json::to_value(document()).unwrap());
    assert!(r.body["openapi"].as_str().unwrap().starts_with("3."));
    let doc = r.body;
    let mut open = Vec::new();
    for (method, path) in routed() {
        let concrete: String =
            path.split('/').map(|s| if s.starts_with('{') { "x1" } else { s }).collect::<Vec<_>>().join("/");
        let described = &doc["paths"][path.as_str()][method.as_str().to_ascii_lowercase()];
        let r = srv.call_as(None, None, &method, &concrete, json!({})).await;
        if described["security"] == json!([{}]) {
            // Described as open (GetOIDCInformation, the API's health check): served without one.
            assert_eq!(r.status, 200, "{method} {concrete}: {}", r.text);
            open.push(path);
            continue;
        }
        assert_eq!(r.status, 401, "{method} {concrete}: {}", r.text);
        assert_eq!(r.body["code"], Value::from(16), "{method} {concrete}");
    }
    open.sort();
    assert_eq!(open, ["/management/v1/healthz", "/management/v1/zitadel/docs"], "the operations open without a token");
    srv.stop().await;
}

/// Schemas are keyed by type name, and two types of one name would silently share one entry of
/// the document: every `ToSchema` type needs a name of its own (`#[schema(as = ...)]` renames).
#[test]
fn schema_names_are_unique() {
    fn visit(dir: &std::path::Path, found: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                visit(&path, found);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                let mut lines = text.lines().map(str::trim);
                while let Some(line) = lines.next() {
                    if !(line.starts_with("#[derive(") && line.contains("ToSchema")) {
                        continue;
                    }
                    let mut renamed = None;
                    for next in lines.by_ref() {
                        if let Some(rest) = next.strip_prefix("#[schema(as = ") {
                            renamed = Some(rest.trim_end_matches(")]").to_string());
                        }
                        let item = next.trim_start_matches("pub ").trim_start_matches("pub(crate) ");
                        if let Some(rest) = item.strip_prefix("struct ").or_else(|| item.strip_prefix("enum ")) {
                            let name: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
                            found.push((renamed.unwrap_or(name), path.display().to_string()));
                            break;
                        }
                    }
                }
            }
        }
    }
    let mut found = Vec::new();
    visit(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut found);
    assert!(found.len() > 100, "found only {} schema types", found.len());
    found.sort();
    let repeated: Vec<_> = found.windows(2).filter(|w| w[0].0 == w[1].0).map(|w| (&w[0], &w[1])).collect();
    assert!(repeated.is_empty(), "schema names used twice: {repeated:?}");
}

// U+0000 cannot be stored (PostgreSQL refuses it), so it is refused as invalid input in a path
// parameter and in a body, on both stores, instead of failing in the store (found by
// schemathesis on PostgreSQL).
crate::on_both!(nul_characters_are_invalid_input, |srv| {
    for path in ["/management/v1/users/%00", "/management/v1/projects/a%00b", "/admin/v1/orgs/%00"] {
        let m = srv.call("GET", path, json!(null)).await.err(400, 3).to_string();
        assert!(m.contains("NUL"), "{path}: {m}");
    }
    let m = srv.call("DELETE", "/management/v1/orgs/me/domains/%00", json!(null)).await.err(400, 3).to_string();
    assert!(m.contains("NUL"), "{m}");
    // Escapes that are no UTF-8: the API's error format too (axum's own answer is plain text).
    for (method, path) in [
        ("GET", "/management/v1/users/%FF"),
        ("DELETE", "/v2/web_keys/%C3%28"),
        ("POST", "/management/v1/projects/p%E2%82/roles/_search"),
    ] {
        let m = srv.call(method, path, json!({})).await.err(400, 3).to_string();
        assert!(m.contains("UTF-8"), "{path}: {m}");
    }
    // ... while escaped UTF-8 is a plain path parameter (an unknown user here).
    srv.call("GET", "/management/v1/users/%C3%A9", json!(null)).await.err(404, 5);
    let r = srv.call("POST", "/management/v1/projects", json!({"name": "a\u{0}b"})).await;
    assert!(r.err(400, 3).contains("name"), "{}", r.text);
    let project = srv.call("POST", "/management/v1/projects", json!({"name": "p"})).await;
    let id = project.ok()["id"].as_str().unwrap().to_string();
    let r = srv
        .call("POST", &format!("/management/v1/projects/{id}/roles"), json!({"roleKey": "k", "displayName": "\u{0}"}))
        .await;
    assert!(r.err(400, 3).contains("displayName"), "{}", r.text);
    let doc = json!({"orgs": [{"orgId": "o1", "org": {"name": "x\u{0}"}}]}).to_string();
    let r = srv.call("POST", "/admin/v1/import", json!({"dataOrgsv1": doc})).await;
    assert!(r.err(400, 3).contains("NUL"), "{}", r.text);
});
