//! `/v1/auth/login`, `/v1/auth/refresh`, `/v1/auth/logout`: sessions for browser and app
//! clients. These need no auth header (logout needs the access token it ends).

use std::net::SocketAddr;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::json;

use super::envelope::{body_object, body_rejection};
use crate::api::parse_value;
use crate::auth::{self, Credential, Via, passwords, sessions};
use crate::db;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

#[derive(Deserialize, schemars::JsonSchema)]
pub(crate) struct Login {
    email: String,
    password: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
pub(crate) struct Refresh {
    refresh_token: String,
}

fn ok(data: serde_json::Value) -> Response {
    axum::Json(json!({"success": true, "data": data})).into_response()
}

fn body<T: serde::de::DeserializeOwned>(
    app: &AppState,
    body: Result<Bytes, BytesRejection>,
) -> ApiResult<T> {
    let bytes = body.map_err(|e| body_rejection(app, e))?;
    parse_value(
        &serde_json::Value::Object(body_object(&bytes, false)?),
        "body",
    )
}

pub async fn login(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    async {
        app.limits.check_login(addr.ip())?;
        let req: Login = body(&app, raw)?;
        let email = req.email.trim().to_string();
        let found = app
            .db
            .read(move |c| Ok(db::users::credentials(c, &email)?))
            .await?;
        let password = req.password;
        let (user, hash) = match found {
            Some((u, Some(h))) => (Some(u), h),
            _ => (None, passwords::decoy_hash().to_string()),
        };
        let valid = db::run_blocking(move || Ok(passwords::verify(&password, &hash))).await?;
        let user = user
            .filter(|_| valid)
            .ok_or_else(ApiError::invalid_credentials)?;
        let c = &app.config;
        let pair = sessions::open(
            &app.db,
            &app.secrets.jwt_key,
            &user.id,
            user.role,
            c.session_ttl_seconds,
            c.refresh_ttl_seconds,
        )
        .await?;
        Ok::<_, ApiError>(ok(json!(pair)))
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

pub async fn refresh(State(app): State<AppState>, raw: Result<Bytes, BytesRejection>) -> Response {
    async {
        let req: Refresh = body(&app, raw)?;
        let c = &app.config;
        let pair = sessions::refresh(
            &app.db,
            &app.secrets.jwt_key,
            &req.refresh_token,
            c.session_ttl_seconds,
            c.refresh_ttl_seconds,
        )
        .await?;
        Ok::<_, ApiError>(ok(json!(pair)))
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

pub async fn logout(State(app): State<AppState>, headers: HeaderMap) -> Response {
    async {
        let cred = Credential::from_headers(&headers)?;
        if matches!(cred, Credential::ApiKey(_)) {
            return Err(ApiError::invalid_token(
                "logout needs the session's access token, not an API key",
            ));
        }
        let principal =
            auth::authenticate(&app.db, &app.auth_cache, &app.secrets, cred, true).await?;
        let Via::Session { session_id } = principal.via else {
            unreachable!("session_only admits tokens only")
        };
        app.db
            .write(move |c| Ok(db::sessions::revoke(c, &session_id)?))
            .await?;
        Ok::<_, ApiError>(ok(json!({"revoked": true})))
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}
