//! Instance feature flags (`/v2/features/instance`).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::api::error::ApiResult;
use crate::api::types::ts;
use crate::api::{ApiJson, Caller};
use crate::app::AppState;
use crate::domain::roles::Permission;
use crate::domain::settings::Features;
use crate::store::setting::{self, INSTANCE};

/// A feature flag and where its value comes from.
#[derive(Serialize, ToSchema)]
pub struct Flag {
    enabled: bool,
    #[schema(value_type = String, example = "SOURCE_INSTANCE")]
    source: &'static str,
}

fn flag(v: Option<bool>) -> Flag {
    match v {
        Some(b) => Flag { enabled: b, source: "SOURCE_INSTANCE" },
        None => Flag { enabled: false, source: "SOURCE_SYSTEM" },
    }
}

/// `details` of the feature calls: the change date is null while no flag was ever set.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FeatureDetails {
    change_date: Option<String>,
    resource_owner: String,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct InstanceFeaturesResponse {
    details: FeatureDetails,
    oidc_token_exchange: Flag,
    enable_back_channel_logout: Flag,
}

#[derive(Serialize, ToSchema)]
pub struct SetFeaturesResponse {
    details: FeatureDetails,
}

fn changed(now: i64) -> Json<SetFeaturesResponse> {
    Json(SetFeaturesResponse { details: FeatureDetails { change_date: Some(ts(now)), resource_owner: String::new() } })
}

/// The instance's feature flags.
#[utoipa::path(get, path = "/features/instance", responses((status = 200, body = InstanceFeaturesResponse)))]
pub async fn get(State(state): State<AppState>, _caller: Caller) -> ApiResult<Json<InstanceFeaturesResponse>> {
    let mut c = state.db.conn().await?;
    let l = setting::load::<Features>(&mut c, INSTANCE).await?;
    Ok(Json(InstanceFeaturesResponse {
        details: FeatureDetails { change_date: l.times.map(|t| ts(t.1)), resource_owner: String::new() },
        oidc_token_exchange: flag(l.value.oidc_token_exchange),
        enable_back_channel_logout: flag(l.value.enable_back_channel_logout),
    }))
}

#[derive(Deserialize, Default, serde::Serialize, ToSchema)]
#[serde(default, rename_all = "camelCase")]
pub struct SetRequest {
    oidc_token_exchange: Option<bool>,
    enable_back_channel_logout: Option<bool>,
}

/// Sets the flags given; flags left out keep their value.
#[utoipa::path(put, path = "/features/instance", request_body = SetRequest, responses((status = 200, body = SetFeaturesResponse)))]
pub async fn set(
    State(state): State<AppState>,
    caller: Caller,
    ApiJson(req): ApiJson<SetRequest>,
) -> ApiResult<Json<SetFeaturesResponse>> {
    caller.require(Permission::FeatureWrite)?;
    let now = state.clock.now();
    // Flags left out keep their value, also when another request sets them at the same time.
    let mut tx = state.db.begin().await?;
    let mut f = setting::load_locked::<Features>(&mut tx, INSTANCE, now).await?.value;
    if req.oidc_token_exchange.is_some() {
        f.oidc_token_exchange = req.oidc_token_exchange;
    }
    if req.enable_back_channel_logout.is_some() {
        f.enable_back_channel_logout = req.enable_back_channel_logout;
    }
    setting::save(&mut tx, INSTANCE, &f, now).await?;
    tx.commit().await?;
    Ok(changed(now))
}

/// Returns every flag to the system default.
#[utoipa::path(delete, path = "/features/instance", responses((status = 200, body = SetFeaturesResponse)))]
pub async fn reset(State(state): State<AppState>, caller: Caller) -> ApiResult<Json<SetFeaturesResponse>> {
    caller.require(Permission::FeatureWrite)?;
    let now = state.clock.now();
    let mut c = state.db.conn().await?;
    setting::reset::<Features>(&mut c, INSTANCE).await?;
    Ok(changed(now))
}
