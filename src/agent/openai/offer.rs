//! The tools a turn offers when the agent has MCP servers: the library's, then the servers',
//! rebuilt only when a server's list changed.

use std::sync::Arc;

use parking_lot::Mutex;

use super::tool::ToolSet;
use super::{OpenAiError, Tool};
use crate::agent::McpTools;

/// MCP servers' tools beside the library's, and the combined set at the servers' last version.
pub(super) struct McpOffer {
    tools: McpTools,
    cached: Mutex<Option<(u64, Arc<ToolSet>)>>,
}

impl McpOffer {
    pub(super) fn new(tools: McpTools) -> Self {
        Self {
            tools,
            cached: Mutex::new(None),
        }
    }

    /// `library` followed by the servers' tools now; a server tool whose name a library tool
    /// has is left out (and logged: it became a clash after start, where it is refused).
    pub(super) fn offered(&self, library: &ToolSet) -> Arc<ToolSet> {
        let (version, mcp) = self.tools.current();
        let mut cached = self.cached.lock();
        if let Some((at, set)) = &*cached {
            if *at == version {
                return set.clone();
            }
        }
        let (set, left_out) = library.with(&mcp);
        for name in left_out {
            tracing::warn!(target: "turnstile::mcp", tool = %name,
                "an MCP tool has the name of one of the agent's own tools; it is not offered");
        }
        let set = Arc::new(set);
        *cached = Some((version, set.clone()));
        set
    }
}

/// Refuses an MCP tool named like one of `library`.
pub(super) fn check_clashes(library: &[Arc<dyn Tool>], mcp: &McpTools) -> Result<(), OpenAiError> {
    for (server, name) in mcp.tool_names() {
        if library.iter().any(|t| t.name() == name) {
            return Err(OpenAiError::Config(format!(
                "the tool {name:?} is offered both by with_tool and by the MCP server \
                 {server:?}; rename one, or leave the server's out with --mcp-allow"
            )));
        }
    }
    Ok(())
}
