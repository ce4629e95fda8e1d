//! OpenID Connect sign-in (the `openidconnect` crate): discovery, the authorization code
//! flow with PKCE, state and nonce, and the ID token's signature and claims (issuer,
//! audience, expiry, nonce) checked against the provider's published keys. What comes out is
//! who signed in, `(issuer, subject)` plus the email and role claims; `service::accounts`
//! decides which account that is.
//!
//! Logins in flight (state → PKCE verifier, nonce) live in memory for ten minutes and are
//! spent on first use, so a replayed callback is refused; a restart forgets them (the person
//! signs in again). The client secret is only in memory and never logged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use openidconnect::core::{CoreAuthenticationFlow, CoreClient, CoreProviderMetadata};
use openidconnect::{
    AuthorizationCode, ClientId, ClientSecret, CsrfToken, IssuerUrl, Nonce, PkceCodeChallenge,
    PkceCodeVerifier, RedirectUrl, RequestTokenError, Scope, TokenResponse,
};

use crate::config::Config;
use crate::db::users::Role;
use crate::error::{ApiError, ApiResult, Kind};

/// How long a started sign-in may take to come back.
const PENDING_TTL: Duration = Duration::from_secs(600);
/// How long the console has to trade its one-time code for tokens.
const HANDOFF_TTL: Duration = Duration::from_secs(60);
/// Most sign-ins in flight; past it the oldest are dropped (a flood of `authorize` calls
/// cannot grow memory without bound).
const PENDING_MAX: usize = 10_000;
/// Discovery (and with it the provider's keys) is fetched again after this long, so a key
/// rotation at the provider is picked up.
const METADATA_TTL: Duration = Duration::from_secs(600);

struct Pending {
    verifier: PkceCodeVerifier,
    nonce: Nonce,
    console: bool,
    at: Instant,
}

/// Who signed in, from a validated ID token.
#[derive(Debug, Clone)]
pub struct Identity {
    pub issuer: String,
    pub subject: String,
    pub email: Option<String>,
    pub email_verified: bool,
    pub name: Option<String>,
    /// The highest role the role mapping gives for the token's claim, if any value mapped.
    pub mapped_role: Option<Role>,
    /// The sign-in was started by the console (`?console=1`).
    pub console: bool,
}

pub struct Oidc {
    issuer: IssuerUrl,
    client_id: ClientId,
    client_secret: Option<ClientSecret>,
    redirect: RedirectUrl,
    scopes: Vec<String>,
    role_claim: String,
    role_map: Vec<(String, Role)>,
    http: reqwest::Client,
    metadata: tokio::sync::Mutex<Option<(CoreProviderMetadata, Instant)>>,
    pending: Mutex<HashMap<String, Pending>>,
    /// Console hand-offs: one-time code → (user id, role, created).
    handoffs: Mutex<HashMap<String, (String, Role, Instant)>>,
}

impl std::fmt::Debug for Oidc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oidc")
            .field("issuer", &self.issuer.as_str())
            .field("client_id", &self.client_id.as_str())
            .finish_non_exhaustive()
    }
}

fn role_rank(r: Role) -> u8 {
    match r {
        Role::InternalAdmin => 2,
        Role::StandardUser => 1,
        Role::Consumer => 0,
    }
}

/// `value=role,value=role`.
pub fn parse_role_map(s: &str) -> anyhow::Result<Vec<(String, Role)>> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (v, r) = p
                .rsplit_once('=')
                .ok_or_else(|| anyhow::anyhow!("--oidc-role-map: '{p}' is not VALUE=ROLE"))?;
            let role = Role::parse(r.trim()).ok_or_else(|| {
                anyhow::anyhow!(
                    "--oidc-role-map: '{r}' is not a role (internal_admin, standard_user, consumer)"
                )
            })?;
            Ok((v.trim().to_string(), role))
        })
        .collect()
}

impl Oidc {
    /// `None` without `--oidc-issuer`. Refuses an incomplete or unusable configuration at
    /// startup rather than at the first sign-in.
    pub fn from_config(c: &Config) -> anyhow::Result<Option<Oidc>> {
        let Some(issuer) = c.oidc_issuer.as_deref().filter(|s| !s.is_empty()) else {
            return Ok(None);
        };
        let issuer = IssuerUrl::new(issuer.trim_end_matches('/').to_string())
            .map_err(|e| anyhow::anyhow!("--oidc-issuer is not a URL: {e}"))?;
        let client_id = c
            .oidc_client_id
            .clone()
            .filter(|s| !s.is_empty())
            .ok_or_else(|| anyhow::anyhow!("--oidc-issuer needs --oidc-client-id"))?;
        let secret = match (&c.oidc_client_secret, &c.oidc_client_secret_file) {
            (Some(s), _) if !s.0.is_empty() => Some(s.0.clone()),
            (_, Some(path)) => Some(
                std::fs::read_to_string(path)
                    .map_err(|e| {
                        anyhow::anyhow!("reading --oidc-client-secret-file {}: {e}", path.display())
                    })?
                    .trim()
                    .to_string(),
            ),
            _ => None,
        };
        let redirect = RedirectUrl::new(format!("{}/v1/auth/oidc/callback", c.public_base()))
            .map_err(|e| anyhow::anyhow!("--public-url makes no callback URL: {e}"))?;
        let scopes = c
            .oidc_scopes
            .split([' ', ','])
            .map(str::trim)
            .filter(|s| !s.is_empty() && *s != "openid")
            .map(String::from)
            .collect();
        let http = reqwest::Client::builder()
            // Following redirects from the provider's endpoints would open SSRF paths.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(Duration::from_secs(15))
            .no_proxy()
            .build()?;
        Ok(Some(Oidc {
            issuer,
            client_id: ClientId::new(client_id),
            client_secret: secret.map(ClientSecret::new),
            redirect,
            scopes,
            role_claim: c.oidc_role_claim.clone(),
            role_map: parse_role_map(&c.oidc_role_map)?,
            http,
            metadata: tokio::sync::Mutex::new(None),
            pending: Mutex::default(),
            handoffs: Mutex::default(),
        }))
    }

    pub fn issuer(&self) -> &str {
        self.issuer.as_str()
    }

    async fn metadata(&self, fresh: bool) -> ApiResult<CoreProviderMetadata> {
        let mut m = self.metadata.lock().await;
        if let Some((meta, at)) = m.as_ref()
            && !fresh
            && at.elapsed() < METADATA_TTL
        {
            return Ok(meta.clone());
        }
        let meta = CoreProviderMetadata::discover_async(self.issuer.clone(), &self.http)
            .await
            .map_err(|e| {
                tracing::warn!(error = %e, issuer = %self.issuer.as_str(), "OpenID discovery failed");
                ApiError::upstream(format!(
                    "the identity provider's discovery document or keys could not be read: {e}"
                ))
            })?;
        *m = Some((meta.clone(), Instant::now()));
        Ok(meta)
    }

    /// The provider's authorization URL for a new sign-in (PKCE S256, random state and
    /// nonce, remembered until the callback).
    pub async fn begin(&self, console: bool) -> ApiResult<String> {
        let meta = self.metadata(false).await?;
        let client = CoreClient::from_provider_metadata(
            meta,
            self.client_id.clone(),
            self.client_secret.clone(),
        )
        .set_redirect_uri(self.redirect.clone());
        let (challenge, verifier) = PkceCodeChallenge::new_random_sha256();
        let (url, state, nonce) = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                CsrfToken::new_random,
                Nonce::new_random,
            )
            .add_scopes(self.scopes.iter().cloned().map(Scope::new))
            .set_pkce_challenge(challenge)
            .url();
        let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        p.retain(|_, v| v.at.elapsed() < PENDING_TTL);
        if p.len() >= PENDING_MAX {
            p.clear();
        }
        p.insert(
            state.secret().clone(),
            Pending {
                verifier,
                nonce,
                console,
                at: Instant::now(),
            },
        );
        Ok(url.to_string())
    }

    /// Completes a sign-in: the state must be one this service issued and not yet used;
    /// the code is exchanged (with the PKCE verifier) and the ID token validated.
    pub async fn finish(&self, code: &str, state: &str) -> ApiResult<Identity> {
        let pending = {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            p.remove(state)
        }
        .filter(|p| p.at.elapsed() < PENDING_TTL)
        .ok_or_else(|| {
            ApiError::validation(
                "state: this sign-in is unknown, expired or already used; start it again",
            )
        })?;
        let meta = self.metadata(false).await?;
        let client = CoreClient::from_provider_metadata(
            meta,
            self.client_id.clone(),
            self.client_secret.clone(),
        )
        .set_redirect_uri(self.redirect.clone());
        let token = client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .map_err(|e| ApiError::upstream(format!("the identity provider: {e}")))?
            .set_pkce_verifier(pending.verifier)
            .request_async(&self.http)
            .await
            .map_err(|e| match e {
                RequestTokenError::ServerResponse(r) => ApiError::new(
                    Kind::InvalidCredentials,
                    format!(
                        "the identity provider refused the authorization code ({})",
                        r.error()
                    ),
                ),
                other => {
                    tracing::warn!(error = %other, "OpenID token request failed");
                    ApiError::upstream(format!(
                        "the identity provider's token endpoint failed: {other}"
                    ))
                }
            })?;
        let id_token = token.id_token().ok_or_else(|| {
            ApiError::new(
                Kind::InvalidCredentials,
                "the identity provider returned no ID token",
            )
        })?;
        let verifier = client.id_token_verifier();
        let claims = match id_token.claims(&verifier, &pending.nonce) {
            Ok(c) => c.clone(),
            Err(e) => {
                // A key the cached discovery does not know may be a rotation: look once more.
                let meta = self.metadata(true).await?;
                let client = CoreClient::from_provider_metadata(
                    meta,
                    self.client_id.clone(),
                    self.client_secret.clone(),
                );
                let retry = id_token
                    .claims(&client.id_token_verifier(), &pending.nonce)
                    .cloned();
                retry.map_err(|_| {
                    ApiError::new(
                        Kind::InvalidCredentials,
                        format!("the ID token is not valid: {e}"),
                    )
                })?
            }
        };
        let payload = payload(&id_token.to_string());
        Ok(Identity {
            issuer: claims.issuer().as_str().to_string(),
            subject: claims.subject().as_str().to_string(),
            email: claims.email().map(|e| e.as_str().to_string()),
            email_verified: claims.email_verified().unwrap_or(false),
            name: claims
                .name()
                .and_then(|n| n.get(None))
                .map(|n| n.as_str().to_string()),
            mapped_role: self.map_role(&payload),
            console: pending.console,
        })
    }

    /// The highest role the role map gives the configured claim's values.
    fn map_role(&self, payload: &serde_json::Value) -> Option<Role> {
        let values: Vec<&str> = match payload.get(&self.role_claim) {
            Some(serde_json::Value::String(s)) => vec![s.as_str()],
            Some(serde_json::Value::Array(a)) => a.iter().filter_map(|v| v.as_str()).collect(),
            _ => return None,
        };
        self.role_map
            .iter()
            .filter(|(v, _)| values.contains(&v.as_str()))
            .map(|(_, r)| *r)
            .max_by_key(|r| role_rank(*r))
    }

    /// A one-time code the console trades for tokens (they never appear in a URL).
    pub fn handoff(&self, user_id: &str, role: Role) -> String {
        let code = crate::auth::sessions::random_token();
        let mut h = self.handoffs.lock().unwrap_or_else(|e| e.into_inner());
        h.retain(|_, v| v.2.elapsed() < HANDOFF_TTL);
        if h.len() >= PENDING_MAX {
            h.clear();
        }
        h.insert(
            crate::auth::keys::hash(&code),
            (user_id.to_string(), role, Instant::now()),
        );
        code
    }

    pub fn take_handoff(&self, code: &str) -> Option<(String, Role)> {
        let mut h = self.handoffs.lock().unwrap_or_else(|e| e.into_inner());
        h.remove(&crate::auth::keys::hash(code))
            .filter(|v| v.2.elapsed() < HANDOFF_TTL)
            .map(|(u, r, _)| (u, r))
    }
}

/// The claims of an ID token whose signature and claims were already verified, as JSON, for
/// the configured role claim (which the standard claims type does not carry).
fn payload(jwt: &str) -> serde_json::Value {
    jwt.split('.')
        .nth(1)
        .and_then(|p| {
            base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(p)
                .ok()
        })
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn role_map_parses_and_refuses_unknown_roles() {
        let m = parse_role_map(" admins=internal_admin, staff = standard_user ,").unwrap();
        assert_eq!(
            m,
            vec![
                ("admins".to_string(), Role::InternalAdmin),
                ("staff".to_string(), Role::StandardUser)
            ]
        );
        assert!(parse_role_map("admins=root").is_err());
        assert!(parse_role_map("admins").is_err());
    }
}
