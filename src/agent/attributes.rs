//! The turn attributes an OpenAI-style front door sets and the model agent reads: a contract
//! between `turnstile::responses` (which sets them from a request) and
//! [`OpenAiAgent`](crate::OpenAiAgent) (which acts on them), open to any agent and embedder.

/// The attribute holding instructions for this turn (a string): sent as a system message
/// after the agent's own system prompt.
pub const INSTRUCTIONS_ATTRIBUTE: &str = "openai.instructions";

/// The attribute holding tools the caller runs itself (an array of chat-completions function
/// definitions, `{"type": "function", "function": {"name", "description", "parameters",
/// "strict"}}`). They are offered beside the agent's own; a call of one is recorded with
/// [`crate::TurnContext::tool_call_for_caller`] and ends the turn, its result to come with the
/// caller's next message.
pub const TOOLS_ATTRIBUTE: &str = "openai.tools";

/// The attribute holding `tool_choice` for the turn's first request, in chat-completions form
/// (`"auto"`, `"none"`, `"required"` or `{"type": "function", "function": {"name"}}`); later
/// requests of the turn (after its own tools ran) leave the model free.
pub const TOOL_CHOICE_ATTRIBUTE: &str = "openai.tool_choice";

/// The attribute holding `parallel_tool_calls` (a boolean), sent as it is.
pub const PARALLEL_TOOL_CALLS_ATTRIBUTE: &str = "openai.parallel_tool_calls";

/// The attribute holding `response_format` (`{"type": "json_schema", "json_schema": {…}}` or
/// `{"type": "json_object"}`), sent as it is: structured outputs.
pub const RESPONSE_FORMAT_ATTRIBUTE: &str = "openai.response_format";

/// The attribute holding the sampling temperature (a number), overriding the agent's.
pub const TEMPERATURE_ATTRIBUTE: &str = "openai.temperature";

/// The attribute holding `top_p` (a number).
pub const TOP_P_ATTRIBUTE: &str = "openai.top_p";

/// The attribute holding the most tokens the answer may take (a positive integer),
/// overriding the agent's `max_tokens`.
pub const MAX_TOKENS_ATTRIBUTE: &str = "openai.max_tokens";

/// Every attribute [`TurnOptions`] reads: what the agent acts on
/// ([`crate::Agent::attributes`]).
pub const ATTRIBUTES: &[&str] = &[
    INSTRUCTIONS_ATTRIBUTE,
    TOOLS_ATTRIBUTE,
    TOOL_CHOICE_ATTRIBUTE,
    PARALLEL_TOOL_CALLS_ATTRIBUTE,
    RESPONSE_FORMAT_ATTRIBUTE,
    TEMPERATURE_ATTRIBUTE,
    TOP_P_ATTRIBUTE,
    MAX_TOKENS_ATTRIBUTE,
];
