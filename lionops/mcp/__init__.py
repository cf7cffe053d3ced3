"""MCP servers' tools under lionops' governed path (``pip install 'lionops[mcp]'``).

``MCPServer(command=[...])`` (stdio) or ``MCPServer(url=...)`` (streamable
HTTP) is an async context manager; ``await server.tools()`` gives
:class:`MCPTool`\\ s that register on a Branch like functions. Their arguments
are validated against the tool's input schema before any gate; the gate sees
the server's name and the tool's annotations (``invocation.server``,
``invocation.annotations``); definitions are pinned (:class:`ToolPins`).
See docs/mcp.md.
"""

from __future__ import annotations

try:
    import mcp as _sdk  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError("lionops.mcp needs the MCP SDK: pip install 'lionops[mcp]'") from exc

from .errors import (
    MCPDefinitionChangedError,
    MCPError,
    MCPNameError,
    MCPResultTooLargeError,
    MCPServerError,
    MCPTimeoutError,
    MCPToolError,
)
from .pins import ToolPins, definition_hash
from .server import MCPServer
from .tool import MCPTool, ToolAnnotations, deny_destructive

__all__ = [
    "MCPServer", "MCPTool", "ToolAnnotations", "ToolPins", "definition_hash", "deny_destructive",
    "MCPError", "MCPServerError", "MCPTimeoutError", "MCPResultTooLargeError", "MCPToolError",
    "MCPDefinitionChangedError", "MCPNameError",
]
