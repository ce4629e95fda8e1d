//! What the public sees without signing in: the genie page at `/g/{slug}` (HTML), its text
//! chat endpoint `POST /g/{slug}/chat`, and the embedded page assets. Also the QR images at
//! `GET /v1/qr-code/{id}/image.svg|png`, which need the same credentials as the envelope.
//!
//! Pages are HTML, so their errors are HTML too: responses carry the [`KeepBody`] marker
//! and `fix_envelope` leaves them alone.

use std::io::Cursor;

use axum::body::Bytes;
use axum::extract::{ConnectInfo, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{self, Credential};
use crate::db;
use crate::error::{ApiError, ApiResult};
use crate::service::page_chat::{self, PageGenie};
use crate::state::AppState;

const PAGE: &str = include_str!("../../assets/page/page.html");
const CHAT: &str = include_str!("../../assets/page/chat.html");
const WIDGET: &str = include_str!("../../assets/page/widget.html");
const NOT_FOUND: &str = include_str!("../../assets/page/not_found.html");
const CSS: &str = include_str!("../../assets/page/page.css");
const JS: &str = include_str!("../../assets/page/page.js");
const EMBED: &str = include_str!("../../assets/page/embed.js");

/// Marks a response whose body must reach the client as it is (HTML pages and their 404).
#[derive(Clone, Copy, Debug)]
pub struct KeepBody;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/g/{slug}", get(page))
        .route("/g/{slug}/chat", post(chat).options(preflight))
        .route("/g/{slug}/chat/end", post(end_chat).options(preflight))
        .route("/g/{slug}/embed.js", get(embed_js))
        .route(
            "/page-assets/page.css",
            get(|| async { asset("text/css; charset=utf-8", CSS) }),
        )
        .route(
            "/page-assets/page.js",
            get(|| async { asset("text/javascript; charset=utf-8", JS) }),
        )
        .route("/v1/qr-code/{id}/image.svg", get(qr_svg))
        .route("/v1/qr-code/{id}/image.png", get(qr_png))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        body,
    )
        .into_response()
}

fn html(status: StatusCode, body: String) -> Response {
    let mut resp = (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response();
    let h = resp.headers_mut();
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    resp.extensions_mut().insert(KeepBody);
    resp
}

pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `#rgb` or `#rrggbb`, as (r, g, b); anything else is ignored (no CSS injection).
fn parse_color(v: Option<&Value>) -> Option<(u8, u8, u8)> {
    let s = v?.as_str()?.trim();
    let hex = s.strip_prefix('#')?;
    let full = match hex.len() {
        3 => hex.chars().flat_map(|c| [c, c]).collect::<String>(),
        6 => hex.to_string(),
        _ => return None,
    };
    let n = u32::from_str_radix(&full, 16).ok()?;
    Some(((n >> 16) as u8, (n >> 8) as u8, n as u8))
}

fn branding_value<'a>(b: &'a Value, names: &[&str]) -> Option<&'a Value> {
    names
        .iter()
        .find_map(|n| b.get(*n).filter(|v| !v.is_null()))
}

fn css_color((r, g, b): (u8, u8, u8)) -> String {
    format!("#{r:02x}{g:02x}{b:02x}")
}

/// Black or white, whichever reads better on `c` (WCAG relative luminance).
fn text_on((r, g, b): (u8, u8, u8)) -> &'static str {
    let lin = |v: u8| {
        let v = v as f64 / 255.0;
        if v <= 0.03928 {
            v / 12.92
        } else {
            ((v + 0.055) / 1.055).powf(2.4)
        }
    };
    let l = 0.2126 * lin(r) + 0.7152 * lin(g) + 0.0722 * lin(b);
    if l > 0.179 { "#000000" } else { "#ffffff" }
}

/// The page for a genie; `provider` is the active voice provider's name.
pub fn render_page(g: &PageGenie, provider: &str) -> String {
    let b = &g.branding;
    let accent = parse_color(branding_value(
        b,
        &["primary_color", "primaryColor", "accent_color", "color"],
    ))
    .unwrap_or((0x1d, 0x4e, 0xd8));
    let background = parse_color(branding_value(b, &["background_color", "backgroundColor"]))
        .unwrap_or((0xf8, 0xfa, 0xfc));
    let logo = branding_value(b, &["logo_url", "logoUrl", "logo"])
        .and_then(Value::as_str)
        .filter(|u| u.starts_with("https://") || u.starts_with("http://"))
        .map(|u| {
            format!(
                r#"<img src="{}" alt="{} logo">"#,
                escape(u),
                escape(&g.name)
            )
        })
        .unwrap_or_default();
    let welcome = g
        .welcome
        .clone()
        .filter(|w| !w.trim().is_empty())
        .unwrap_or_else(|| format!("Welcome! Start a conversation with {}.", g.name));
    let (mode, start) = match (provider, g.external_agent_id.as_deref()) {
        ("elevenlabs", Some(agent)) if !agent.is_empty() => {
            ("widget", WIDGET.replace("{{agent_id}}", &escape(agent)))
        }
        _ => ("chat", CHAT.to_string()),
    };
    // The greeting opens the chat log, as it opens the conversation record.
    let first = page_chat::first_message(g)
        .map(|m| {
            format!(
                r#"<li class="agent"><span class="visually-hidden">{}: </span>{}</li>"#,
                escape(&g.name),
                escape(m)
            )
        })
        .unwrap_or_default();
    PAGE.replace("{{start}}", &start)
        .replace("{{logo}}", &logo)
        .replace("{{accent}}", &css_color(accent))
        .replace("{{accent_text}}", text_on(accent))
        .replace("{{background}}", &css_color(background))
        .replace("{{foreground}}", text_on(background))
        .replace("{{mode}}", mode)
        .replace("{{slug}}", &escape(&g.slug))
        .replace("{{welcome}}", &escape(&welcome))
        .replace("{{name}}", &escape(&g.name))
        .replace("{{lang}}", &escape(g.language.as_deref().unwrap_or("en")))
        .replace(
            "{{speed}}",
            &g.speed.unwrap_or(1.0).clamp(0.5, 2.0).to_string(),
        )
        // Last, so that text in the message is never taken for a placeholder.
        .replace("{{first_message}}", &first)
}

async fn page(State(app): State<AppState>, Path(slug): Path<String>) -> Response {
    let found = page_chat::find_active(&app, &slug).await;
    match found {
        Ok(Some(g)) => {
            // The widget belongs to the platform that runs this genie.
            let provider = crate::knowledge::agents::voice_for(&app, &g.id)
                .await
                .map(|v| v.name())
                .unwrap_or("local");
            let mut resp = html(StatusCode::OK, render_page(&g, provider));
            // Which sites may show the page in a frame (the widget): genied's own pages and
            // the genie's allowed origins.
            let mut ancestors = String::from("frame-ancestors 'self'");
            for o in allowed(&g) {
                ancestors.push(' ');
                ancestors.push_str(&o);
            }
            if let Ok(v) = HeaderValue::from_str(&ancestors) {
                resp.headers_mut()
                    .insert(header::CONTENT_SECURITY_POLICY, v);
            }
            resp
        }
        Ok(None) => html(StatusCode::NOT_FOUND, NOT_FOUND.to_string()),
        Err(e) => e.into_response(),
    }
}

fn allowed(g: &PageGenie) -> Vec<String> {
    g.allowed_origins
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The request's `Origin` when it is another site's (not genied's own address).
fn foreign_origin(app: &AppState, headers: &HeaderMap) -> Option<String> {
    let origin = headers
        .get(header::ORIGIN)?
        .to_str()
        .ok()?
        .trim_end_matches('/');
    let own = app.config.public_base();
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let same = origin == own
        || host
            .is_some_and(|h| origin == format!("http://{h}") || origin == format!("https://{h}"));
    (!same).then(|| origin.to_string())
}

/// The CORS rule of the chat routes: a request from another site is answered only when
/// the genie lists that site in `allowed_origins` (then with `Access-Control-Allow-Origin`);
/// any other is refused with 403 naming the origin. Same-site requests pass.
async fn check_origin(
    app: &AppState,
    slug: &str,
    headers: &HeaderMap,
) -> ApiResult<Option<HeaderValue>> {
    let Some(origin) = foreign_origin(app, headers) else {
        return Ok(None);
    };
    let g = page_chat::find_active(app, slug)
        .await?
        .ok_or_else(ApiError::agent_not_found)?;
    if allowed(&g).contains(&origin) {
        return Ok(HeaderValue::from_str(&origin).ok());
    }
    Err(ApiError::forbidden(format!(
        "the site {origin} may not use this genie's chat; its owner can add it to the genie's allowed_origins"
    )))
}

fn with_cors(mut resp: Response, allow: Option<HeaderValue>) -> Response {
    if let Some(o) = allow {
        let h = resp.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, o);
        h.insert(header::VARY, HeaderValue::from_static("Origin"));
    }
    resp
}

/// The CORS preflight of the chat routes.
async fn preflight(
    State(app): State<AppState>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    match check_origin(&app, &slug, &headers).await {
        Ok(allow) => {
            let mut resp = StatusCode::NO_CONTENT.into_response();
            let h = resp.headers_mut();
            h.insert(
                header::ACCESS_CONTROL_ALLOW_METHODS,
                HeaderValue::from_static("POST"),
            );
            h.insert(
                header::ACCESS_CONTROL_ALLOW_HEADERS,
                HeaderValue::from_static("content-type, accept"),
            );
            h.insert(
                header::ACCESS_CONTROL_MAX_AGE,
                HeaderValue::from_static("600"),
            );
            with_cors(resp, allow)
        }
        Err(e) => e.into_response(),
    }
}

/// `GET /g/{slug}/embed.js`: the widget script. It refuses to mount (with a console error
/// naming the site) on a page whose origin the genie does not allow; a request whose
/// `Referer` names such a site gets that refusal from the server already.
async fn embed_js(
    State(app): State<AppState>,
    Path(slug): Path<String>,
    headers: HeaderMap,
) -> Response {
    let js = |status: StatusCode, body: String| {
        let mut resp = (
            status,
            [
                (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            body,
        )
            .into_response();
        resp.extensions_mut().insert(KeepBody);
        resp
    };
    let g = match page_chat::find_active(&app, &slug).await {
        Ok(Some(g)) => g,
        Ok(None) => {
            let msg = json!(format!(
                "genied: there is no active genie '{slug}' to embed"
            ));
            return js(StatusCode::NOT_FOUND, format!("console.error({msg});\n"));
        }
        Err(e) => return e.into_response(),
    };
    let origins = allowed(&g);
    let own = app.config.public_base();
    let referer_origin = headers
        .get(header::REFERER)
        .and_then(|v| v.to_str().ok())
        .and_then(|r| url::Url::parse(r).ok())
        .map(|u| u.origin().ascii_serialization());
    let refused = referer_origin
        .as_ref()
        .is_some_and(|o| o != &own && !origins.contains(o));
    let body = EMBED
        .replace("__BASE__", &json!(own).to_string())
        .replace("__SLUG__", &json!(g.slug).to_string())
        .replace("__ALLOWED__", &json!(origins).to_string())
        .replace("__REFUSED__", if refused { "true" } else { "false" })
        // Last, so that text in the name is never taken for a placeholder.
        .replace("__NAME__", &json!(g.name).to_string());
    js(
        if refused {
            StatusCode::FORBIDDEN
        } else {
            StatusCode::OK
        },
        body,
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatIn {
    #[serde(default, alias = "conversationId")]
    conversation_id: Option<String>,
    message: String,
}

async fn chat(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<std::net::SocketAddr>,
    Path(slug): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    // The same per-address limit for streams, JSON and the widget: they are one route.
    if let Err(e) = app.public_chat.check(addr.ip()) {
        return e.into_response();
    }
    let allow = match check_origin(&app, &slug, &headers).await {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    let input = match chat_input(&body) {
        Ok(i) => i,
        Err(e) => return with_cors(e.into_response(), allow),
    };
    if wants_stream(&headers) {
        return with_cors(stream_chat(app, slug, input), allow);
    }
    let resp = match page_chat::chat(&app, slug, input.0, &input.1).await {
        Ok(v) => Json(json!({"success": true, "data": v})).into_response(),
        Err(e) => e.into_response(),
    };
    with_cors(resp, allow)
}

fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(|v| v.to_ascii_lowercase().contains("text/event-stream"))
}

/// The conversation id (checked) and the message of a chat request.
fn chat_input(body: &[u8]) -> ApiResult<(Option<String>, String)> {
    let raw = serde_json::from_slice::<Value>(body)
        .map_err(|e| ApiError::validation(format!("request body is not valid JSON: {e}")))?;
    crate::api::input::refuse_nul(&raw, "body")?;
    let input: ChatIn = crate::api::parse_value(&raw, "body")?;
    let conv_id = input
        .conversation_id
        .filter(|s| !s.is_empty())
        .map(|s| crate::api::parse_uuid(&s, "conversation_id"))
        .transpose()?;
    Ok((conv_id, input.message))
}

fn error_json(e: &ApiError) -> Value {
    json!({"code": e.code(), "message": e.message, "status": e.status().as_u16()})
}

/// The reply as Server-Sent Events: `token` (`{text}`) as the model sends each piece,
/// `tool` (`{name, status: running|done|failed}`) around each tool call, then one `done`
/// with the JSON answer, or one `error` with the envelope's error object. The turn runs on
/// its own task: a visitor who closes the page still gets the turn recorded.
fn stream_chat(app: AppState, slug: String, input: (Option<String>, String)) -> Response {
    use axum::response::sse::{Event as Sse_, KeepAlive, Sse};
    use page_chat::Step;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Step>();
    let task =
        tokio::spawn(
            async move { page_chat::chat_with(&app, slug, input.0, &input.1, Some(tx)).await },
        );
    let stream = futures_util::stream::unfold((rx, Some(task)), |(mut rx, task)| async move {
        let task = task?;
        let ev = match rx.recv().await {
            Some(Step::Token(t)) => Sse_::default().event("token").json_data(json!({"text": t})),
            Some(Step::ToolStarted { name }) => Sse_::default()
                .event("tool")
                .json_data(json!({"name": name, "status": "running"})),
            Some(Step::ToolFinished {
                name,
                ok,
                duration_ms,
            }) => Sse_::default().event("tool").json_data(json!({
                "name": name, "status": if ok { "done" } else { "failed" }, "duration_ms": duration_ms
            })),
            // Every sender is gone: the turn is over.
            None => {
                let ev = match task.await {
                    Ok(Ok(answer)) => Sse_::default().event("done").json_data(answer),
                    Ok(Err(e)) => Sse_::default().event("error").json_data(error_json(&e)),
                    Err(_) => Sse_::default().event("error").json_data(error_json(
                        &ApiError::new(crate::error::Kind::Internal, "internal error"),
                    )),
                };
                return Some((ev, (rx, None)));
            }
        };
        Some((ev, (rx, Some(task))))
    });
    let mut resp = Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response();
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    // Proxies such as nginx buffer responses unless told not to.
    resp.headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    resp
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EndIn {
    #[serde(alias = "conversationId")]
    conversation_id: String,
}

/// `POST /g/{slug}/chat/end` `{conversation_id}`: the visitor ends the conversation.
async fn end_chat(
    State(app): State<AppState>,
    ConnectInfo(addr): ConnectInfo<std::net::SocketAddr>,
    Path(slug): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(e) = app.public_chat.check(addr.ip()) {
        return e.into_response();
    }
    let allow = match check_origin(&app, &slug, &headers).await {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    let run = async {
        let raw = serde_json::from_slice::<Value>(&body)
            .map_err(|e| ApiError::validation(format!("request body is not valid JSON: {e}")))?;
        let input: EndIn = crate::api::parse_value(&raw, "body")?;
        let id = crate::api::parse_uuid(&input.conversation_id, "conversation_id")?;
        let ended = page_chat::visitor_ends(&app, slug, id.clone()).await?;
        Ok::<_, ApiError>(json!({"conversation_id": id, "ended": true, "already_ended": !ended}))
    };
    let resp = match run.await {
        Ok(v) => Json(json!({"success": true, "data": v})).into_response(),
        Err(e) => e.into_response(),
    };
    with_cors(resp, allow)
}

// ---- QR images ---------------------------------------------------------------------------

async fn qr_url(app: &AppState, headers: &HeaderMap, id: &str) -> ApiResult<String> {
    let principal = auth::authenticate(
        &app.db,
        &app.auth_cache,
        &app.secrets,
        Credential::from_headers(headers)?,
        false,
    )
    .await?;
    if let Err(limited) = app.limits.check(&principal.rate_key()).await {
        return Err(limited.error);
    }
    let id = crate::api::parse_uuid(id, "id")?;
    let uid = principal.user_id.clone();
    let code = app
        .db
        .read(move |c| Ok(db::qr_codes::get(c, &uid, &id)?))
        .await?;
    let code = code.ok_or_else(|| ApiError::not_found("QR code"))?;
    Ok(code.at(&app.config.public_base()).url)
}

fn qr_code(url: &str) -> ApiResult<qrcode::QrCode> {
    qrcode::QrCode::with_error_correction_level(url.as_bytes(), qrcode::EcLevel::M)
        .map_err(ApiError::internal)
}

async fn qr_svg(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let run = async {
        let url = qr_url(&app, &headers, &id).await?;
        let svg = qr_code(&url)?
            .render::<qrcode::render::svg::Color>()
            .min_dimensions(256, 256)
            .quiet_zone(true)
            .build();
        Ok::<_, ApiError>(
            (
                [
                    (header::CONTENT_TYPE, "image/svg+xml"),
                    (header::CACHE_CONTROL, "private, no-store"),
                ],
                svg,
            )
                .into_response(),
        )
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

async fn qr_png(
    State(app): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let run = async {
        let url = qr_url(&app, &headers, &id).await?;
        let png = db::run_blocking(move || {
            let img = qr_code(&url)?
                .render::<image::Luma<u8>>()
                .min_dimensions(512, 512)
                .quiet_zone(true)
                .build();
            let mut out = Cursor::new(Vec::new());
            image::DynamicImage::ImageLuma8(img)
                .write_to(&mut out, image::ImageFormat::Png)
                .map_err(ApiError::internal)?;
            Ok(out.into_inner())
        })
        .await?;
        Ok::<_, ApiError>(
            (
                [
                    (header::CONTENT_TYPE, "image/png"),
                    (header::CACHE_CONTROL, "private, no-store"),
                ],
                png,
            )
                .into_response(),
        )
    };
    run.await.unwrap_or_else(IntoResponse::into_response)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn genie() -> PageGenie {
        PageGenie {
            id: "g".into(),
            user_id: "u".into(),
            name: "Ada <b>".into(),
            slug: "ada".into(),
            welcome: Some("Hi \"there\"".into()),
            branding: json!({"primary_color": "#ffcc00", "logo_url": "javascript:alert(1)"}),
            first_message: Some("Hello <there> & welcome".into()),
            external_agent_id: Some("agent_123".into()),
            system_prompt: None,
            llm_model: "m".into(),
            temperature: None,
            max_tokens: None,
            language: Some("de".into()),
            speed: Some(1.2),
            allowed_origins: json!([]),
        }
    }

    #[test]
    fn elevenlabs_gets_the_widget_and_local_gets_the_chat() {
        let el = render_page(&genie(), "elevenlabs");
        assert!(el.contains(r#"<elevenlabs-convai agent-id="agent_123">"#));
        assert!(!el.contains("id=\"chat-form\""));
        let local = render_page(&genie(), "local");
        assert!(local.contains("id=\"chat-form\""));
        assert!(!local.contains("elevenlabs-convai"));
    }

    #[test]
    fn values_are_escaped_and_colours_checked() {
        let p = render_page(&genie(), "local");
        assert!(p.contains("Ada &lt;b&gt;"));
        assert!(p.contains("Hi &quot;there&quot;"));
        assert!(p.contains("</span>Hello &lt;there&gt; &amp; welcome</li>"));
        assert!(p.contains("--accent: #ffcc00; --accent-text: #000000"));
        assert!(!p.contains("javascript:"));
        let mut g = genie();
        g.branding = json!({"primary_color": "red;}</style><script>"});
        assert!(render_page(&g, "local").contains("--accent: #1d4ed8"));
    }
}
