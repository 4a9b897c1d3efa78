//! Instance feature flags (`/v2/features/instance`).

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::error::ApiResult;
use crate::api::types::ts;
use crate::api::{ApiJson, Caller};
use crate::app::AppState;
use crate::domain::roles::Permission;
use crate::domain::settings::Features;
use crate::store::setting::{self, INSTANCE};

fn flag(v: Option<bool>) -> Value {
    match v {
        Some(b) => json!({"enabled": b, "source": "SOURCE_INSTANCE"}),
        None => json!({"enabled": false, "source": "SOURCE_SYSTEM"}),
    }
}

pub async fn get(State(state): State<AppState>, _caller: Caller) -> ApiResult<Json<Value>> {
    let mut c = state.db.conn().await?;
    let l = setting::load::<Features>(&mut c, INSTANCE).await?;
    let changed = l.times.map(|t| ts(t.1));
    Ok(Json(json!({
        "details": {"changeDate": changed, "resourceOwner": ""},
        "oidcTokenExchange": flag(l.value.oidc_token_exchange),
        "enableBackChannelLogout": flag(l.value.enable_back_channel_logout),
    })))
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
pub struct SetRequest {
    oidc_token_exchange: Option<bool>,
    enable_back_channel_logout: Option<bool>,
}

pub async fn set(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<SetRequest>,
) -> ApiResult<Json<Value>> {
    caller.require(Permission::FeatureWrite)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    let mut f = setting::load::<Features>(&mut c, INSTANCE).await?.value;
    if req.oidc_token_exchange.is_some() {
        f.oidc_token_exchange = req.oidc_token_exchange;
    }
    if req.enable_back_channel_logout.is_some() {
        f.enable_back_channel_logout = req.enable_back_channel_logout;
    }
    setting::save(&mut c, INSTANCE, &f, now).await?;
    Ok(Json(json!({"details": {"changeDate": ts(now), "resourceOwner": ""}})))
}

pub async fn reset(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<Value>> {
    caller.require(Permission::FeatureWrite)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    setting::reset::<Features>(&mut c, INSTANCE).await?;
    Ok(Json(json!({"details": {"changeDate": ts(now), "resourceOwner": ""}})))
}
