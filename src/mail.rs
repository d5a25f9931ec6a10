//! Outgoing mail: the password-reset link of "Forgot your password?", sent through the SMTP
//! server of `GATEHOUSE_SMTP_URL` with `lettre`.
//!
//! Sending happens off the request: the page answers at once, the same whether or not a mail
//! goes out, and a slow or unreachable mail server never holds a request. The work is bounded:
//! at most [`MAX_PENDING`] mails wait or are being sent; beyond that a request is dropped with a
//! warning (the person can ask again). Nothing secret is logged: neither the link nor the
//! address it went to.

use std::sync::Arc;
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};
use tokio::sync::Semaphore;

use crate::config::Config;

/// Mails that may wait for or be in the hands of the SMTP server at once.
pub const MAX_PENDING: usize = 32;
/// How long one conversation with the SMTP server may take, in seconds.
pub const SMTP_TIMEOUT_SECS: u64 = 20;

/// The mail sender of a server with `GATEHOUSE_SMTP_URL` set.
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    pending: Arc<Semaphore>,
}

impl std::fmt::Debug for Mailer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mailer").field("from", &self.from).finish()
    }
}

/// A mail to send: recipient, subject and plain-text body.
pub struct Mail {
    /// The recipient's address.
    pub to: String,
    /// The subject line.
    pub subject: String,
    /// The plain-text body.
    pub body: String,
}

impl Mailer {
    /// The sender `config` describes, or `None` without `GATEHOUSE_SMTP_URL`. Errors: the
    /// URL or the `From` refused by `lettre` (one line naming the variable).
    pub fn from_config(config: &Config) -> Result<Option<Mailer>, String> {
        let Some(url) = &config.identity.smtp_url else {
            return Ok(None);
        };
        let transport = AsyncSmtpTransport::<Tokio1Executor>::from_url(url)
            .map_err(|e| format!("GATEHOUSE_SMTP_URL: {e}"))?
            .timeout(Some(Duration::from_secs(SMTP_TIMEOUT_SECS)))
            .build();
        let from = match &config.identity.smtp_from {
            Some(from) => from.parse::<Mailbox>(),
            None => format!(
                "Gatehouse <gatehouse@{}>",
                config.issuer_url.host_str().unwrap_or("localhost")
            )
            .parse::<Mailbox>(),
        }
        .map_err(|e| {
            format!(
                "GATEHOUSE_SMTP_FROM: {e} (set a mailbox such as Gatehouse <gatehouse@example.com>)"
            )
        })?;
        Ok(Some(Mailer {
            transport,
            from,
            pending: Arc::new(Semaphore::new(MAX_PENDING)),
        }))
    }

    /// Sends `mail` in the background, once `prepare` (also in the background) has made it;
    /// `prepare` returning `None` sends nothing. When [`MAX_PENDING`] mails are already under
    /// way the request is dropped (logged without the address).
    pub fn send_later<F>(self: &Arc<Self>, prepare: F)
    where
        F: Future<Output = Option<Mail>> + Send + 'static,
    {
        let Ok(permit) = Arc::clone(&self.pending).try_acquire_owned() else {
            tracing::warn!("a mail was not sent: too many mails under way");
            return;
        };
        let mailer = Arc::clone(self);
        tokio::spawn(async move {
            let _permit = permit;
            let Some(mail) = prepare.await else {
                return;
            };
            if let Err(e) = mailer.send(mail).await {
                tracing::warn!(error = %e, "a mail was not sent");
            }
        });
    }

    /// Sends `mail` now. Errors: an address `lettre` refuses, or the SMTP server's answer.
    pub async fn send(&self, mail: Mail) -> Result<(), String> {
        let to: Mailbox = mail
            .to
            .parse()
            .map_err(|_| "the recipient is not a mail address".to_string())?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(mail.subject)
            .header(ContentType::TEXT_PLAIN)
            .body(mail.body)
            .map_err(|e| e.to_string())?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}
