"""The errors of :mod:`lionops.mcp`: their own branch of lionops' error tree.

::

    LionopsError
    └── MCPError                           an MCP server or one of its tools
        ├── MCPServerError (RuntimeError)  the server failed: could not start, exited,
        │   │                              wrote a bad frame, answered a malformed result
        │   ├── MCPTimeoutError (TimeoutError)
        │   └── MCPResultTooLargeError
        ├── MCPToolError (RuntimeError)    the tool answered ``isError``
        ├── MCPDefinitionChangedError (ValueError)
        └── MCPNameError (ValueError)      tool names that collide or cannot be offered

Each names the server (``server``); none carries a header, an environment
value or another secret of the connection.
"""

from __future__ import annotations

from ..errors import LionopsError

__all__ = [
    "MCPError", "MCPServerError", "MCPTimeoutError", "MCPResultTooLargeError", "MCPToolError",
    "MCPDefinitionChangedError", "MCPNameError",
]


class MCPError(LionopsError):
    """Base class of the errors of :mod:`lionops.mcp`; ``server`` names the server."""

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        super().__init__(f"MCP server {server!r}: {message}")


class MCPServerError(MCPError, RuntimeError):
    """The server could not be started or reached, exited, wrote a frame that is
    not JSON-RPC, or answered with a malformed result."""


class MCPTimeoutError(MCPServerError, TimeoutError):
    """The server did not start, or a call did not return, within its timeout."""


class MCPResultTooLargeError(MCPServerError):
    """A result is larger than the server's ``max_result_bytes``."""


class MCPToolError(MCPError, RuntimeError):
    """The tool answered with ``isError``: a tool error, recorded like a function's exception."""

    def __init__(self, server: str, tool: str, message: str) -> None:
        self.tool = tool
        super().__init__(server, f"tool {tool!r} failed: {message}")


class MCPDefinitionChangedError(MCPError, ValueError):
    """A tool's definition (name, description, input schema, annotations) differs
    from its pinned one; refused until accepted again (:meth:`ToolPins.accept`).

    ``tools``: the names (as the server lists them) whose definition changed.
    """

    def __init__(self, server: str, tools: list[str]) -> None:
        self.tools = tools
        super().__init__(
            server, f"the definition of {', '.join(map(repr, tools))} changed since it was pinned; "
            "refused until accepted again (ToolPins.accept, or MCPServer.tools(accept=[...]))")


class MCPNameError(MCPError, ValueError):
    """Tool names that collide (after the prefix and the mapping to identifiers) or that are empty."""
