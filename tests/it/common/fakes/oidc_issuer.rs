//! A hand-rolled OpenID issuer for the failure cases a certified provider will not produce:
//! it serves discovery and a JWKS (test key A) and a token endpoint that answers with an ID
//! token shaped as the test asks (signed by key B, for another audience, expired). The token
//! endpoint checks every request: method, path, Basic client authentication, the
//! authorization code, the PKCE verifier and the redirect URI.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use base64::Engine;
use serde_json::json;

const KEY_A: &str = include_str!("oidc_key_a.pem");
const KEY_B: &str = include_str!("oidc_key_b.pem");
/// The modulus of key A, base64url (from `openssl rsa -noout -modulus`); the exponent is 65537.
const KEY_A_N: &str = include_str!("oidc_key_a.n");

/// What the next ID token looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Valid,
    /// Signed with a key the JWKS does not publish (same `kid`).
    BadSignature,
    /// `aud` names another client.
    WrongAudience,
    /// `exp` an hour ago.
    Expired,
}

struct St {
    issuer: String,
    client_id: String,
    client_secret: String,
    mode: Mode,
    /// The nonce genied sent in the authorization request.
    nonce: String,
    /// (code, redirect_uri) seen at the token endpoint.
    seen: Vec<(String, String)>,
    errors: Vec<String>,
}

#[derive(Clone)]
pub struct FakeIssuer {
    pub issuer: String,
    st: Arc<Mutex<St>>,
}

impl FakeIssuer {
    pub async fn start(client_id: &str, client_secret: &str) -> FakeIssuer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let st = Arc::new(Mutex::new(St {
            issuer: issuer.clone(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            mode: Mode::Valid,
            nonce: String::new(),
            seen: Vec::new(),
            errors: Vec::new(),
        }));
        let app = Router::new()
            .route("/.well-known/openid-configuration", get(discovery))
            .route("/jwks", get(jwks))
            .route("/token", post(token))
            .fallback(|| async { StatusCode::NOT_FOUND })
            .with_state(st.clone());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeIssuer { issuer, st }
    }

    /// The next token answers in `mode`, carrying `nonce`.
    pub fn next(&self, mode: Mode, nonce: &str) {
        let mut s = self.st.lock().unwrap();
        s.mode = mode;
        s.nonce = nonce.into();
    }

    /// Codes (and redirect URIs) the token endpoint was asked to exchange.
    pub fn seen(&self) -> Vec<(String, String)> {
        self.st.lock().unwrap().seen.clone()
    }

    /// Requests the fake found wrong (none expected).
    pub fn errors(&self) -> Vec<String> {
        self.st.lock().unwrap().errors.clone()
    }
}

async fn discovery(State(st): State<Arc<Mutex<St>>>) -> Response {
    let i = st.lock().unwrap().issuer.clone();
    axum::Json(json!({
        "issuer": i,
        "authorization_endpoint": format!("{i}/auth"),
        "token_endpoint": format!("{i}/token"),
        "jwks_uri": format!("{i}/jwks"),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "code_challenge_methods_supported": ["S256"],
    }))
    .into_response()
}

async fn jwks() -> Response {
    axum::Json(json!({"keys": [{
        "kty": "RSA", "use": "sig", "alg": "RS256", "kid": "test-key",
        "n": KEY_A_N.trim(), "e": "AQAB",
    }]}))
    .into_response()
}

async fn token(State(st): State<Arc<Mutex<St>>>, headers: HeaderMap, body: String) -> Response {
    let mut s = st.lock().unwrap();
    let form: Vec<(String, String)> = serde_urlencoded::from_str(&body).unwrap_or_default();
    let get = |k: &str| {
        form.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let basic = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", s.client_id, s.client_secret))
    );
    let mut problems = Vec::new();
    if headers.get("authorization").and_then(|v| v.to_str().ok()) != Some(basic.as_str()) {
        problems.push("client authentication is not Basic with the client's secret".to_string());
    }
    if get("grant_type") != "authorization_code" {
        problems.push(format!("grant_type {:?}", get("grant_type")));
    }
    if get("code").is_empty() {
        problems.push("no code".into());
    }
    if get("code_verifier").len() < 43 {
        problems.push("no PKCE code_verifier".into());
    }
    if !get("redirect_uri").ends_with("/v1/auth/oidc/callback") {
        problems.push(format!("redirect_uri {:?}", get("redirect_uri")));
    }
    s.seen.push((get("code"), get("redirect_uri")));
    if !problems.is_empty() {
        s.errors.extend(problems);
        return (
            StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": "invalid_request"})),
        )
            .into_response();
    }
    let now = chrono::Utc::now().timestamp();
    let (aud, exp, key) = match s.mode {
        Mode::Valid => (s.client_id.clone(), now + 300, KEY_A),
        Mode::BadSignature => (s.client_id.clone(), now + 300, KEY_B),
        Mode::WrongAudience => ("someone-else".to_string(), now + 300, KEY_A),
        Mode::Expired => (s.client_id.clone(), now - 3600, KEY_A),
    };
    let claims = json!({
        "iss": s.issuer, "sub": "fake-subject-1", "aud": aud, "exp": exp, "iat": now - 10,
        "nonce": s.nonce, "email": "fake@example.test", "email_verified": true,
    });
    let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
    header.kid = Some("test-key".into());
    let id_token = jsonwebtoken::encode(
        &header,
        &claims,
        &jsonwebtoken::EncodingKey::from_rsa_pem(key.as_bytes()).unwrap(),
    )
    .unwrap();
    axum::Json(json!({
        "access_token": "fake-access-token", "token_type": "Bearer", "expires_in": 300,
        "id_token": id_token,
    }))
    .into_response()
}
