//! A webhook receiver that verifies genied's signatures.
//!
//! ```sh
//! GENIED_WEBHOOK_SECRET=whsec_... cargo run --example webhook_receiver -- 127.0.0.1:9000
//! ```
//! Then create a webhook with `"url": "http://127.0.0.1:9000/hook"`. Every event is printed
//! with whether its signature verified; forged or stale (over 5 minutes old) requests get 401.

use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use hmac::{Hmac, Mac};
use sha2::Sha256;

/// `Genied-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "{t}.{body}">`.
fn verify(secret: &str, header: &str, body: &str, now: i64) -> Result<(), &'static str> {
    let mut t = None;
    let mut sigs = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<i64>().ok(),
            Some(("v1", v)) => sigs.push(v.to_string()),
            _ => {}
        }
    }
    let t = t.ok_or("no timestamp")?;
    if (now - t).abs() > 300 {
        return Err("stale timestamp");
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).map_err(|_| "bad secret")?;
    mac.update(format!("{t}.{body}").as_bytes());
    // verify_slice compares in constant time.
    let ok = sigs
        .iter()
        .any(|s| hex::decode(s).is_ok_and(|raw| mac.clone().verify_slice(&raw).is_ok()));
    if ok {
        Ok(())
    } else {
        Err("signature mismatch")
    }
}

#[tokio::main]
async fn main() {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:9000".into());
    let secret = std::env::var("GENIED_WEBHOOK_SECRET")
        .expect("set GENIED_WEBHOOK_SECRET to the endpoint's secret");
    let app = axum::Router::new().route(
        "/hook",
        post(move |headers: HeaderMap, body: String| {
            let secret = secret.clone();
            async move {
                let sig = headers
                    .get("genied-signature")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("");
                let event = headers
                    .get("genied-event")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or("?");
                match verify(&secret, sig, &body, chrono::Utc::now().timestamp()) {
                    Ok(()) => {
                        println!("{event}: {body}");
                        StatusCode::NO_CONTENT
                    }
                    Err(why) => {
                        eprintln!("refused a request: {why}");
                        StatusCode::UNAUTHORIZED
                    }
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind(&addr).await.expect("bind");
    eprintln!("listening on http://{addr}/hook");
    axum::serve(listener, app).await.expect("serve");
}
