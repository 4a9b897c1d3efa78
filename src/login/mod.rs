//! The server-rendered login pages under `/ui/login/{request}`: login name, password, account
//! choice, registration, password change, e-mail verification, initial password.

pub mod account;
pub mod codes;
pub mod cookie;
pub mod email;
pub mod flow;
pub mod forms;
pub mod i18n;
pub mod pages;
pub mod register;
pub mod second_factor;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};

use crate::app::AppState;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui/static/latch.css", get(pages::stylesheet))
        .route("/ui/login/{id}", get(forms::page))
        .route("/ui/login/{id}/loginname", post(forms::login_name))
        .route("/ui/login/{id}/password", post(forms::password))
        .route("/ui/login/{id}/select", post(forms::select))
        .route("/ui/login/{id}/other", post(forms::other))
        .route("/ui/login/{id}/register", get(register::page).post(register::register))
        .route("/ui/login/{id}/change_password", post(forms::change_password))
        .route("/ui/login/{id}/verify_email", post(forms::verify_email))
        .route("/ui/login/{id}/verify_email/skip", post(forms::skip_verification))
        .route("/ui/login/{id}/init_password", post(forms::init_password))
        .route("/ui/login/{id}/init_password/request", post(forms::request_init))
        .route("/ui/login/{id}/totp", post(second_factor::totp))
        .route("/ui/login/{id}/totp/setup", post(second_factor::totp_setup))
        .route("/ui/login/{id}/{purpose}/resend", post(forms::resend))
        .route("/ui/signed_out", get(signed_out))
        .route("/ui/account/totp", get(account::enrol_page).post(account::enrol))
}

async fn signed_out(State(_state): State<AppState>, headers: HeaderMap) -> Response {
    let t = i18n::choose(&[], &headers);
    pages::render(t, StatusCode::OK, &pages::SignedOut { t }, None)
}
