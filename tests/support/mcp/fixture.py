#!/usr/bin/env python3
"""An MCP server for what the reference servers do not do, for the tests: built on the
official Python SDK (`mcp`, which `mcp-server-time` brings), over stdio.

Tools:
- `huge(megabytes)`: a text result of that many megabytes (a server that floods its answer).
- `flip()`: adds the tool `flipped` and tells the client its list changed.
"""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("turnstile-test-fixture", version="1")


@server.tool(description="Returns a text of this many megabytes.")
def huge(megabytes: int) -> str:
    return "x" * (megabytes * 1024 * 1024)


@server.tool(description="Adds the tool `flipped` and says the tool list changed.")
async def flip(ctx: Context) -> str:
    @server.tool(name="flipped", description="Exists once flip ran.")
    def flipped() -> str:
        return "flipped"

    await ctx.session.send_tool_list_changed()
    return "flipped on"


if __name__ == "__main__":
    server.run("stdio")
