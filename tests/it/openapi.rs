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
    for (method, path) in routed() {
        let concrete: String =
            path.split('/').map(|s| if s.starts_with('{') { "x1" } else { s }).collect::<Vec<_>>().join("/");
        let r = srv.call_as(None, None, &method, &concrete, json!({})).await;
        assert_eq!(r.status, 401, "{method} {concrete}: {}", r.text);
        assert_eq!(r.body["code"], Value::from(16), "{method} {concrete}");
    }
    srv.stop().await;
}
