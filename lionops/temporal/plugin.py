"""``LionopsPlugin``: one temporalio plugin for the client, the worker and the replayer.

It sets the data converter (pydantic models, lionops ``Trace`` and
``Traced``), passes lionops and its dependencies through the workflow
sandbox (they are imported once, outside it; workflow code only calls
them), registers the activities of each durable branch and the generic
``lionops.operate`` workflow, and makes a :class:`~lionops.errors.LionopsError`
raised by workflow code fail the workflow instead of retrying its task
(the same history would raise it again). A worker holds its own connection
to each MCP server its branches' tools call through (``lionops.mcp``), open
while the worker runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import sys
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

# anyio picks its backend module by name at first use (importlib, which the
# workflow sandbox does not pass through): imported here, outside the sandbox,
# a replay on a fresh worker finds it loaded instead of importing it in the
# sandbox (where its thread classes are restricted).
import anyio._backends._asyncio  # noqa: F401
from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import DataConverter, DefaultPayloadConverter, EncodingPayloadConverter
from temporalio.exceptions import ApplicationError
from temporalio.plugin import SimplePlugin
from temporalio.worker import Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner

from .._json import loads as bounded_json
from ..errors import ConfigurationError, LionopsError
from ..trace import Trace, Traced
from ._codec import decode_kwargs, decode_result, encode_result
from .branch import DurableBranch
from .errors import DurableArgumentError

__all__ = ["LionopsPlugin", "LionopsPayloadConverter", "data_converter", "OperateWorkflow", "PASSTHROUGH_MODULES"]

#: Modules imported outside the workflow sandbox.
PASSTHROUGH_MODULES = (
    "lionops", "pydantic", "pydantic_core", "anyio", "sniffio", "httpx2", "httpcore2", "transitions",
    "json_repair", "rapidfuzz", "tenacity",
    # lionops.mcp: the input-schema validator and the SDK's types (a durable MCP tool validates in the workflow)
    "jsonschema", "jsonschema_specifications", "referencing", "rpds", "attrs", "mcp", "mcp_types",
)

_ENCODING = "json/lionops"


class _LionopsEncoding(EncodingPayloadConverter):
    """``Trace`` and ``Traced`` as JSON (``Trace.to_dict``; results tagged by kind)."""

    @property
    def encoding(self) -> str:
        return _ENCODING

    def to_payload(self, value: Any) -> Payload | None:
        if isinstance(value, Traced):
            doc = {"type": "Traced", "result": encode_result(value.result), "trace": value.trace.to_dict()}
        elif isinstance(value, Trace):
            doc = {"type": "Trace", "trace": value.to_dict()}
        else:
            return None
        return Payload(metadata={"encoding": _ENCODING.encode()}, data=json.dumps(doc).encode())

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        doc = bounded_json(payload.data, what="a lionops payload")
        trace = Trace.from_dict(doc["trace"])
        if doc.get("type") == "Trace":
            return trace
        return Traced(decode_result(doc["result"]), trace)


class LionopsPayloadConverter(PydanticPayloadConverter):
    """temporalio's pydantic payload converter, with lionops ``Trace``/``Traced`` first.

    Temporal makes one for every workflow run; they share one set of encoding
    converters (stateless but for the pydantic converter's bounded cache of
    type adapters), made with the first, so a run reuses the type adapters
    earlier runs built instead of building its own."""

    _shared: dict[bytes, EncodingPayloadConverter] | None = None

    def __init__(self) -> None:
        shared = LionopsPayloadConverter._shared
        if shared is None:
            super().__init__()
            shared = LionopsPayloadConverter._shared = {_ENCODING.encode(): _LionopsEncoding(), **self.converters}
        self.converters = shared


#: The data converter the plugin installs.
data_converter = DataConverter(payload_converter_class=LionopsPayloadConverter)


def _converter(existing: DataConverter | None) -> DataConverter:
    if existing is None or existing.payload_converter_class in (DefaultPayloadConverter, PydanticPayloadConverter):
        if existing is None:
            return data_converter
        return dataclasses.replace(existing, payload_converter_class=LionopsPayloadConverter)
    return existing  # a caller's own converter is kept (it must handle pydantic values)


def _runner(existing: WorkflowRunner | None) -> WorkflowRunner:
    if existing is None:
        existing = SandboxedWorkflowRunner()
    if isinstance(existing, SandboxedWorkflowRunner):
        return dataclasses.replace(
            existing, restrictions=existing.restrictions.with_passthrough_modules(*PASSTHROUGH_MODULES)
        )
    return existing


_REGISTRY: dict[str, DurableBranch] = {}


@workflow.defn(name="lionops.operate")
class OperateWorkflow:
    """One ``operate_traced`` of a registered durable branch (what
    :func:`~lionops.temporal.run_operations` starts). A raised exception
    fails the workflow with its type, message and the trace as details."""

    @workflow.run
    async def run(self, request: dict[str, Any]) -> Traced:
        durable = _REGISTRY.get(request["branch"])
        if durable is None:
            raise ApplicationError(
                f"no durable branch {request['branch']!r} on this worker; known: {sorted(_REGISTRY)}",
                type="ConfigurationError", non_retryable=True,
            )
        try:
            return await durable.operate_traced(**decode_kwargs(request.get("kwargs") or {}))
        except Exception as exc:
            traces = durable.branch().traces
            details = [traces[-1].to_dict()] if traces else []
            raise ApplicationError(str(exc), *details, type=type(exc).__name__, non_retryable=True) from None


def tool_connections(durable_branches: tuple[DurableBranch, ...]) -> list[Any]:
    """The MCP servers (``lionops.mcp.MCPServer``, a configuration) the branches'
    tools call through, each once; empty unless ``lionops.mcp`` was imported
    (an MCP tool exists only then, so the SDK is never imported here)."""
    mcp = sys.modules.get("lionops.mcp")
    if mcp is None:
        return []
    servers: dict[int, Any] = {}
    for durable in durable_branches:
        for tool in durable.tools:
            if isinstance(tool, mcp.MCPTool) and tool.connection is not None:
                servers.setdefault(id(tool.connection), tool.connection)
    return list(servers.values())


class LionopsPlugin(SimplePlugin):
    """A temporalio plugin (``Client.connect(..., plugins=[...])``,
    ``Worker(..., plugins=[...])``, ``Replayer(..., plugins=[...])``) for
    these durable branches. Names must be unique.

    A worker running with it starts its own connection to every MCP server
    the branches' tools name (``MCPTool.connection``, the server's
    configuration) before it polls, and stops them when it stops; its tool
    activities call through them. A replayer starts none.
    """

    def __init__(self, *durable_branches: DurableBranch) -> None:
        names = [b.name for b in durable_branches]
        for b in durable_branches:
            if not isinstance(b, DurableBranch):
                raise DurableArgumentError(f"LionopsPlugin takes DurableBranch objects, got {type(b).__name__}")
        if len(set(names)) != len(names):
            raise ConfigurationError(f"durable branch names must be unique, got {names}")
        self.durable_branches = tuple(durable_branches)
        for b in durable_branches:
            _REGISTRY[b.name] = b
        super().__init__(
            "lionops.LionopsPlugin",
            data_converter=_converter,
            # made when a worker is configured, not when the plugin is: a workflow
            # module that makes its plugin at import time is imported again by the
            # sandbox for every run, and never configures a worker there
            activities=self._activities,
            workflows=[OperateWorkflow],
            workflow_runner=_runner,
            workflow_failure_exception_types=[LionopsError],
        )

    def _activities(self, existing: Sequence[Callable[..., Any]] | None) -> list[Callable[..., Any]]:
        return [*(existing or ()), *(fn for b in self.durable_branches for fn in b.activities())]

    async def run_worker(self, worker: Worker, next: Callable[[Worker], Awaitable[None]]) -> None:
        async with contextlib.AsyncExitStack() as stack:
            for server in tool_connections(self.durable_branches):
                if not server.running:  # one the caller keeps open is used as it is
                    await stack.enter_async_context(server)
            await super().run_worker(worker, next)

    def __repr__(self) -> str:
        return f"LionopsPlugin({', '.join(b.name for b in self.durable_branches)})"
