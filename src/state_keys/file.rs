//! Reading a registry file (TOML or JSON). Both have one shape:
//!
//! ```toml
//! mode = "strict"            # optional: off (default), warn or strict
//! [keys."user:name"]
//! type = "string"            # string, number, integer, boolean, object, array or any
//! default = "friend"         # optional
//! description = "How the agent addresses the user"
//! editable = false           # optional: may a user token set it over HTTP (session keys)
//! ```
//!
//! Unknown fields are refused, so that a typo (`defualt`) is an error naming the field and its
//! line, not a silently missing default.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{KeyType, Mode, StateKey, StateKeys, StateKeysError};

/// Largest registry file read: a registry is a few hundred declarations at most.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    #[serde(default)]
    mode: Mode,
    #[serde(default)]
    keys: BTreeMap<String, Declaration>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Declaration {
    #[serde(rename = "type")]
    ty: KeyType,
    #[serde(default)]
    default: Option<Value>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    editable: bool,
}

fn file_error(path: &Path, detail: impl std::fmt::Display) -> StateKeysError {
    StateKeysError::File {
        path: path.to_path_buf(),
        detail: detail.to_string(),
    }
}

/// Reads `path`, TOML when it ends in `.toml`, else JSON.
pub(super) fn load(path: &Path) -> Result<StateKeys, StateKeysError> {
    let size = std::fs::metadata(path)
        .map_err(|e| file_error(path, e))?
        .len();
    if size > MAX_FILE_BYTES {
        return Err(file_error(
            path,
            format!("{size} bytes; a registry file may have at most {MAX_FILE_BYTES}"),
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| file_error(path, e))?;
    if path.extension().is_some_and(|ext| ext == "toml") {
        from_toml(&text, path)
    } else {
        from_json(&text, path)
    }
}

pub(super) fn from_toml(text: &str, path: &Path) -> Result<StateKeys, StateKeysError> {
    let document: Document = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|span| {
            text.get(..span.start)
                .map_or(1, |head| head.matches('\n').count() + 1)
        });
        let message = e.message().to_owned();
        match line {
            Some(line) => file_error(path, format!("line {line}: {message}")),
            None => file_error(path, message),
        }
    })?;
    build(document, path)
}

pub(super) fn from_json(text: &str, path: &Path) -> Result<StateKeys, StateKeysError> {
    // serde_json's message already ends with "at line L column C".
    let document: Document = serde_json::from_str(text).map_err(|e| file_error(path, e))?;
    build(document, path)
}

fn build(document: Document, path: &Path) -> Result<StateKeys, StateKeysError> {
    let mut keys = StateKeys::new(document.mode);
    for (name, declaration) in document.keys {
        let key = StateKey {
            name,
            ty: declaration.ty,
            default: declaration.default,
            description: declaration.description,
            editable: declaration.editable,
        };
        keys = keys
            .declare(key)
            .map_err(|e| file_error(path, format!("keys: {e}")))?;
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toml_registry_reads_and_a_typo_names_its_field_and_line() {
        let path = Path::new("keys.toml");
        let good = "mode = \"warn\"\n[keys.\"user:name\"]\ntype = \"string\"\ndefault = \"x\"\n";
        let keys = from_toml(good, path).unwrap();
        assert_eq!(keys.mode(), Mode::Warn);
        assert_eq!(keys.default_of("user:name"), Some(&Value::from("x")));
        let typo = "[keys.topic]\ntype = \"string\"\ndefualt = \"x\"\n";
        let err = from_toml(typo, path).unwrap_err().to_string();
        assert!(err.contains("defualt") && err.contains("line 3"), "{err}");
    }
}
