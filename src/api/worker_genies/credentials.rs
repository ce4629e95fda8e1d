//! Credential actions of `worker-genies`: store (encrypted), list (never a secret), delete,
//! and test (a stored credential by name or a new value, optionally with a test request).

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::json;

use crate::api::{ActionRequest, Ctx, Reply};
use crate::db::{self, workers::Credential};
use crate::error::{ApiError, ApiResult};
use crate::service::worker_genies::{self as service, NewSecret};
use crate::workers::tools::{self, Opened};

const TYPES: &[&str] = &["bearer_token", "api_key", "basic_auth"];

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "CredentialStore")]
pub(crate) struct StoreInput {
    name: String,
    credential_type: String,
    value: String,
    #[serde(default)]
    url_prefix: Option<String>,
    #[serde(default)]
    header_name: Option<String>,
}

fn check(i: StoreInput, app: &crate::state::AppState) -> ApiResult<NewSecret> {
    let name = i.name.trim().to_string();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(ApiError::validation(
            "data.name is required and must be at most 100 characters",
        ));
    }
    if !TYPES.contains(&i.credential_type.as_str()) {
        return Err(ApiError::validation(
            "data.credential_type must be 'bearer_token', 'api_key' or 'basic_auth'",
        ));
    }
    if i.value.is_empty() || i.value.len() > 8192 {
        return Err(ApiError::validation(
            "data.value is required and must be at most 8192 bytes",
        ));
    }
    if i.value.chars().any(|c| c.is_control()) {
        return Err(ApiError::validation(
            "data.value must not contain control characters (it is sent in an HTTP header)",
        ));
    }
    if i.credential_type == "basic_auth" && !i.value.contains(':') {
        return Err(ApiError::validation(
            "data.value of a basic_auth credential must be 'username:password'",
        ));
    }
    let url_prefix = match i
        .url_prefix
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
    {
        None => None,
        Some(p) => Some(
            app.net
                .check(&p)
                .map_err(|e| ApiError::validation(format!("data.url_prefix: {e}")))?
                .as_str()
                .to_string(),
        ),
    };
    let header_name = i
        .header_name
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty());
    if let Some(h) = &header_name {
        if i.credential_type != "api_key" {
            return Err(ApiError::validation(
                "data.header_name applies to api_key credentials only",
            ));
        }
        if reqwest::header::HeaderName::from_bytes(h.as_bytes()).is_err() {
            return Err(ApiError::validation(
                "data.header_name is not a valid HTTP header name",
            ));
        }
    }
    Ok(NewSecret {
        name,
        credential_type: i.credential_type,
        value: i.value,
        url_prefix,
        header_name,
    })
}

pub(super) async fn store(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let secret = check(req.data()?, &ctx.app)?;
    let cred = service::store_credential(&ctx.app, ctx.user_id(), secret).await?;
    Ok(Reply::created(json!({"credential": cred}))
        .record(&cred.id)
        .summary(format!("stored credential '{}'", cred.name)))
}

pub(super) async fn list(ctx: &Ctx, _req: &ActionRequest) -> ApiResult<Reply> {
    let uid = ctx.user_id().to_string();
    let items = ctx
        .db()
        .read(move |c| Ok(db::workers::list_credentials(c, &uid)?))
        .await?;
    Ok(Reply::ok(json!({"items": items, "count": items.len()})))
}

pub(super) async fn delete(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let id = req.uuid()?;
    let name = service::delete_credential(&ctx.app, ctx.user_id(), &id).await?;
    Ok(Reply::deleted(&id).summary(format!("deleted credential '{name}'")))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "CredentialTest")]
pub(crate) struct TestInput {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    credential_type: Option<String>,
    #[serde(default)]
    value: Option<String>,
    #[serde(default)]
    url_prefix: Option<String>,
    #[serde(default)]
    header_name: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    method: Option<String>,
}

pub(super) async fn test(ctx: &Ctx, req: &ActionRequest) -> ApiResult<Reply> {
    let t: TestInput = req.data()?;
    let (opened, source) = match (&t.value, &t.name) {
        (Some(value), _) => {
            let c = check(
                StoreInput {
                    name: t.name.clone().unwrap_or_else(|| "unsaved".into()),
                    credential_type: t.credential_type.clone().ok_or_else(|| {
                        ApiError::validation("data.credential_type is required with data.value")
                    })?,
                    value: value.clone(),
                    url_prefix: t.url_prefix.clone(),
                    header_name: t.header_name.clone(),
                },
                &ctx.app,
            )?;
            let meta = Credential {
                id: String::new(),
                name: c.name,
                credential_type: c.credential_type,
                url_prefix: c.url_prefix,
                header_name: c.header_name,
                created_at: String::new(),
                updated_at: String::new(),
            };
            (
                Opened {
                    meta,
                    secret: c.value,
                },
                "new",
            )
        }
        (None, Some(name)) => (
            service::open_credential(&ctx.app, ctx.user_id(), name.trim()).await?,
            "stored",
        ),
        (None, None) => {
            return Err(ApiError::validation(
                "data.name (a stored credential) or data.value (a new one) is required",
            ));
        }
    };
    let shown = json!({
        "id": if opened.meta.id.is_empty() { serde_json::Value::Null } else { json!(opened.meta.id) },
        "name": opened.meta.name,
        "credential_type": opened.meta.credential_type,
        "url_prefix": opened.meta.url_prefix,
        "source": source,
    });
    let Some(url) = t.url.as_deref().map(str::trim).filter(|u| !u.is_empty()) else {
        return Ok(Reply::ok(json!({
            "status": "ok",
            "message": if source == "stored" { "the credential decrypts; no test request was made (give data.url to make one)" } else { "the credential is well-formed; no test request was made (give data.url to make one)" },
            "credential": shown,
            "request": null,
        }))
        .summary(format!("tested credential '{}'", opened.meta.name)));
    };
    let target = ctx
        .app
        .net
        .check(url)
        .map_err(|e| ApiError::validation(format!("data.url: {e}")))?;
    if !tools::matches(&opened.meta, target.as_str()) {
        return Err(ApiError::validation(format!(
            "data.url does not start with the credential's url_prefix ({}), so the credential would not be sent",
            opened.meta.url_prefix.as_deref().unwrap_or("")
        )));
    }
    let method = match t
        .method
        .as_deref()
        .unwrap_or("GET")
        .to_ascii_uppercase()
        .as_str()
    {
        "GET" => Method::GET,
        "HEAD" => Method::HEAD,
        "POST" => Method::POST,
        _ => {
            return Err(ApiError::validation(
                "data.method must be GET, HEAD or POST",
            ));
        }
    };
    let name = opened.meta.name.clone();
    let creds = [opened];
    let (status, message, request) = match tools::send(
        &ctx.app,
        method,
        target.as_str(),
        HeaderMap::new(),
        None,
        &creds,
    )
    .await
    {
        Ok((f, _)) => {
            let ok = (200..300).contains(&f.status);
            let excerpt: String = tools::redact(&f.text(), &creds).chars().take(500).collect();
            (
                if ok { "ok" } else { "failed" },
                if ok {
                    format!("the test request was answered {}", f.status)
                } else {
                    format!(
                        "the test request was answered {}: the credential may be wrong or lack access",
                        f.status
                    )
                },
                json!({"url": target.as_str(), "status_code": f.status, "ok": ok, "body_excerpt": excerpt}),
            )
        }
        Err(e) => (
            "failed",
            format!("the test request failed: {}", tools::redact(&e, &creds)),
            json!({"url": target.as_str(), "status_code": null, "ok": false}),
        ),
    };
    Ok(Reply::ok(
        json!({"status": status, "message": message, "credential": shown, "request": request}),
    )
    .summary(format!("tested credential '{name}'")))
}
