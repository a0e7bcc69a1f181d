//! What one turn's caller asks of the model beside its messages, read from the turn's
//! attributes: instructions, tools the caller runs itself, how tools may be chosen, the shape
//! of the answer and sampling. The OpenAI front door sets them from a response's request; any
//! embedder may. Pure: no I/O.

use std::collections::HashSet;

use serde_json::Value;

use super::error::OpenAiError;
use crate::agent::attributes::*;
use crate::agent::TurnContext;

/// Most tools a caller may declare for one turn: OpenAI's own bound on a request's tools.
pub const MAX_CALLER_TOOLS: usize = 128;

/// One turn's requests to the model, beside its messages.
#[derive(Debug, Default, Clone)]
pub(super) struct TurnOptions {
    pub instructions: Option<String>,
    /// The caller's tools' definitions, and their names.
    pub tools: Vec<Value>,
    pub tool_names: HashSet<String>,
    pub tool_choice: Option<Value>,
    pub parallel_tool_calls: Option<bool>,
    pub response_format: Option<Value>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub max_tokens: Option<u64>,
}

fn refused(name: &str, detail: impl Into<String>) -> OpenAiError {
    OpenAiError::TurnOption {
        name: name.to_owned(),
        detail: detail.into(),
    }
}

impl TurnOptions {
    /// The options `turn`'s attributes give, or which one is malformed.
    pub(super) fn of(turn: &TurnContext) -> Result<Self, OpenAiError> {
        Self::read(|name| turn.attribute(name))
    }

    pub(super) fn read<'a>(get: impl Fn(&str) -> Option<&'a Value>) -> Result<Self, OpenAiError> {
        let mut options = Self::default();
        if let Some(value) = get(INSTRUCTIONS_ATTRIBUTE) {
            let text = value
                .as_str()
                .ok_or_else(|| refused(INSTRUCTIONS_ATTRIBUTE, "not a string"))?;
            options.instructions = (!text.is_empty()).then(|| text.to_owned());
        }
        if let Some(value) = get(TOOLS_ATTRIBUTE) {
            options.set_tools(value)?;
        }
        options.tool_choice = get(TOOL_CHOICE_ATTRIBUTE).cloned();
        if let Some(value) = get(PARALLEL_TOOL_CALLS_ATTRIBUTE) {
            let parallel = value
                .as_bool()
                .ok_or_else(|| refused(PARALLEL_TOOL_CALLS_ATTRIBUTE, "not a boolean"))?;
            options.parallel_tool_calls = Some(parallel);
        }
        if let Some(value) = get(RESPONSE_FORMAT_ATTRIBUTE) {
            if !value.get("type").is_some_and(Value::is_string) {
                return Err(refused(
                    RESPONSE_FORMAT_ATTRIBUTE,
                    "an object with a `type`",
                ));
            }
            options.response_format = Some(value.clone());
        }
        let number = |name: &str| -> Result<Option<f64>, OpenAiError> {
            get(name)
                .map(|v| v.as_f64().ok_or_else(|| refused(name, "not a number")))
                .transpose()
        };
        options.temperature = number(TEMPERATURE_ATTRIBUTE)?;
        options.top_p = number(TOP_P_ATTRIBUTE)?;
        if let Some(value) = get(MAX_TOKENS_ATTRIBUTE) {
            let most = value
                .as_u64()
                .filter(|n| *n > 0)
                .ok_or_else(|| refused(MAX_TOKENS_ATTRIBUTE, "not a positive integer"))?;
            options.max_tokens = Some(most);
        }
        Ok(options)
    }

    fn set_tools(&mut self, value: &Value) -> Result<(), OpenAiError> {
        let tools = value
            .as_array()
            .ok_or_else(|| refused(TOOLS_ATTRIBUTE, "not an array"))?;
        if tools.len() > MAX_CALLER_TOOLS {
            return Err(refused(
                TOOLS_ATTRIBUTE,
                format!("{} tools; at most {MAX_CALLER_TOOLS}", tools.len()),
            ));
        }
        for tool in tools {
            let name = tool
                .pointer("/function/name")
                .and_then(Value::as_str)
                .filter(|_| tool.get("type").and_then(Value::as_str) == Some("function"))
                .ok_or_else(|| {
                    refused(
                        TOOLS_ATTRIBUTE,
                        "a tool that is not a named function definition",
                    )
                })?;
            if !self.tool_names.insert(name.to_owned()) {
                return Err(refused(
                    TOOLS_ATTRIBUTE,
                    format!("{name:?} is declared twice"),
                ));
            }
        }
        self.tools = tools.clone();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde_json::json;

    use super::*;

    fn read(pairs: &[(&str, Value)]) -> Result<TurnOptions, OpenAiError> {
        let map: HashMap<String, Value> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        TurnOptions::read(|name| map.get(name))
    }

    #[test]
    fn the_attributes_are_read_and_bad_ones_named() {
        let tool = json!({"type": "function", "function": {"name": "add", "parameters": {}}});
        let options = read(&[
            (INSTRUCTIONS_ATTRIBUTE, json!("be brief")),
            (TOOLS_ATTRIBUTE, json!([tool])),
            (TOOL_CHOICE_ATTRIBUTE, json!("required")),
            (PARALLEL_TOOL_CALLS_ATTRIBUTE, json!(false)),
            (RESPONSE_FORMAT_ATTRIBUTE, json!({"type": "json_object"})),
            (TEMPERATURE_ATTRIBUTE, json!(0.5)),
            (MAX_TOKENS_ATTRIBUTE, json!(64)),
        ])
        .unwrap();
        assert_eq!(options.instructions.as_deref(), Some("be brief"));
        assert!(options.tool_names.contains("add"));
        assert_eq!(options.tool_choice, Some(json!("required")));
        assert_eq!(options.parallel_tool_calls, Some(false));
        assert_eq!(
            (options.temperature, options.max_tokens),
            (Some(0.5), Some(64))
        );
        for (name, bad) in [
            (TOOLS_ATTRIBUTE, json!([{"type": "web_search"}])),
            (TOOLS_ATTRIBUTE, json!([tool, tool])),
            (MAX_TOKENS_ATTRIBUTE, json!(0)),
            (TEMPERATURE_ATTRIBUTE, json!("hot")),
            (RESPONSE_FORMAT_ATTRIBUTE, json!("json")),
        ] {
            let error = read(&[(name, bad.clone())]).unwrap_err().to_string();
            assert!(error.contains(name), "{bad}: {error}");
        }
    }
}
