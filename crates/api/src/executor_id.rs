//! The executor ID: a content hash of an executor's build and configuration (docs/design.md §6).
//! Equal IDs are interchangeable executors, different IDs incompatible: `sha256:` and the hex
//! SHA-256 of a canonical encoding of [`ExecutorIdentity`], so that listing order and a manifest's
//! formatting never change the ID and any change of content always does. The encoding is public
//! contract: changing it changes every ID in every cluster and marks the whole fleet incompatible,
//! so pinned vectors in the tests guard it.

use std::{fmt, str::FromStr};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Prefix of every executor ID.
pub const EXECUTOR_ID_PREFIX: &str = "sha256:";

/// First field of the canonical encoding: names the encoding, so that a future one can never
/// collide with it.
const DOMAIN: &[u8] = b"k8sm.executor-id/v1";

/// Everything that makes an executor what it is: its version, its binary, its flags and its static
/// pods.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecutorIdentity {
    /// Version string of the executor, such as "v1.36.3".
    pub version: String,
    /// Hex SHA-256 of the executor binary (64 hex digits, either case), as computed by
    /// [`binary_sha256_of`].
    pub binary_sha256: String,
    /// Command-line flags or configuration settings as (name, value). Order does not matter; a
    /// flag given twice counts twice.
    #[serde(default)]
    pub flags: Vec<(String, String)>,
    /// Static pods as (file name, manifest text in YAML or JSON). Order and formatting do not
    /// matter.
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
        /// The YAML parser's complaint (YAML is the more lenient of the two, so its error is the
        /// useful one).
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

    /// The bytes that are hashed: every field length-prefixed, lists sorted, manifests
    /// canonicalised.
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
        // Sorting by content too keeps the encoding independent of input order even for two pods of
        // the same name.
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

/// Appends `bytes` with its length as a big-endian u64 in front, so that no two field sequences
/// encode alike.
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

/// Compact JSON with object keys sorted bytewise. Written by hand rather than relying on
/// serde_json's map type, whose order depends on the `preserve_order` feature that any crate in a
/// build may switch on.
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
mod tests {
    //! Known vectors and properties of the executor ID.

    use super::*;
    use proptest::prelude::*;

    const SHA_A: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

    const ETCD_YAML: &str = "\
# the etcd of this node
apiVersion: v1
kind: Pod
metadata:
  name: etcd   # trailing comment
  namespace: kube-system
spec:
  containers:
  - name: etcd
    image: registry.k8s.io/etcd:3.6.5
    command: [etcd, --data-dir=/var/lib/etcd]
";

    const ETCD_JSON: &str = r#"{"spec": {"containers": [{"command": ["etcd", "--data-dir=/var/lib/etcd"],
    "image": "registry.k8s.io/etcd:3.6.5", "name": "etcd"}]},
  "kind": "Pod", "metadata": {"namespace": "kube-system", "name": "etcd"}, "apiVersion": "v1"}"#;

    fn identity() -> ExecutorIdentity {
        ExecutorIdentity {
            version: "v1.36.3".into(),
            binary_sha256: SHA_A.into(),
            flags: vec![
                ("--max-pods".into(), "110".into()),
                ("--cgroup-driver".into(), "systemd".into()),
            ],
            static_pods: vec![("etcd.yaml".into(), ETCD_YAML.into())],
        }
    }

    fn id(identity: &ExecutorIdentity) -> String {
        identity.executor_id().expect("valid identity").to_string()
    }

    #[test]
    fn the_encoding_is_the_documented_one() {
        // Rebuilt by hand from the documented layout, so that the code and the description cannot
        // drift apart.
        let identity = ExecutorIdentity {
            version: "1".into(),
            binary_sha256: SHA_A.to_uppercase(),
            flags: vec![("b".into(), "2".into()), ("a".into(), "1".into())],
            static_pods: vec![("p.json".into(), "{\"b\": 1, \"a\": [true, null]}".into())],
        };
        let mut want = Vec::new();
        let field = |want: &mut Vec<u8>, bytes: &[u8]| {
            want.extend_from_slice(&(bytes.len() as u64).to_be_bytes());
            want.extend_from_slice(bytes);
        };
        field(&mut want, b"k8sm.executor-id/v1");
        field(&mut want, b"1");
        field(&mut want, SHA_A.as_bytes());
        want.extend_from_slice(&2u64.to_be_bytes());
        for bytes in [b"a", b"1", b"b", b"2"] {
            field(&mut want, bytes);
        }
        want.extend_from_slice(&1u64.to_be_bytes());
        field(&mut want, b"p.json");
        field(&mut want, br#"{"a":[true,null],"b":1}"#);
        assert_eq!(identity.canonical_encoding().unwrap(), want);
        assert_eq!(id(&identity), format!("sha256:{}", binary_sha256_of(&want)));
    }

    #[test]
    fn pinned_vectors() {
        // Changing one of these changes the ID of every executor in every cluster: only with a new
        // DOMAIN version.
        let empty = ExecutorIdentity {
            binary_sha256: SHA_A.into(),
            ..Default::default()
        };
        assert_eq!(
            id(&empty),
            "sha256:a96d8bd2ffd410c4d658073d09b50a726756d531696d265455a9859e5d1827d1"
        );
        assert_eq!(
            id(&identity()),
            "sha256:273ace8c62b5becc6ef3a90aa42f86cffde97dffb12db89991caf1a480abc199"
        );
    }

    #[test]
    fn binary_sha256_of_known_input() {
        assert_eq!(binary_sha256_of(b""), SHA_A);
        assert_eq!(
            binary_sha256_of(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn the_binary_hash_is_case_insensitive_and_checked() {
        let mut upper = identity();
        upper.binary_sha256 = SHA_A.to_uppercase();
        assert_eq!(id(&upper), id(&identity()));

        for bad in [
            "",
            "abc",
            &SHA_A[1..],
            &format!("{SHA_A}0"),
            &SHA_A.replace('e', "g"),
        ] {
            let mut identity = identity();
            identity.binary_sha256 = bad.to_string();
            let err = identity.executor_id().expect_err(bad);
            assert!(
                matches!(err, ExecutorIdError::InvalidBinarySha256 { .. }),
                "{err}"
            );
        }
    }

    #[test]
    fn yaml_json_comments_and_key_order_do_not_matter() {
        let mut json = identity();
        json.static_pods = vec![("etcd.yaml".into(), ETCD_JSON.into())];
        assert_eq!(id(&json), id(&identity()));
    }

    #[test]
    fn a_float_reads_the_same_in_json_and_yaml() {
        // Found by the executor_id fuzz target: without serde_json's float_roundtrip, the JSON form
        // of this literal parsed to a neighbouring f64 (4.2728694174328995e-87), so the
        // JSON and YAML forms of one manifest had two IDs.
        let with = |text: &str| {
            let mut i = identity();
            i.static_pods = vec![("p.yaml".into(), text.into())];
            id(&i)
        };
        let json = with(r#"{"x": 4.2728694174329e-87}"#);
        assert_eq!(with("x: 4.2728694174329e-87"), json);
        assert_eq!(with("# comment\nx: 4.2728694174329e-87\n"), json);
    }

    #[test]
    fn manifest_content_matters() {
        let mut changed = identity();
        changed.static_pods[0].1 = ETCD_YAML.replace("3.6.5", "3.6.6");
        assert_ne!(id(&changed), id(&identity()));

        // Same text under another file name is another static pod.
        let mut renamed = identity();
        renamed.static_pods[0].0 = "etcd-0.yaml".into();
        assert_ne!(id(&renamed), id(&identity()));

        // A number and the string of it are different content.
        let mut quoted = identity();
        quoted.static_pods = vec![("a.yaml".into(), "x: 1".into())];
        let mut unquoted = quoted.clone();
        unquoted.static_pods[0].1 = "x: \"1\"".into();
        assert_ne!(id(&quoted), id(&unquoted));
    }

    #[test]
    fn a_broken_manifest_names_its_file() {
        let mut broken = identity();
        broken
            .static_pods
            .push(("kube-proxy.yaml".into(), "spec: [unclosed".into()));
        let err = broken.executor_id().unwrap_err();
        assert!(
            matches!(&err, ExecutorIdError::StaticPodManifest { file, .. } if file == "kube-proxy.yaml")
        );
        assert!(err.to_string().contains("kube-proxy.yaml"), "{err}");
    }

    #[test]
    fn executor_id_parses_only_the_canonical_form() {
        let good = format!("sha256:{SHA_A}");
        let parsed: ExecutorId = good.parse().unwrap();
        assert_eq!(parsed.to_string(), good);
        assert_eq!(parsed.hex(), SHA_A);
        assert_eq!(
            serde_json::to_string(&parsed).unwrap(),
            format!("\"{good}\"")
        );
        assert_eq!(
            serde_json::from_str::<ExecutorId>(&format!("\"{good}\"")).unwrap(),
            parsed
        );

        for bad in [
            String::new(),
            SHA_A.to_string(),
            format!("sha256:{}", SHA_A.to_uppercase()),
            format!("sha256:{}", &SHA_A[1..]),
            format!("sha256:{SHA_A}0"),
            format!("sha512:{SHA_A}"),
            format!(" sha256:{SHA_A}"),
            format!("sha256:{}", SHA_A.replace('e', "g")),
        ] {
            let err = bad.parse::<ExecutorId>().expect_err(&bad);
            assert!(
                err.to_string().contains("64 lowercase hexadecimal"),
                "{err}"
            );
            assert!(serde_json::from_value::<ExecutorId>(Value::String(bad)).is_err());
        }
    }

    // ---- properties ----

    fn name() -> impl Strategy<Value = String> {
        "[a-z-]{1,12}"
    }

    fn flags() -> impl Strategy<Value = Vec<(String, String)>> {
        prop::collection::vec((name(), "[a-zA-Z0-9=,./-]{0,12}"), 0..8)
    }

    /// A JSON value that YAML represents faithfully (no floats, whose text forms differ between the
    /// two).
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            "[a-zA-Z0-9 _:./-]{0,12}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// A manifest: always an object at the top, like a Pod.
    fn manifest() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("[a-zA-Z]{1,8}", json_value(), 1..5)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    /// JSON text with object keys in reverse order and generous whitespace.
    fn reversed_json(value: &Value) -> String {
        match value {
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_by(|a, b| b.0.cmp(a.0));
                let body: Vec<String> = entries
                    .into_iter()
                    .map(|(k, v)| {
                        format!("\n  {} :  {}", Value::String(k.clone()), reversed_json(v))
                    })
                    .collect();
                format!("{{{}\n}}", body.join(" ,"))
            }
            Value::Array(items) => format!(
                "[ {} ]",
                items
                    .iter()
                    .map(reversed_json)
                    .collect::<Vec<_>>()
                    .join(" , ")
            ),
            scalar => scalar.to_string(),
        }
    }

    fn identities() -> impl Strategy<Value = ExecutorIdentity> {
        (
            "[a-z0-9.+-]{0,10}",
            "[0-9a-f]{64}",
            flags(),
            prop::collection::btree_map("[a-z-]{1,10}\\.yaml", manifest(), 0..4),
        )
            .prop_map(|(version, binary_sha256, flags, pods)| ExecutorIdentity {
                version,
                binary_sha256,
                flags,
                static_pods: pods
                    .into_iter()
                    .map(|(f, v)| (f, serde_json::to_string(&v).unwrap()))
                    .collect(),
            })
    }

    proptest! {
        #[test]
        fn order_of_flags_and_static_pods_does_not_matter(
            (identity, flags, pods) in identities().prop_flat_map(|i| {
                let flags = Just(i.flags.clone()).prop_shuffle();
                let pods = Just(i.static_pods.clone()).prop_shuffle();
                (Just(i), flags, pods)
            })
        ) {
            let shuffled = ExecutorIdentity { flags, static_pods: pods, ..identity.clone() };
            prop_assert_eq!(id(&shuffled), id(&identity));
        }

        #[test]
        fn formatting_of_a_manifest_does_not_matter(identity in identities(), value in manifest()) {
            let with = |text: String| {
                let mut i = identity.clone();
                i.static_pods.push(("extra.manifest".into(), text));
                id(&i)
            };
            let compact = with(serde_json::to_string(&value).unwrap());
            prop_assert_eq!(&with(serde_json::to_string_pretty(&value).unwrap()), &compact);
            prop_assert_eq!(&with(serde_yaml::to_string(&value).unwrap()), &compact);
            prop_assert_eq!(&with(format!("# comment\n{}", serde_yaml::to_string(&value).unwrap())), &compact);
            prop_assert_eq!(&with(reversed_json(&value)), &compact);
        }

        #[test]
        fn version_and_binary_matter(identity in identities(), version in "[a-z0-9.+-]{0,10}", sha in "[0-9a-f]{64}") {
            let before = id(&identity);
            let other_version = ExecutorIdentity { version: version.clone(), ..identity.clone() };
            prop_assert_eq!(id(&other_version) == before, version == identity.version);
            let other_binary = ExecutorIdentity { binary_sha256: sha.clone(), ..identity.clone() };
            prop_assert_eq!(id(&other_binary) == before, sha == identity.binary_sha256);
        }

        #[test]
        fn every_flag_matters(identity in identities(), index in any::<prop::sample::Index>(), text in "[a-z0-9]{1,4}") {
            let before = id(&identity);
            // Adding a flag, even a duplicate of one already there, is a change.
            let mut added = identity.clone();
            added.flags.push(identity.flags.first().cloned().unwrap_or(("--new".into(), text.clone())));
            prop_assert_ne!(id(&added), before.clone());
            if !identity.flags.is_empty() {
                let i = index.index(identity.flags.len());
                let mut removed = identity.clone();
                removed.flags.remove(i);
                prop_assert_ne!(id(&removed), before.clone());
                let mut renamed = identity.clone();
                renamed.flags[i].0.push_str(&text);
                prop_assert_ne!(id(&renamed), before.clone());
                let mut revalued = identity.clone();
                revalued.flags[i].1.push_str(&text);
                prop_assert_ne!(id(&revalued), before.clone());
                // Moving text from the name into the value is a change too: the encoding is
                // length-prefixed.
                let mut shifted = identity.clone();
                let (name, value) = &mut shifted.flags[i];
                if let Some(last) = name.pop() {
                    value.insert(0, last);
                    prop_assert_ne!(id(&shifted), before);
                }
            }
        }

        #[test]
        fn every_static_pod_matters(identity in identities(), index in any::<prop::sample::Index>(), key in "[A-Z]{1,4}") {
            prop_assume!(!identity.static_pods.is_empty());
            let before = id(&identity);
            let i = index.index(identity.static_pods.len());
            let mut changed = identity.clone();
            let mut value: Value = serde_json::from_str(&changed.static_pods[i].1).unwrap();
            // Keys of generated manifests are mixed case from [a-zA-Z]; an upper-case-only key with
            // a marker value is new
            // or, if present, gets a different value.
            let old = value[&key].take();
            value[&key] = Value::String(format!("changed from {old}"));
            changed.static_pods[i].1 = serde_json::to_string(&value).unwrap();
            prop_assert_ne!(id(&changed), before.clone());

            let mut removed = identity.clone();
            removed.static_pods.remove(i);
            prop_assert_ne!(id(&removed), before);
        }
    }
}
