//! Session tokens: HS256 JWTs naming a session row (`sid`), so that logout revokes a token
//! before it expires, plus one-time refresh tokens that rotate on every use.

use base64::Engine;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use rand::RngCore;
use serde::{Deserialize, Serialize};

use crate::auth::keys;
use crate::db::{self, Db, users::Role};
use crate::error::{ApiError, ApiResult};

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub sid: String,
    pub role: Role,
    pub iat: i64,
    pub exp: i64,
}

pub fn encode(jwt_key: &[u8], claims: &Claims) -> String {
    jsonwebtoken::encode(
        &Header::new(Algorithm::HS256),
        claims,
        &EncodingKey::from_secret(jwt_key),
    )
    .expect("HS256 encoding of plain claims cannot fail")
}

/// Seconds of clock skew allowed on `exp`, here and in [`is_expired`].
const LEEWAY_SECS: i64 = 5;

/// The same expiry rule `decode` applies, for tokens whose signature was checked earlier.
pub fn is_expired(exp: i64) -> bool {
    exp < chrono::Utc::now().timestamp() - LEEWAY_SECS
}

pub fn decode(jwt_key: &[u8], token: &str) -> ApiResult<Claims> {
    let mut v = Validation::new(Algorithm::HS256);
    v.leeway = LEEWAY_SECS as u64;
    v.set_required_spec_claims(&["exp", "sub"]);
    jsonwebtoken::decode::<Claims>(token, &DecodingKey::from_secret(jwt_key), &v)
        .map(|d| d.claims)
        .map_err(|e| match e.kind() {
            jsonwebtoken::errors::ErrorKind::ExpiredSignature => {
                ApiError::invalid_token("access token has expired")
            }
            _ => ApiError::invalid_token("access token is malformed or its signature is invalid"),
        })
}

/// What sign-in and refresh return to the client.
#[derive(Debug, Serialize)]
pub struct TokenPair {
    pub access_token: String,
    pub refresh_token: String,
    pub token_type: &'static str,
    pub expires_in: u64,
}

pub fn random_token() -> String {
    let mut b = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut b);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(b)
}

pub fn access_token(jwt_key: &[u8], user_id: &str, sid: &str, role: Role, ttl_secs: u64) -> String {
    let iat = chrono::Utc::now().timestamp();
    encode(
        jwt_key,
        &Claims {
            sub: user_id.into(),
            sid: sid.into(),
            role,
            iat,
            exp: iat + ttl_secs as i64,
        },
    )
}

fn refresh_expiry(ttl_secs: u64) -> String {
    db::fmt_time(chrono::Utc::now() + chrono::Duration::seconds(ttl_secs as i64))
}

/// Opens a new session for the user and returns its tokens.
pub async fn open(
    db: &Db,
    jwt_key: &[u8],
    user_id: &str,
    role: Role,
    access_ttl: u64,
    refresh_ttl: u64,
) -> ApiResult<TokenPair> {
    let sid = db::new_id();
    let refresh = random_token();
    let (rh, uid, sid2, exp) = (
        keys::hash(&refresh),
        user_id.to_string(),
        sid.clone(),
        refresh_expiry(refresh_ttl),
    );
    db.write(move |c| Ok(db::sessions::insert(c, &sid2, &uid, Some(&rh), Some(&exp))?))
        .await?;
    Ok(TokenPair {
        access_token: access_token(jwt_key, user_id, &sid, role, access_ttl),
        refresh_token: refresh,
        token_type: "Bearer",
        expires_in: access_ttl,
    })
}

/// Exchanges a refresh token for a new pair; the presented token stops working.
pub async fn refresh(
    db: &Db,
    jwt_key: &[u8],
    refresh_token: &str,
    access_ttl: u64,
    refresh_ttl: u64,
) -> ApiResult<TokenPair> {
    let new_refresh = random_token();
    let (old, new, exp) = (
        keys::hash(refresh_token),
        keys::hash(&new_refresh),
        refresh_expiry(refresh_ttl),
    );
    let found = db
        .write(move |c| Ok(db::sessions::rotate_refresh(c, &old, &new, &exp)?))
        .await?;
    let (sid, uid, role) = found
        .ok_or_else(|| ApiError::invalid_token("refresh token is unknown, used or expired"))?;
    Ok(TokenPair {
        access_token: access_token(jwt_key, &uid, &sid, role, access_ttl),
        refresh_token: new_refresh,
        token_type: "Bearer",
        expires_in: access_ttl,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The authentication cache applies `is_expired` to tokens it verified earlier; it must
    /// draw the line where `decode` does.
    #[test]
    fn is_expired_agrees_with_decode() {
        let key = b"test-key-0123456789abcdef0123456789abcdef";
        let now = chrono::Utc::now().timestamp();
        for (age, expired) in [
            (-60, false),
            (0, false),
            (3, false),
            (30, true),
            (600, true),
        ] {
            let exp = now - age;
            let claims = Claims {
                sub: "u".into(),
                sid: "s".into(),
                role: Role::StandardUser,
                iat: exp - 60,
                exp,
            };
            let decoded = decode(key, &encode(key, &claims));
            assert_eq!(decoded.is_err(), expired, "exp {age} s ago");
            assert_eq!(is_expired(exp), expired, "exp {age} s ago");
        }
    }
}
