"""What the Python MCP clients in tests/ share: the official SDK's imports, whichever major
version is installed, and the two helpers that read its results. Exit 3 (the Rust harness turns
it into a clear failure) when the `mcp` package is missing."""

import re
import sys

try:
    import mcp  # noqa: F401
except ImportError as exc:
    print(f"MISSING_MCP: the Python `mcp` package is not importable ({exc})", file=sys.stderr)
    sys.exit(3)

from mcp import ClientSession, StdioServerParameters  # noqa: E402,F401
from mcp.client.stdio import stdio_client  # noqa: E402,F401

try:  # mcp >= 2
    from mcp.shared.exceptions import MCPError as McpError  # noqa: F401
except ImportError:  # mcp 1.x
    from mcp.shared.exceptions import McpError  # noqa: F401


def attr(obj, name):
    """`obj.snake_name` (mcp >= 2), else `obj.camelName` (mcp 1.x)."""
    if hasattr(obj, name):
        return getattr(obj, name)
    return getattr(obj, re.sub(r"_([a-z])", lambda m: m.group(1).upper(), name))


def text_of(result):
    return "\n".join(c.text for c in result.content if getattr(c, "type", "") == "text")
