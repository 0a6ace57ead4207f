"""An MCP server over stdio for the integration's MCP test: one tool, ``lookup``, that
appends a line to the file named by its first argument each time it runs.

    python tests/integrations/mcp_server.py EFFECTS_FILE
"""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("docs")


@server.tool()
def lookup(topic: str) -> str:
    with open(sys.argv[1], "a") as f:
        f.write("lookup\n")
    return f"page about {topic}"


if __name__ == "__main__":
    server.run()
