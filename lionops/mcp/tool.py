"""An MCP server's tool as a :class:`lionops.Tool`."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from pydantic import BaseModel, ConfigDict

from .._frozen import freeze
from .._text import summarize
from ..errors import ConfigurationError, ToolArgumentsError
from ..runtime import current_runtime
from ..tools import Tool, ToolSchema

if TYPE_CHECKING:
    from ..tools import ToolInvocation
    from .server import MCPServer

__all__ = ["MCPTool", "ToolAnnotations", "deny_destructive"]


@dataclass(frozen=True, slots=True)
class ToolAnnotations:
    """A tool's annotations with the defaults of the MCP specification: a tool
    that says nothing is taken as not read-only, destructive, not idempotent and
    open-world. ``destructive`` and ``idempotent`` only mean something for a
    tool that is not read-only (a read-only tool is never destructive).
    They are the server's hints, as trustworthy as the server."""

    read_only: bool = False
    destructive: bool = True
    idempotent: bool = False
    open_world: bool = True
    title: str | None = None

    @classmethod
    def of(cls, hints: dict[str, Any] | None) -> ToolAnnotations:
        """From the ``annotations`` object of a tool's definition (camelCase hints)."""
        hints = hints or {}

        def flag(key: str, default: bool) -> bool:
            value = hints.get(key)
            return value if isinstance(value, bool) else default

        read_only = flag("readOnlyHint", False)
        title = hints.get("title")
        return cls(read_only=read_only, destructive=False if read_only else flag("destructiveHint", True),
                   idempotent=flag("idempotentHint", False), open_world=flag("openWorldHint", True),
                   title=title if isinstance(title, str) else None)


class _NoArguments(BaseModel):
    """The argument model of an MCP tool: unused (its input schema validates), kept for the Tool contract."""

    model_config = ConfigDict(extra="allow")


async def _never(**kwargs: Any) -> Any:
    raise ConfigurationError("an MCP tool is called through its server")


@dataclass(slots=True, repr=False)
class MCPTool(Tool):
    """A tool an MCP server lists, registered on a Branch like a function.

    Its arguments are validated against the tool's ``inputSchema`` (JSON
    Schema, by ``jsonschema``) before any gate; the call goes to the server
    only after every gate allowed it. ``server``: the server's name;
    ``remote_name``: the tool's name on the server (``name`` is what the
    model sees: the prefix, then the remote name with characters other than
    letters, digits and ``_`` replaced by ``_``); ``annotations``: its hints;
    ``definition``: what the server listed; ``definition_hash``: its pin.
    """

    server: str = ""
    remote_name: str = ""
    definition: dict[str, Any] = field(default_factory=dict)
    annotations: ToolAnnotations = field(default_factory=ToolAnnotations)
    definition_hash: str = ""
    connection: MCPServer | None = field(default=None, compare=False)
    _validator: Any = field(init=False, default=None, compare=False)
    _schema: ToolSchema | None = field(init=False, default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.name or not self.name.isidentifier():
            raise ConfigurationError(f"tool name must be an identifier, got {self.name!r}")
        schema = self.definition.get("inputSchema")
        if not isinstance(schema, dict):
            schema = {"type": "object"}
        try:
            kind = validator_for(schema)
            kind.check_schema(schema)
        except SchemaError as exc:
            raise ConfigurationError(
                f"MCP tool {self.remote_name!r} of server {self.server!r}: its input schema is not valid JSON "
                f"Schema: {summarize(exc.message, 200)}") from None
        self._validator = kind(schema)
        self.arguments_model = _NoArguments
        self.is_async = True
        self.positional = ()
        self.description = self.description or str(self.definition.get("description") or "")

    @property
    def input_schema(self) -> dict[str, Any]:
        schema = self.definition.get("inputSchema")
        return dict(schema) if isinstance(schema, dict) else {"type": "object"}

    @property
    def schema(self) -> dict[str, Any]:
        return {"type": "function", "function": {
            "name": self.name, "description": self.description,
            "parameters": json.loads(json.dumps(self.input_schema))}}

    @property
    def offered_schema(self) -> ToolSchema:
        if self._schema is None or self._schema["function"]["description"] != self.description:
            self._schema = ToolSchema(freeze(self.schema))
        return self._schema

    @property
    def span_attributes(self) -> dict[str, str]:
        """Attributes of the MCP semantic conventions for the tool's ``execute_tool`` span."""
        transport = self.connection.transport if self.connection is not None else None
        attributes = {"mcp.method.name": "tools/call", "lionops.mcp.server": self.server}
        if transport is not None:
            attributes["network.transport"] = "pipe" if transport == "stdio" else "tcp"
        return attributes

    def validate_arguments(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """``arguments`` checked against the input schema (every error, in order of its place).

        Raises:
            ToolArgumentsError: they do not satisfy the schema.
        """
        if not isinstance(arguments, dict):
            raise ToolArgumentsError(self.name, f"arguments must be an object, got {type(arguments).__name__}")
        if self._validator.is_valid(arguments):
            return dict(arguments)
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(map(str, e.absolute_path)))
        if errors:
            detail = "; ".join(
                f"{'.'.join(map(str, e.absolute_path)) or '(arguments)'}: {summarize(e.message, 200)}"
                for e in errors[:5])
            raise ToolArgumentsError(self.name, detail)
        return dict(arguments)

    async def _call(self, kwargs: dict[str, Any]) -> Any:
        runner = current_runtime().tool_runner
        if runner is not None:  # a replay serves the recorded result
            return await runner(self, kwargs)
        if self.connection is None:
            raise ConfigurationError(f"MCP tool {self.name!r} has no server to call")
        return await self.connection.call(self, kwargs)

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self.server!r})"


def deny_destructive(invocation: ToolInvocation) -> bool:
    """A gate check: deny a call of an MCP tool whose annotations say it may be
    destructive (by the specification's defaults, any tool that is not
    read-only and does not say ``destructiveHint: false``); allow every other call.

    ``branch.gate(lionops.mcp.deny_destructive)``
    """
    annotations = getattr(invocation.tool, "annotations", None)
    return not (isinstance(annotations, ToolAnnotations) and annotations.destructive)


