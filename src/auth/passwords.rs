//! argon2id password hashes, computed on blocking threads (each takes tens of milliseconds
//! by design).

use argon2::Argon2;
use argon2::password_hash::{
    PasswordHash, PasswordHasher, PasswordVerifier, SaltString, rand_core::OsRng,
};

pub fn hash(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| anyhow::anyhow!("hashing password: {e}"))
}

pub fn verify(password: &str, stored: &str) -> bool {
    PasswordHash::new(stored)
        .map(|h| {
            Argon2::default()
                .verify_password(password.as_bytes(), &h)
                .is_ok()
        })
        .unwrap_or(false)
}

/// A password hash nobody can match, verified against when the email is unknown so that a
/// failed sign-in takes the same time either way.
pub fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| {
        hash("decoy password that is never valid").expect("argon2 with default params")
    })
}

/// The longest password accepted: argon2 hashes whatever it is given, and a megabyte
/// password would make every sign-in attempt expensive.
pub const MAX_LEN: usize = 256;

/// The password policy, applied wherever a password is set (the CLI, invitations, change and
/// reset): at least `min_len` characters, at most [`MAX_LEN`], and not guessable by zxcvbn
/// (score 3 of 4 at least), which refuses common and breached passwords from its embedded
/// lists, keyboard walks, repeats and words built from `context` (the email, the name).
/// The error says what is wrong, never echoing the password.
pub fn check_policy(password: &str, min_len: usize, context: &[&str]) -> Result<(), String> {
    let n = password.chars().count();
    if n < min_len {
        return Err(format!(
            "the password must be at least {min_len} characters long"
        ));
    }
    if n > MAX_LEN {
        return Err(format!(
            "the password must be at most {MAX_LEN} characters long"
        ));
    }
    // zxcvbn's own inputs: the parts of an email address count as words a guesser knows.
    const SEPARATORS: [char; 6] = ['@', '.', ' ', '_', '-', '+'];
    let mut owned: Vec<String> = Vec::new();
    for c in context {
        owned.push(c.to_lowercase());
        owned.extend(
            c.split(SEPARATORS)
                .filter(|w| w.len() > 2)
                .map(str::to_lowercase),
        );
        // "Jane Doe" and "jane.doe@…" also as "janedoe".
        let local = c.split('@').next().unwrap_or_default();
        owned.push(local.replace(SEPARATORS, "").to_lowercase());
    }
    let words: Vec<&str> = owned
        .iter()
        .map(String::as_str)
        .filter(|w| !w.is_empty())
        .collect();
    // zxcvbn only lowers the score of a password built on the account's own name or
    // address; a guesser who knows the account tries those first, so refuse them outright.
    let squeeze = |s: &str| -> String {
        s.chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let squeezed = squeeze(password);
    for c in context {
        let own = squeeze(c.split('@').next().unwrap_or_default());
        if own.len() >= 4 && squeezed.contains(&own) {
            return Err("the password must not contain the account's email address or name".into());
        }
    }
    let e = zxcvbn::zxcvbn(password, &words);
    if u8::from(e.score()) < 3 {
        let hint = e
            .feedback()
            .and_then(|f| f.warning())
            .map(|w| format!(" ({w})"))
            .unwrap_or_default();
        return Err(format!(
            "the password is too easy to guess{hint}: avoid common passwords, words and \
             patterns, or use a longer passphrase"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::check_policy;

    #[test]
    fn policy_refuses_short_common_and_personal_passwords() {
        assert!(check_policy("short", 12, &[]).is_err());
        assert!(check_policy("password1234", 12, &[]).is_err());
        assert!(check_policy("qwertyuiop123", 12, &[]).is_err());
        assert!(check_policy("alice.smith2024", 12, &["alice.smith@example.com"]).is_err());
        assert!(check_policy("newperson1234", 12, &["new.person@example.test"]).is_err());
        assert!(check_policy(&"x".repeat(300), 12, &[]).is_err());
        assert!(check_policy("correct horse battery staple 42", 12, &[]).is_ok());
        assert!(check_policy("vT9#qL2!mZ8@pR4w", 12, &[]).is_ok());
    }
}
