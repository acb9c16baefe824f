//! Whether a delivery comes from the sender its trigger names: GitHub's
//! `X-Hub-Signature-256` (the body's HMAC-SHA256 with the webhook's secret), GitLab's
//! `X-Gitlab-Token` (the secret itself), or the body's HMAC-SHA256 in a header of the
//! trigger's choice. Every comparison takes the same time whatever the bytes (HMAC's own
//! `verify_slice`; the token's by hand), so a sender cannot learn the secret byte by byte.

use hmac::{Hmac, Mac};
use sha2::Sha256;

use super::Delivery;
use crate::crd::{SecretKeyRef, WorkFlowTrigger};

/// How a trigger's deliveries are verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verification {
    /// Every delivery is taken.
    None,
    /// `X-Hub-Signature-256: sha256=<hex HMAC>`.
    GitHub(SecretKeyRef),
    /// `X-Gitlab-Token: <secret>`.
    GitLab(SecretKeyRef),
    /// `<header>: [sha256=]<hex HMAC>`.
    Hmac {
        header: String,
        secret: SecretKeyRef,
    },
}

impl Verification {
    /// The verification `trigger` names: its webhook's, else its bucket's `hmac`.
    pub fn of(trigger: &WorkFlowTrigger) -> Verification {
        if let Some(webhook) = &trigger.spec.webhook {
            if let Some(github) = &webhook.github {
                return Verification::GitHub(github.secret_ref.clone());
            }
            if let Some(gitlab) = &webhook.gitlab {
                return Verification::GitLab(gitlab.secret_ref.clone());
            }
            if let Some(hmac) = &webhook.hmac {
                return Verification::hmac(hmac);
            }
        }
        match trigger.spec.bucket.as_ref().and_then(|b| b.hmac.as_ref()) {
            Some(hmac) => Verification::hmac(hmac),
            None => Verification::None,
        }
    }

    fn hmac(source: &crate::crd::HmacSource) -> Verification {
        Verification::Hmac {
            header: source.header.to_ascii_lowercase(),
            secret: source.secret_ref.clone(),
        }
    }

    /// The Secret's key it needs.
    pub fn secret(&self) -> Option<&SecretKeyRef> {
        match self {
            Verification::None => None,
            Verification::GitHub(secret) | Verification::GitLab(secret) => Some(secret),
            Verification::Hmac { secret, .. } => Some(secret),
        }
    }

    /// Checks `delivery` with the secret's bytes (empty for [`Verification::None`]).
    ///
    /// # Errors
    /// Why it is refused: the header missing or malformed, or the signature or token wrong.
    /// Never the secret nor what was expected.
    pub fn check(&self, secret: &[u8], delivery: &Delivery) -> Result<(), String> {
        match self {
            Verification::None => Ok(()),
            Verification::GitHub(_) => {
                let header = "x-hub-signature-256";
                let value = delivery.header(header).ok_or(format!("no {header}"))?;
                let hex = value
                    .strip_prefix("sha256=")
                    .ok_or(format!("{header} is not sha256=<hex>"))?;
                check_hmac(secret, &delivery.body, hex, header)
            }
            Verification::GitLab(_) => {
                let header = "x-gitlab-token";
                let value = delivery.header(header).ok_or(format!("no {header}"))?;
                match same_bytes(value.as_bytes(), secret) {
                    true => Ok(()),
                    false => Err(format!("{header} is not the trigger's token")),
                }
            }
            Verification::Hmac { header, .. } => {
                let value = delivery.header(header).ok_or(format!("no {header}"))?;
                let hex = value.strip_prefix("sha256=").unwrap_or(value);
                check_hmac(secret, &delivery.body, hex, header)
            }
        }
    }
}

/// The body's HMAC-SHA256 with `secret`, hex: what a sender puts in its signature header.
pub fn sign(secret: &[u8], body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    hex(&mac.finalize().into_bytes())
}

fn check_hmac(secret: &[u8], body: &[u8], hex_sig: &str, header: &str) -> Result<(), String> {
    let signature = unhex(hex_sig.trim()).ok_or(format!("{header} is not hex"))?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes any key length");
    mac.update(body);
    mac.verify_slice(&signature)
        .map_err(|_| format!("{header} does not match the body"))
}

/// Equal bytes, in a time that depends on the lengths only.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}
