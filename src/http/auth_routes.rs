//! `/v1/auth/login`, `/v1/auth/refresh`, `/v1/auth/logout`: sessions for browser and app
//! clients; and the account routes a signed-out person needs: forgot and reset a password,
//! confirm an email change, accept an invitation, and `config` (what sign-in offers). These
//! need no auth header (logout needs the access token it ends).

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
use crate::service;
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
        // Per address too, whether or not it has an account, so the limit tells nothing.
        app.limits.check_account(&email)?;
        let found = app
            .db
            .read(move |c| Ok(db::users::credentials(c, &email)?))
            .await?;
        let password = req.password;
        let (user, hash, disabled) = match found {
            Some((u, Some(h), disabled)) => (Some(u), h, disabled),
            _ => (None, passwords::decoy_hash().to_string(), false),
        };
        let valid = db::run_blocking(move || Ok(passwords::verify(&password, &hash))).await?;
        let user = user
            .filter(|_| valid)
            .ok_or_else(ApiError::invalid_credentials)?;
        // Said only to whoever knows the password.
        if disabled {
            return Err(ApiError::forbidden("this account is disabled"));
        }
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

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForgotPassword {
    email: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResetPassword {
    token: String,
    new_password: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfirmEmail {
    token: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AcceptInvitation {
    token: String,
    password: String,
    full_name: Option<String>,
}

fn required(v: &str, name: &str) -> ApiResult<()> {
    if v.trim().is_empty() {
        return Err(ApiError::validation(format!("{name} is required")));
    }
    Ok(())
}

/// Always the same answer, whether or not the address has an account.
pub async fn forgot_password(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    async {
        app.limits.check_login(addr.ip())?;
        let req: ForgotPassword = body(&app, raw)?;
        let email = req.email.trim().to_string();
        if !service::accounts::valid_email(&email) {
            return Err(ApiError::validation("email must be an email address"));
        }
        service::accounts::forgot_password(&app, &email, Some(addr.ip().to_string())).await?;
        Ok::<_, ApiError>(ok(json!({
            "message": "if an account has this address, a reset link is on its way to it"
        })))
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

pub async fn reset_password(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    async {
        app.limits.check_login(addr.ip())?;
        let req: ResetPassword = body(&app, raw)?;
        required(&req.token, "token")?;
        service::accounts::reset_password(
            &app,
            &req.token,
            req.new_password,
            Some(addr.ip().to_string()),
        )
        .await?;
        Ok::<_, ApiError>(ok(json!({"reset": true})))
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

pub async fn confirm_email(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    async {
        app.limits.check_login(addr.ip())?;
        let req: ConfirmEmail = body(&app, raw)?;
        required(&req.token, "token")?;
        let user =
            service::accounts::confirm_email(&app, &req.token, Some(addr.ip().to_string())).await?;
        Ok::<_, ApiError>(ok(json!({"profile": user})))
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

/// Creates the invited account and signs it in: the answer carries the same tokens as login.
pub async fn accept_invitation(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    async {
        app.limits.check_login(addr.ip())?;
        let req: AcceptInvitation = body(&app, raw)?;
        required(&req.token, "token")?;
        if let Some(n) = &req.full_name
            && n.chars().count() > 200
        {
            return Err(ApiError::validation(
                "full_name must be at most 200 characters",
            ));
        }
        let done = service::accounts::accept_invitation(
            &app,
            &req.token,
            req.password,
            req.full_name,
            Some(addr.ip().to_string()),
        )
        .await?;
        let c = &app.config;
        let pair = sessions::open(
            &app.db,
            &app.secrets.jwt_key,
            &done.user.id,
            done.user.role,
            c.session_ttl_seconds,
            c.refresh_ttl_seconds,
        )
        .await?;
        let mut data = json!(pair);
        data["profile"] = json!(done.user);
        data["team_id"] = json!(done.team_id);
        Ok::<_, ApiError>(
            (
                axum::http::StatusCode::CREATED,
                axum::Json(json!({"success": true, "data": data})),
            )
                .into_response(),
        )
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

/// What the sign-in page offers; public, so a signed-out console can ask.
pub async fn config(State(app): State<AppState>) -> Response {
    let c = &app.config;
    let oidc = c.oidc_issuer.is_some();
    ok(json!({
        "password_min_length": c.password_min_length,
        "oidc": {
            "enabled": oidc,
            "authorize_url": oidc.then_some("/v1/auth/oidc/authorize"),
        },
    }))
}

#[derive(Deserialize)]
pub struct AuthorizeQuery {
    console: Option<String>,
}

#[derive(Deserialize)]
pub struct CallbackQuery {
    code: Option<String>,
    state: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct OidcExchange {
    code: String,
}

fn oidc(app: &AppState) -> ApiResult<&crate::auth::oidc::Oidc> {
    app.oidc
        .as_ref()
        .ok_or_else(|| ApiError::not_found("OpenID Connect sign-in (not configured)"))
}

fn see_other(to: &str) -> Response {
    (
        axum::http::StatusCode::SEE_OTHER,
        [(axum::http::header::LOCATION, to.to_string())],
    )
        .into_response()
}

/// Starts an OpenID sign-in: a redirect to the provider. `?console=1` makes the callback
/// end in the console instead of answering JSON.
pub async fn oidc_authorize(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    q: Result<axum::extract::Query<AuthorizeQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    async {
        app.limits.check_login(addr.ip())?;
        let oidc = oidc(&app)?;
        let q = q.map_err(|e| ApiError::validation(e.body_text()))?;
        let console = q
            .console
            .as_deref()
            .is_some_and(|v| !v.is_empty() && v != "0");
        let url = oidc.begin(console).await?;
        Ok::<_, ApiError>(see_other(&url))
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}

/// Where the provider sends the browser back. Answers genied's token pair as JSON, or, for
/// a sign-in the console started, redirects to `/console#oidc=<one-time code>`.
pub async fn oidc_callback(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    q: Result<axum::extract::Query<CallbackQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    async {
        app.limits.check_login(addr.ip())?;
        let oidc = oidc(&app)?;
        let q = q.map_err(|e| ApiError::validation(e.body_text()))?.0;
        if let Some(e) = q.error {
            // The provider's own words, bounded: it is shown to the person signing in.
            let d: String = q
                .error_description
                .unwrap_or_default()
                .chars()
                .take(200)
                .collect();
            return Err(ApiError::new(
                crate::error::Kind::InvalidCredentials,
                format!("the identity provider did not sign you in: {e} {d}")
                    .trim()
                    .to_string(),
            ));
        }
        let (Some(code), Some(state)) = (q.code, q.state) else {
            return Err(ApiError::validation("code and state are required"));
        };
        let id = oidc.finish(&code, &state).await?;
        let console = id.console;
        let user = service::accounts::oidc_user(
            &app,
            service::accounts::OidcLogin {
                issuer: id.issuer,
                subject: id.subject,
                email: id.email,
                email_verified: id.email_verified,
                name: id.name,
                mapped_role: id.mapped_role,
            },
            Some(addr.ip().to_string()),
        )
        .await?;
        if console {
            let code = oidc.handoff(&user.id, user.role);
            return Ok(see_other(&format!("/console#oidc={code}")));
        }
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

/// The console trades its one-time code (from the callback's redirect) for tokens.
pub async fn oidc_exchange(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<SocketAddr>,
    raw: Result<Bytes, BytesRejection>,
) -> Response {
    async {
        app.limits.check_login(addr.ip())?;
        let oidc = oidc(&app)?;
        let req: OidcExchange = body(&app, raw)?;
        let (uid, role) = oidc.take_handoff(req.code.trim()).ok_or_else(|| {
            ApiError::validation("code: unknown, expired or already used; sign in again")
        })?;
        let c = &app.config;
        let pair = sessions::open(
            &app.db,
            &app.secrets.jwt_key,
            &uid,
            role,
            c.session_ttl_seconds,
            c.refresh_ttl_seconds,
        )
        .await?;
        Ok::<_, ApiError>(ok(json!(pair)))
    }
    .await
    .unwrap_or_else(IntoResponse::into_response)
}
