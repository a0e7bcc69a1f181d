//! Filling scoped state into agent instructions: `"Hello {user:name}, tier {user:tier}"`.

use serde_json::Value;

/// What to do with a placeholder whose key has no value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingKey {
    /// Fail with [`TemplateError::Missing`].
    #[default]
    Error,
    /// Render the placeholder as the empty string.
    Empty,
}

/// Why a template could not be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TemplateError {
    /// A placeholder names a key with no value (and missing keys are errors).
    #[error("template placeholder {{{key}}} has no value")]
    Missing {
        /// The key, with its scope prefix.
        key: String,
    },
    /// A `{` without its `}`, an empty `{}`, or a lone `}`; write `{{` and `}}` for braces.
    #[error("malformed template at byte {at}: {reason} (write {{{{ and }}}} for literal braces)")]
    Malformed {
        /// Byte offset of the problem.
        at: usize,
        /// What is wrong.
        reason: &'static str,
    },
}

/// Replaces each `{key}` with the value `lookup` gives for it (strings as they are, other JSON
/// values in their JSON form). Keys carry their scope prefix (`user:name`, `app:motd`, `topic`).
/// `{{` and `}}` stand for literal braces.
pub fn render(
    template: &str,
    lookup: impl Fn(&str) -> Option<Value>,
    missing: MissingKey,
) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    let mut offset = 0;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        let absolute = offset + at;
        let consumed = if tail.starts_with("{{") {
            out.push('{');
            2
        } else if tail.starts_with("}}") {
            out.push('}');
            2
        } else if tail.starts_with('}') {
            return Err(TemplateError::Malformed {
                at: absolute,
                reason: "a lone `}`",
            });
        } else {
            let close = tail.find('}').ok_or(TemplateError::Malformed {
                at: absolute,
                reason: "a `{` without its `}`",
            })?;
            let key = tail[1..close].trim();
            if key.is_empty() || key.contains('{') {
                return Err(TemplateError::Malformed {
                    at: absolute,
                    reason: "an empty or nested placeholder",
                });
            }
            match (lookup(key), missing) {
                (Some(Value::String(text)), _) => out.push_str(&text),
                (Some(value), _) => out.push_str(&value.to_string()),
                (None, MissingKey::Empty) => {}
                (None, MissingKey::Error) => {
                    return Err(TemplateError::Missing {
                        key: key.to_owned(),
                    })
                }
            }
            close + 1
        };
        rest = &tail[consumed..];
        offset = absolute + consumed;
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn state(key: &str) -> Option<Value> {
        match key {
            "user:name" => Some(json!("Ada")),
            "user:tier" => Some(json!(3)),
            "topic" => Some(json!("rust")),
            _ => None,
        }
    }

    #[test]
    fn placeholders_are_filled_from_scoped_state() {
        let text = render(
            "Hello {user:name}, tier {user:tier}, on {topic}.",
            state,
            MissingKey::Error,
        );
        assert_eq!(text.unwrap(), "Hello Ada, tier 3, on rust.");
    }

    #[test]
    fn double_braces_escape() {
        let text = render("{{literal}} {user:name} }}", state, MissingKey::Error);
        assert_eq!(text.unwrap(), "{literal} Ada }");
    }

    #[test]
    fn a_missing_key_is_an_error_or_empty_by_option() {
        assert_eq!(
            render("hi {user:nick}", state, MissingKey::Error),
            Err(TemplateError::Missing {
                key: "user:nick".into()
            })
        );
        assert_eq!(
            render("hi {user:nick}!", state, MissingKey::Empty).unwrap(),
            "hi !"
        );
    }

    #[test]
    fn malformed_templates_say_where() {
        for (bad, at) in [("oops {name", 5), ("a } b", 2), ("{}", 0), ("{a{b}", 0)] {
            match render(bad, state, MissingKey::Empty) {
                Err(TemplateError::Malformed { at: got, .. }) => assert_eq!(got, at, "{bad}"),
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
