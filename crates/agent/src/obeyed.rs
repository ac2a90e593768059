//! Tokens are single-use: the agent remembers every token it obeyed (by its SHA-256) until the
//! token expires, and refuses it after that (401). A token sniffed from one kamikaze therefore
//! cannot restart the node again, whatever body it comes with.
//!
//! `run` exits after each kamikaze, so what it remembers must outlive the process: with a file
//! (`--obeyed-tokens-file`, on a hostPath in the DaemonSet) the list is written before the kamikaze
//! is obeyed and read at start.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sha2::{Digest, Sha256};

use crate::gate::Refusal;

/// How long past its `exp` a token is remembered: the node's clock may be behind the apiserver's.
pub const CLOCK_SKEW: Duration = Duration::from_secs(300);

/// The tokens obeyed and not yet expired: SHA-256 (hex) → until when (Unix seconds) to refuse them.
pub struct ObeyedTokens {
    remembered: Mutex<HashMap<String, u64>>,
    file: Option<PathBuf>,
}

impl ObeyedTokens {
    /// Remembered in memory only (the simulator, tests).
    pub fn in_memory() -> Self {
        Self {
            remembered: Mutex::new(HashMap::new()),
            file: None,
        }
    }

    /// Remembered in `file` too, starting with what it holds (a missing file holds nothing).
    pub fn in_file(file: PathBuf) -> std::io::Result<Self> {
        let remembered = match std::fs::read_to_string(&file) {
            Ok(text) => parse(&text, unix_now()),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(error) => return Err(error),
        };
        Ok(Self {
            remembered: Mutex::new(remembered),
            file: Some(file),
        })
    }

    /// Remembers `token`, about to be obeyed; refuses it if it was obeyed before. The token was
    /// verified by the apiserver already, so its expiry claim can be believed.
    pub fn claim(&self, token: &str) -> Result<(), Refusal> {
        let until = expiry(token)?.saturating_add(CLOCK_SKEW.as_secs());
        let hash = hex::encode(Sha256::digest(token.as_bytes()));
        let now = unix_now();
        let mut remembered = self
            .remembered
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        remembered.retain(|_, until| *until > now);
        if remembered.contains_key(&hash) {
            return Err(Refusal::Replayed);
        }
        if until <= now {
            // Expired beyond the allowance: the apiserver refuses it from now on.
            return Ok(());
        }
        remembered.insert(hash.clone(), until);
        if let Some(file) = &self.file
            && let Err(error) = write(file, &remembered)
        {
            // Obeyed without the record, the token could be replayed to the next agent.
            remembered.remove(&hash);
            return Err(Refusal::Unavailable(format!(
                "cannot record the token as obeyed in {}: {error}",
                file.display()
            )));
        }
        Ok(())
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs())
}

/// The `exp` claim of a JWT (Unix seconds).
fn expiry(token: &str) -> Result<u64, Refusal> {
    let invalid = |why: &str| Refusal::InvalidToken {
        audience: "the kamikaze".into(),
        why: format!(
            "{why}: a token without an expiry cannot be remembered until it expires, so it is not obeyed"
        ),
    };
    let payload = token
        .split('.')
        .nth(1)
        .ok_or_else(|| invalid("not a JWT"))?;
    let payload = URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .map_err(|_| invalid("its claims are not base64url"))?;
    let claims: serde_json::Value =
        serde_json::from_slice(&payload).map_err(|_| invalid("its claims are not JSON"))?;
    claims
        .get("exp")
        .and_then(serde_json::Value::as_u64)
        .ok_or_else(|| invalid("it has no exp claim"))
}

/// The lines `HASH UNTIL` of a file, those still to be refused at `now`.
fn parse(text: &str, now: u64) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (hash, until) = line.split_once(' ')?;
            let until = until.trim().parse::<u64>().ok()?;
            (hash.len() == 64 && until > now).then(|| (hash.to_owned(), until))
        })
        .collect()
}

/// Replaces `file` with `remembered`, atomically (a crash leaves the old list or the new one, never
/// half).
fn write(file: &Path, remembered: &HashMap<String, u64>) -> std::io::Result<()> {
    let mut text = String::new();
    for (hash, until) in remembered {
        text.push_str(&format!("{hash} {until}\n"));
    }
    let temporary = file.with_extension("tmp");
    std::fs::write(&temporary, text)?;
    std::fs::File::open(&temporary)?.sync_all()?;
    std::fs::rename(&temporary, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token as the TokenRequest API issues it (the signature is not checked here: the apiserver
    /// checked it).
    fn token(exp: Option<u64>, nonce: &str) -> String {
        let claims = match exp {
            Some(exp) => {
                serde_json::json!({ "aud": ["k8s.mesosphere.io/kamikaze"], "exp": exp, "jti": nonce })
            }
            None => serde_json::json!({ "jti": nonce }),
        };
        format!(
            "eyJhbGciOiJSUzI1NiJ9.{}.c2lnbmF0dXJl",
            URL_SAFE_NO_PAD.encode(claims.to_string())
        )
    }

    #[test]
    fn a_token_is_obeyed_once() {
        let obeyed = ObeyedTokens::in_memory();
        let in_ten_minutes = unix_now() + 600;
        let first = token(Some(in_ten_minutes), "a");
        assert_eq!(obeyed.claim(&first), Ok(()));
        let replay = obeyed.claim(&first).unwrap_err();
        assert_eq!(replay, Refusal::Replayed);
        assert_eq!(replay.status(), 401);
        assert!(
            replay.to_string().contains("already obeyed"),
            "the answer says why: {replay}"
        );
        assert_eq!(
            obeyed.claim(&token(Some(in_ten_minutes), "b")),
            Ok(()),
            "another token of the same controller"
        );
    }

    #[test]
    fn a_token_is_remembered_until_it_expires_and_the_skew_allowance() {
        let now = unix_now();
        let obeyed = ObeyedTokens::in_memory();
        let expired = token(Some(now - CLOCK_SKEW.as_secs() - 1), "old");
        assert_eq!(obeyed.claim(&expired), Ok(()));
        assert_eq!(
            obeyed.claim(&expired),
            Ok(()),
            "expired beyond the allowance: forgotten (the apiserver refuses it anyway)"
        );
        assert!(obeyed.remembered.lock().unwrap().is_empty());
        let recent = token(Some(now - 1), "recent");
        assert_eq!(obeyed.claim(&recent), Ok(()));
        assert_eq!(obeyed.claim(&recent), Err(Refusal::Replayed));
    }

    #[test]
    fn a_token_without_an_expiry_is_refused() {
        let obeyed = ObeyedTokens::in_memory();
        for bad in [
            token(None, "x"),
            "opaque-token".to_owned(),
            "a.!!!.c".to_owned(),
            format!("a.{}.c", URL_SAFE_NO_PAD.encode("not json")),
        ] {
            let refusal = obeyed.claim(&bad).expect_err(&bad);
            assert_eq!(refusal.status(), 401, "{bad}: {refusal}");
        }
    }

    #[test]
    fn the_file_outlives_the_agent() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("obeyed-tokens");
        let used = token(Some(unix_now() + 600), "a");
        ObeyedTokens::in_file(file.clone())
            .unwrap()
            .claim(&used)
            .unwrap();
        let next = ObeyedTokens::in_file(file.clone()).unwrap();
        assert_eq!(
            next.claim(&used),
            Err(Refusal::Replayed),
            "the next agent refuses it"
        );
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(!text.contains(&used), "only the hash is kept: {text}");
        assert_eq!(
            parse("garbage\nabc 1\n", 0),
            HashMap::new(),
            "malformed lines are skipped"
        );
        let unwritable = ObeyedTokens::in_file(dir.path().join("no-such-dir/obeyed")).unwrap();
        let refusal = unwritable
            .claim(&token(Some(unix_now() + 600), "b"))
            .unwrap_err();
        assert_eq!(
            refusal.status(),
            503,
            "not obeyed without the record: {refusal}"
        );
    }
}
