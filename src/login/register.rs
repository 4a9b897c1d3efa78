//! Self-registration on the login pages (`prompt=create` or the link on the login page, when
//! the login policy allows it): the form, and the new user with an unverified address.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;

use super::flow::{Flow, Start, fail, show, store_fail};
use super::forms::{RegisterForm, begin, check_new_password, hash_fail, reset};
use crate::app::AppState;
use crate::management::users::{EmailInput, HumanInput, ProfileInput, insert_human};
use crate::store::{instance, user};

pub async fn page(State(state): State<AppState>, Path(id): Path<String>, headers: HeaderMap) -> Response {
    let t0 = super::i18n::choose(&[], &headers);
    let mut c = match state.db.conn().await {
        Ok(c) => c,
        Err(e) => return store_fail(t0, &headers, e),
    };
    let mut f = match Flow::load(&state, &mut c, &id, &headers).await {
        Ok(f) => f,
        Err(r) => return r,
    };
    reset(&mut f);
    f.progress.start = Start::Create;
    if let Err(e) = f.save(&mut c).await {
        return store_fail(f.t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}

pub async fn register(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (mut c, mut f, form) = match begin::<RegisterForm>(&state, &id, &headers, &body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let t = f.t;
    let policy = match super::flow::registration_policy(&state, &mut c).await {
        Ok(p) => p,
        Err(e) => return store_fail(t, &headers, e),
    };
    if !policy.allow_register {
        return show(&state, &mut c, f, &headers, Some(t.err_register_disabled.to_string()), None).await;
    }
    let org_id = match instance::default_org(&mut c).await {
        Ok(Some(o)) => o,
        Ok(None) => {
            tracing::error!("registration: the instance has no default organization (not set up)");
            return fail(t, &headers, StatusCode::SERVICE_UNAVAILABLE, t.err_internal);
        }
        Err(e) => return store_fail(t, &headers, e),
    };
    let again = |msg: String| {
        let (id, csrf) = (f.row.auth_request_id.clone(), f.row.csrf_token.clone());
        let origin = f.redirect_origin();
        super::pages::render(
            t,
            StatusCode::BAD_REQUEST,
            &super::pages::Register {
                t,
                id: &id,
                csrf: &csrf,
                error: Some(msg),
                info: None,
                email: &form.email,
                first_name: &form.first_name,
                last_name: &form.last_name,
                user_name: &form.user_name,
            },
            origin.as_deref(),
        )
    };
    let user_name = if form.user_name.trim().is_empty() {
        form.email.trim().to_string()
    } else {
        form.user_name.trim().to_string()
    };
    let input = HumanInput {
        user_name: user_name.clone(),
        profile: Some(ProfileInput {
            first_name: form.first_name.clone(),
            last_name: form.last_name.clone(),
            ..ProfileInput::default()
        }),
        email: Some(EmailInput { email: form.email.clone(), is_email_verified: false }),
        ..HumanInput::default()
    };
    let (username, mut human) = match input.validate("RegisterRequest") {
        Ok(v) => v,
        Err(e) if e.message.contains("email") => return again(t.err_email_invalid.to_string()),
        Err(e) if e.message.contains("control characters") => return again(t.err_name_controls.to_string()),
        Err(_) => return again(t.err_required.to_string()),
    };
    match check_new_password(&mut c, t, &org_id, &form.password, &form.password_repeat).await {
        Ok(Ok(())) => {}
        Ok(Err(msg)) => return again(msg),
        Err(e) => return store_fail(t, &headers, e),
    }
    human.password_hash = match state.hasher.hash(&form.password).await {
        Ok(h) => Some(h),
        Err(e) => return hash_fail(t, &headers, e),
    };
    let now = state.clock.now();
    human.password_changed_at = Some(now);
    let user_id = match insert_human(&mut c, &org_id, None, &username, human, now).await {
        Ok(id) => id,
        // Taken, or a login name of another organization (see `check_username_domain`).
        Err(e) if matches!(e.code, crate::api::Code::AlreadyExists | crate::api::Code::InvalidArgument) => {
            return again(t.err_user_taken.to_string());
        }
        // The store gone or busy: "try again", as every other login page says it.
        Err(e) if e.code == crate::api::Code::Unavailable => {
            return fail(t, &headers, StatusCode::SERVICE_UNAVAILABLE, t.err_unavailable);
        }
        Err(e) => {
            tracing::error!(error = %e.message, "registration failed");
            return fail(t, &headers, StatusCode::INTERNAL_SERVER_ERROR, t.err_internal);
        }
    };
    reset(&mut f);
    f.user = match user::get(&mut c, &user_id).await {
        Ok(u) => u,
        Err(e) => return store_fail(t, &headers, e),
    };
    let force_mfa = match super::flow::policy_for(&state, &mut c, f.user.as_ref()).await {
        Ok(p) => p.requires_mfa(),
        Err(e) => return store_fail(t, &headers, e),
    };
    if let Err(e) = f.password_verified(&mut c, now, force_mfa).await {
        return store_fail(t, &headers, e);
    }
    show(&state, &mut c, f, &headers, None, None).await
}
