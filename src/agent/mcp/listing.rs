//! What a server's `tools/list` becomes: the tools offered to the model, each checked against
//! the bounds, and the ones left out with the reason. Pure: no I/O.

use std::collections::HashSet;

use serde_json::Value;

use super::{MAX_DESCRIPTION_CHARS, MAX_SCHEMA_BYTES, MAX_TOOLS_PER_SERVER};

/// The longest tool name chat APIs accept.
const MAX_TOOL_NAME_CHARS: usize = 64;

/// A tool as the model is offered it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct ListedTool {
    pub name: String,
    pub description: String,
    /// The input schema, a JSON object.
    pub parameters: Value,
}

/// The tools a listing offers, and what was left out of it.
#[derive(Debug, Default)]
pub(super) struct Listing {
    pub tools: Vec<ListedTool>,
    /// `(tool, why)` for each tool left out.
    pub left_out: Vec<(String, String)>,
}

/// Keeps the tools of `listed` that `allow` names (all when `None`) and that stay within the
/// bounds; an error (the reason) when more than [`MAX_TOOLS_PER_SERVER`] remain.
pub(super) fn accept(
    listed: Vec<rmcp::model::Tool>,
    allow: Option<&HashSet<String>>,
) -> Result<Listing, String> {
    let mut listing = Listing::default();
    let mut names = HashSet::new();
    for tool in listed {
        let name = tool.name.to_string();
        if allow.is_some_and(|allow| !allow.contains(&name)) {
            continue;
        }
        match check(&tool, &names) {
            Ok(()) => {
                names.insert(name.clone());
                listing.tools.push(ListedTool {
                    description: description(&tool),
                    parameters: Value::Object((*tool.input_schema).clone()),
                    name,
                });
            }
            Err(why) => listing
                .left_out
                .push((clip(&name, MAX_TOOL_NAME_CHARS), why)),
        }
    }
    if listing.tools.len() > MAX_TOOLS_PER_SERVER {
        return Err(format!(
            "offers {} tools, more than the {MAX_TOOLS_PER_SERVER} a model is offered from one \
             server; pick the ones to keep with --mcp-allow NAME,NAME",
            listing.tools.len()
        ));
    }
    Ok(listing)
}

/// Why `tool` cannot be offered, if it cannot.
fn check(tool: &rmcp::model::Tool, taken: &HashSet<String>) -> Result<(), String> {
    let name = tool.name.as_ref();
    let valid = !name.is_empty()
        && name.chars().count() <= MAX_TOOL_NAME_CHARS
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'));
    if !valid {
        return Err(format!(
            "its name is not 1 to {MAX_TOOL_NAME_CHARS} letters, digits, '_' or '-', as chat \
             APIs require"
        ));
    }
    if taken.contains(name) {
        return Err("the server lists two tools of this name".into());
    }
    let schema_bytes =
        serde_json::to_vec(tool.input_schema.as_ref()).map_or(usize::MAX, |v| v.len());
    if schema_bytes > MAX_SCHEMA_BYTES {
        return Err(format!(
            "its input schema is {schema_bytes} bytes, over the {MAX_SCHEMA_BYTES}-byte bound"
        ));
    }
    Ok(())
}

/// The description the model reads: the tool's own, else its title, cut to
/// [`MAX_DESCRIPTION_CHARS`].
fn description(tool: &rmcp::model::Tool) -> String {
    let text = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or_default();
    clip(text, MAX_DESCRIPTION_CHARS)
}

/// At most `max` characters of `text`.
fn clip(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;

    fn tool(name: &str, schema: Value) -> rmcp::model::Tool {
        let Value::Object(schema) = schema else {
            panic!("a schema is an object")
        };
        rmcp::model::Tool::new(name.to_owned(), "does things", Arc::new(schema))
    }

    fn object() -> Value {
        json!({"type": "object", "properties": {}})
    }

    #[test]
    fn tools_past_a_bound_are_left_out_with_the_reason() {
        let huge = json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES)});
        let listing = accept(
            vec![
                tool("echo", object()),
                tool("echo", object()),
                tool("has space", object()),
                tool(&"n".repeat(65), object()),
                tool("huge", huge),
            ],
            None,
        )
        .unwrap();
        let kept: Vec<&str> = listing.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(kept, ["echo"]);
        let why: Vec<&str> = listing.left_out.iter().map(|(_, w)| w.as_str()).collect();
        assert!(why[0].contains("two tools of this name"), "{why:?}");
        assert!(why[1].contains("letters, digits"), "{why:?}");
        assert!(why[2].contains("letters, digits"), "{why:?}");
        assert!(why[3].contains("bytes, over the"), "{why:?}");
        assert_eq!(
            listing.left_out[2].0.chars().count(),
            64,
            "names are shown cut"
        );
    }

    #[test]
    fn the_allow_list_picks_before_the_count_is_bounded() {
        let many: Vec<_> = (0..=MAX_TOOLS_PER_SERVER)
            .map(|i| tool(&format!("t{i}"), object()))
            .collect();
        let error = accept(many.clone(), None).unwrap_err();
        assert!(error.contains("--mcp-allow"), "{error}");
        let allow: HashSet<String> = ["t3".to_owned(), "t7".to_owned()].into();
        let listing = accept(many, Some(&allow)).unwrap();
        let kept: Vec<&str> = listing.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(kept, ["t3", "t7"]);
    }

    #[test]
    fn descriptions_are_cut() {
        let mut long = tool("t", object());
        long.description = Some("d".repeat(5000).into());
        let listing = accept(vec![long], None).unwrap();
        assert_eq!(
            listing.tools[0].description.chars().count(),
            MAX_DESCRIPTION_CHARS
        );
        assert_eq!(listing.tools[0].parameters, object());
    }
}
