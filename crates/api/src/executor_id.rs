//! The executor ID: a content hash of an executor's build and configuration (docs/design.md §6).
//!
//! Equal IDs are interchangeable executors; different IDs are incompatible. The ID is `sha256:` followed by the hex
//! SHA-256 of a length-prefixed canonical encoding of [`ExecutorIdentity`], so that the order in which flags and
//! static pods are listed, and how a manifest is formatted (YAML or JSON, key order, whitespace, comments), never
//! changes the ID, while any change of content always does.
//!
//! The encoding is part of the public contract: changing it changes every ID in every cluster, which marks the
//! whole fleet incompatible. The pinned vectors in the tests guard it.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Prefix of every executor ID.
pub const EXECUTOR_ID_PREFIX: &str = "sha256:";

/// First field of the canonical encoding: names the encoding, so that a future one can never collide with it.
const DOMAIN: &[u8] = b"k8sm.executor-id/v1";

/// Everything that makes an executor what it is: its version, its binary, its flags and its static pods.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorIdentity {
    /// Version string of the executor, such as "v1.36.3".
    pub version: String,
    /// Hex SHA-256 of the executor binary (64 hex digits, either case), as computed by [`binary_sha256_of`].
    pub binary_sha256: String,
    /// Command-line flags or configuration settings as (name, value). Order does not matter; a flag given twice
    /// counts twice.
    #[serde(default)]
    pub flags: Vec<(String, String)>,
    /// Static pods as (file name, manifest text in YAML or JSON). Order and formatting do not matter.
    #[serde(default)]
    pub static_pods: Vec<(String, String)>,
}

/// Why an [`ExecutorIdentity`] has no ID.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorIdError {
    /// The binary hash is not a SHA-256 in hex.
    #[error("binary SHA-256 {value:?} is not 64 hexadecimal digits")]
    InvalidBinarySha256 {
        /// The rejected value.
        value: String,
    },
    /// A static pod manifest is neither JSON nor YAML.
    #[error("static pod manifest {file:?} is neither valid JSON nor valid YAML")]
    StaticPodManifest {
        /// File name of the manifest.
        file: String,
        /// The YAML parser's complaint (YAML is the more lenient of the two, so its error is the useful one).
        #[source]
        source: serde_yaml::Error,
    },
}

impl ExecutorIdentity {
    /// The executor ID of this identity.
    pub fn executor_id(&self) -> Result<ExecutorId, ExecutorIdError> {
        let encoding = self.canonical_encoding()?;
        Ok(ExecutorId(format!(
            "{EXECUTOR_ID_PREFIX}{}",
            hex::encode(Sha256::digest(&encoding))
        )))
    }

    /// The bytes that are hashed: every field length-prefixed, lists sorted, manifests canonicalised.
    fn canonical_encoding(&self) -> Result<Vec<u8>, ExecutorIdError> {
        if self.binary_sha256.len() != 64
            || !self.binary_sha256.bytes().all(|b| b.is_ascii_hexdigit())
        {
            return Err(ExecutorIdError::InvalidBinarySha256 {
                value: self.binary_sha256.clone(),
            });
        }
        let mut flags: Vec<&(String, String)> = self.flags.iter().collect();
        flags.sort();
        let mut pods = self
            .static_pods
            .iter()
            .map(|(file, text)| Ok((file.as_str(), canonical_manifest(file, text)?)))
            .collect::<Result<Vec<_>, ExecutorIdError>>()?;
        // Sorting by content too keeps the encoding independent of input order even for two pods of the same name.
        pods.sort();

        let mut out = Vec::new();
        put(&mut out, DOMAIN);
        put(&mut out, self.version.as_bytes());
        put(&mut out, self.binary_sha256.to_ascii_lowercase().as_bytes());
        put_count(&mut out, flags.len());
        for (name, value) in flags {
            put(&mut out, name.as_bytes());
            put(&mut out, value.as_bytes());
        }
        put_count(&mut out, pods.len());
        for (file, manifest) in pods {
            put(&mut out, file.as_bytes());
            put(&mut out, manifest.as_bytes());
        }
        Ok(out)
    }
}

/// Appends `bytes` with its length as a big-endian u64 in front, so that no two field sequences encode alike.
fn put(out: &mut Vec<u8>, bytes: &[u8]) {
    put_count(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_count(out: &mut Vec<u8>, n: usize) {
    out.extend_from_slice(&(n as u64).to_be_bytes());
}

/// Parses a manifest (JSON, else YAML) and writes it back as compact JSON with sorted keys.
fn canonical_manifest(file: &str, text: &str) -> Result<String, ExecutorIdError> {
    let value: Value = match serde_json::from_str(text) {
        Ok(value) => value,
        Err(_) => {
            serde_yaml::from_str(text).map_err(|source| ExecutorIdError::StaticPodManifest {
                file: file.to_owned(),
                source,
            })?
        }
    };
    let mut out = String::new();
    write_canonical(&value, &mut out);
    Ok(out)
}

/// Compact JSON with object keys sorted bytewise. Written by hand rather than relying on serde_json's map type,
/// whose order depends on the `preserve_order` feature that any crate in a build may switch on.
fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, value)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(value, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Hex SHA-256 (lowercase) of an executor binary's bytes, for [`ExecutorIdentity::binary_sha256`].
pub fn binary_sha256_of(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// An executor ID: `sha256:` followed by 64 lowercase hex digits.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ExecutorId(String);

/// Why a string is not an [`ExecutorId`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid executor ID {input:?}: expected \"sha256:\" followed by 64 lowercase hexadecimal digits"
)]
pub struct InvalidExecutorId {
    /// The rejected text.
    pub input: String,
}

impl ExecutorId {
    /// The ID as text, such as it appears in the executor-id annotation.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 64 hex digits after `sha256:`.
    pub fn hex(&self) -> &str {
        &self.0[EXECUTOR_ID_PREFIX.len()..]
    }
}

impl FromStr for ExecutorId {
    type Err = InvalidExecutorId;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let valid = s.strip_prefix(EXECUTOR_ID_PREFIX).is_some_and(|hex| {
            hex.len() == 64
                && hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if valid {
            Ok(Self(s.to_owned()))
        } else {
            Err(InvalidExecutorId {
                input: s.to_owned(),
            })
        }
    }
}

impl fmt::Display for ExecutorId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for ExecutorId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Serialize for ExecutorId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for ExecutorId {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests;
