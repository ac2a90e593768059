//! Executor IDs (docs/design.md §6): parsing arbitrary text as an ID, and computing the ID of
//! arbitrary identities. Properties: nothing panics; the parser accepts exactly `sha256:` + 64
//! lowercase hex digits, and what it accepts re-renders to the same text and parses again to the
//! same ID (also through serde); an identity's ID does not depend on the order of its flags and
//! static pods, the case of its binary hash, or how a manifest is formatted (compact or pretty
//! JSON, YAML, a comment), while adding a flag changes it.
#![no_main]

use arbitrary::Arbitrary;
use k8sm_api::{EXECUTOR_ID_PREFIX, ExecutorId, ExecutorIdError, ExecutorIdentity};
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

#[derive(Arbitrary, Debug)]
struct Input {
    /// Parsed as an executor ID.
    text: String,
    /// Builds a canonical ID text, so that the accepting path is reached as often as the rejecting
    /// one.
    canonical: Option<[u8; 32]>,
    identity: Identity,
    /// Seed of the shuffles of flags and static pods.
    seed: u64,
}

#[derive(Arbitrary, Debug)]
struct Identity {
    version: String,
    binary: Binary,
    flags: Vec<(String, String)>,
    static_pods: Vec<(String, Manifest)>,
}

#[derive(Arbitrary, Debug)]
enum Binary {
    /// A valid hash, in lower or upper case.
    Hash([u8; 32], bool),
    /// Anything.
    Text(String),
}

#[derive(Arbitrary, Debug)]
enum Manifest {
    /// A value, written out in several formats.
    Value(Json),
    /// Any text, which may be neither JSON nor YAML.
    Text(String),
}

/// A JSON value, finite by construction.
#[derive(Arbitrary, Debug)]
enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Float(f64),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    fn to_value(&self, depth: usize) -> Value {
        match self {
            _ if depth > 8 => Value::Null,
            Self::Null => Value::Null,
            Self::Bool(b) => Value::Bool(*b),
            Self::Int(i) => Value::from(*i),
            Self::Uint(u) => Value::from(*u),
            // NaN and infinities have no JSON form (`from_f64` refuses them).
            Self::Float(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Self::String(s) => Value::String(s.clone()),
            Self::Array(items) => {
                Value::Array(items.iter().map(|v| v.to_value(depth + 1)).collect())
            }
            Self::Object(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_value(depth + 1)))
                    .collect(),
            ),
        }
    }
}

/// The grammar of an ID, written independently of the parser.
fn is_canonical(text: &str) -> bool {
    let Some(hex) = text.strip_prefix("sha256:") else {
        return false;
    };
    hex.len() == 64 && hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'))
}

fn check_parse(text: &str) {
    let parsed = text.parse::<ExecutorId>();
    assert_eq!(parsed.is_ok(), is_canonical(text), "{text:?}: {parsed:?}");
    match parsed {
        Ok(id) => {
            assert_eq!(id.to_string(), text);
            assert_eq!(id.as_str(), text);
            assert_eq!(id.hex(), &text[EXECUTOR_ID_PREFIX.len()..]);
            assert_eq!(id.to_string().parse::<ExecutorId>().as_ref(), Ok(&id));
            let json = serde_json::to_string(&id).expect("an ID serialises");
            assert_eq!(serde_json::from_str::<ExecutorId>(&json).ok(), Some(id));
        }
        Err(e) => {
            assert_eq!(e.input, text);
            let json = serde_json::to_string(text).expect("a string serialises");
            assert!(serde_json::from_str::<ExecutorId>(&json).is_err());
        }
    }
}

/// Fisher-Yates with a xorshift, so that a crash replays.
fn shuffle<T>(items: &mut [T], seed: u64) {
    let mut state = seed | 1;
    for i in (1..items.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        items.swap(i, (state % (i as u64 + 1)) as usize);
    }
}

fn hex(bytes: &[u8; 32]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn id_of(identity: &ExecutorIdentity) -> Result<ExecutorId, ExecutorIdError> {
    identity.executor_id()
}

fn check_identity(input: &Identity, seed: u64) {
    let binary_sha256 = match &input.binary {
        Binary::Hash(bytes, upper) if *upper => hex(bytes).to_ascii_uppercase(),
        Binary::Hash(bytes, _) => hex(bytes),
        Binary::Text(text) => text.clone(),
    };
    // Values are written as compact JSON here; their other formats are checked one by one below.
    let values: Vec<Option<Value>> = input
        .static_pods
        .iter()
        .map(|(_, m)| match m {
            Manifest::Value(json) => Some(json.to_value(0)),
            Manifest::Text(_) => None,
        })
        .collect();
    let static_pods: Vec<(String, String)> = input
        .static_pods
        .iter()
        .zip(&values)
        .map(|((file, m), value)| {
            let text = match (m, value) {
                (_, Some(v)) => serde_json::to_string(v).expect("a value serialises"),
                (Manifest::Text(text), None) => text.clone(),
                (Manifest::Value(_), None) => unreachable!("values are converted above"),
            };
            (file.clone(), text)
        })
        .collect();
    let identity = ExecutorIdentity {
        version: input.version.clone(),
        binary_sha256: binary_sha256.clone(),
        flags: input.flags.clone(),
        static_pods,
    };
    let id = id_of(&identity);

    let valid_binary =
        binary_sha256.len() == 64 && binary_sha256.chars().all(|c| c.is_ascii_hexdigit());
    match &id {
        Ok(id) => {
            assert!(valid_binary, "{binary_sha256:?} accepted");
            check_parse(id.as_str());
        }
        Err(ExecutorIdError::InvalidBinarySha256 { value }) => {
            assert!(!valid_binary, "{binary_sha256:?} rejected");
            assert_eq!(value, &binary_sha256);
        }
        Err(ExecutorIdError::StaticPodManifest { file, .. }) => {
            assert!(valid_binary, "the binary is checked first");
            assert!(identity.static_pods.iter().any(|(f, _)| f == file));
        }
    }
    let key = |r: &Result<ExecutorId, ExecutorIdError>| {
        r.as_ref()
            .map(ExecutorId::to_string)
            .map_err(|e| e.to_string())
    };

    // The order of flags and static pods never matters.
    let mut shuffled = identity.clone();
    shuffle(&mut shuffled.flags, seed);
    shuffle(&mut shuffled.static_pods, seed.rotate_left(17));
    let shuffled_id = id_of(&shuffled);
    match (&id, &shuffled_id) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "shuffling changed the ID"),
        // Which broken manifest is named may depend on the order; that it fails may not.
        (
            Err(ExecutorIdError::StaticPodManifest { .. }),
            Err(ExecutorIdError::StaticPodManifest { .. }),
        ) => {}
        (a, b) => assert_eq!(key(a), key(b), "shuffling changed the outcome"),
    }

    let Ok(id) = id else { return };

    // The case of the binary hash never matters.
    let mut upper = identity.clone();
    upper.binary_sha256 = binary_sha256.to_ascii_uppercase();
    assert_eq!(
        id_of(&upper).ok().as_ref(),
        Some(&id),
        "case of the binary hash"
    );

    // Any extra flag changes the ID.
    let mut more = identity.clone();
    more.flags.push(("--fuzz".into(), input.version.clone()));
    assert_ne!(id_of(&more).ok().as_ref(), Some(&id), "an added flag");

    // Formatting of a manifest never matters: each value rewritten as pretty JSON, as YAML, and as
    // commented YAML.
    for (i, value) in values.iter().enumerate() {
        let Some(value) = value else { continue };
        let pretty = serde_json::to_string_pretty(value).expect("a value serialises");
        let yaml = serde_yaml::to_string(value).expect("a value serialises as YAML");
        for (format, text) in [
            ("pretty JSON", pretty),
            ("YAML", yaml.clone()),
            ("commented YAML", format!("# a comment\n{yaml}")),
        ] {
            let mut other = identity.clone();
            other.static_pods[i].1 = text.clone();
            let other_id = id_of(&other);
            assert_eq!(
                other_id.as_ref().ok(),
                Some(&id),
                "manifest {i} as {format} changes the ID: {value:?} written as {text:?}: {other_id:?}"
            );
        }
    }
}

fuzz_target!(|input: Input| {
    check_parse(&input.text);
    if let Some(bytes) = &input.canonical {
        let text = format!("sha256:{}", hex(bytes));
        check_parse(&text);
        check_parse(&text.to_ascii_uppercase());
        check_parse(&format!("{text} "));
    }
    check_identity(&input.identity, input.seed);
});
