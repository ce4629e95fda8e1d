//! Outgoing mail (conversation reports, notifications to owners). With `--smtp-url` the
//! message goes out over SMTP (lettre, rustls); without it, or when sending fails, the
//! message is kept as a dashboard notification instead, so nothing is lost. Every attempt,
//! one per recipient, is a row in `email_logs` with status `sent`, `failed` or `notified`.

use lettre::message::Mailbox;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use serde::Serialize;
use serde_json::Value;

use crate::config::Config;
use crate::db::{Db, email_logs};
use crate::error::ApiResult;

pub struct Mailer {
    smtp: Option<AsyncSmtpTransport<Tokio1Executor>>,
    from: Mailbox,
    /// Where every attempt is logged and undelivered mail becomes a notification.
    db: Db,
}

impl Mailer {
    /// `smtp://host:port` (plain, or STARTTLS with `?tls=required`), `smtps://host` (TLS);
    /// credentials go in the URL's user info. An unusable URL or sender stops startup.
    pub fn from_config(c: &Config, db: Db) -> anyhow::Result<Mailer> {
        let from: Mailbox = c.smtp_from.parse().map_err(|e| {
            anyhow::anyhow!("--smtp-from '{}' is not a mail address: {e}", c.smtp_from)
        })?;
        let smtp = match c.smtp_url.as_ref().filter(|u| !u.0.is_empty()) {
            None => None,
            Some(url) => Some(
                AsyncSmtpTransport::<Tokio1Executor>::from_url(&url.0)
                    .map_err(|e| anyhow::anyhow!("--smtp-url is not usable: {e}"))?
                    .timeout(Some(std::time::Duration::from_secs(30)))
                    .build(),
            ),
        };
        Ok(Mailer { smtp, from, db })
    }

    pub fn smtp_configured(&self) -> bool {
        self.smtp.is_some()
    }
}

/// What happened to one recipient.
#[derive(Debug, Clone, Serialize)]
pub struct Outcome {
    pub recipient: String,
    /// `sent`, `failed` (SMTP refused; a notification was recorded) or `notified` (no SMTP).
    pub status: &'static str,
    pub error: Option<String>,
}

impl Mailer {
    /// Mail to the outside world, on behalf of `user_id`. Messages that cannot go out over SMTP
    /// become one dashboard notification of `kind` for `user_id`, carrying `data`.
    pub async fn send(
        &self,
        user_id: &str,
        recipients: &[String],
        subject: &str,
        body: &str,
        kind: &str,
        data: Value,
    ) -> ApiResult<Vec<Outcome>> {
        let mut outcomes = Vec::with_capacity(recipients.len());
        for to in recipients {
            let outcome = match &self.smtp {
                None => Outcome {
                    recipient: to.clone(),
                    status: "notified",
                    error: None,
                },
                Some(smtp) => match deliver(smtp, &self.from, to, subject, body).await {
                    Ok(()) => Outcome {
                        recipient: to.clone(),
                        status: "sent",
                        error: None,
                    },
                    Err(e) => {
                        tracing::warn!(recipient = %to, error = %e, "mail not sent; recording a dashboard notification");
                        Outcome {
                            recipient: to.clone(),
                            status: "failed",
                            error: Some(e),
                        }
                    }
                },
            };
            outcomes.push(outcome);
        }
        let (user, subject, body, kind) = (
            user_id.to_string(),
            subject.to_string(),
            body.to_string(),
            kind.to_string(),
        );
        let logged = outcomes.clone();
        self.db
            .write(move |c| {
                for o in &logged {
                    email_logs::insert(
                        c,
                        &user,
                        &o.recipient,
                        &subject,
                        &body,
                        o.status,
                        o.error.as_deref(),
                    )?;
                }
                let undelivered: Vec<&str> = logged
                    .iter()
                    .filter(|o| o.status != "sent")
                    .map(|o| o.recipient.as_str())
                    .collect();
                if !undelivered.is_empty() || logged.is_empty() {
                    let mut data = data;
                    if let Some(o) = data.as_object_mut() {
                        o.insert("recipients".into(), serde_json::json!(undelivered));
                    }
                    crate::db::notifications::insert(c, &user, &kind, &subject, &body, &data)?;
                }
                Ok(())
            })
            .await?;
        Ok(outcomes)
    }

    /// Mails one message when SMTP is configured and logs the attempt in `email_logs`; `None`
    /// without SMTP. Unlike `send`, it never adds a dashboard notification.
    pub async fn email_only(
        &self,
        user_id: &str,
        to: &str,
        subject: &str,
        body: &str,
    ) -> ApiResult<Option<Outcome>> {
        self.email_secret(user_id, to, subject, body, body).await
    }

    /// [`Self::email_only`] for a message that carries a secret (a one-time link): `body`
    /// goes out, `logged` (the body with the secret left out) is what `email_logs` keeps.
    pub async fn email_secret(
        &self,
        user_id: &str,
        to: &str,
        subject: &str,
        body: &str,
        logged: &str,
    ) -> ApiResult<Option<Outcome>> {
        let Some(smtp) = &self.smtp else {
            return Ok(None);
        };
        let error = deliver(smtp, &self.from, to, subject, body).await.err();
        let outcome = Outcome {
            recipient: to.to_string(),
            status: if error.is_none() { "sent" } else { "failed" },
            error,
        };
        let (user, o, subject, body) = (
            user_id.to_string(),
            outcome.clone(),
            subject.to_string(),
            logged.to_string(),
        );
        self.db
            .write(move |c| {
                Ok(email_logs::insert(
                    c,
                    &user,
                    &o.recipient,
                    &subject,
                    &body,
                    o.status,
                    o.error.as_deref(),
                )?)
            })
            .await?;
        Ok(Some(outcome))
    }
}

async fn deliver(
    smtp: &AsyncSmtpTransport<Tokio1Executor>,
    from: &Mailbox,
    to: &str,
    subject: &str,
    body: &str,
) -> Result<(), String> {
    let to: Mailbox = to
        .parse()
        .map_err(|e| format!("'{to}' is not a mail address: {e}"))?;
    let msg = Message::builder()
        .from(from.clone())
        .to(to)
        .subject(subject)
        .body(body.to_string())
        .map_err(|e| format!("building the message: {e}"))?;
    smtp.send(msg)
        .await
        .map(|_| ())
        .map_err(|e| format!("SMTP: {e}"))
}
