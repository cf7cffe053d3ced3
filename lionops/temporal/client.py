"""Client side: start many operations as workflows and gather their ``Traced`` results."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterable, Mapping
from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from temporalio.client import Client, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ApplicationError, WorkflowAlreadyStartedError

from ..errors import ConfigurationError
from ..trace import Trace, Traced
from ._codec import WORKER_OWNED, decode_kwargs, encode_kwargs
from .branch import DurableBranch
from .errors import DurableArgumentError, DurableOperationError
from .plugin import OperateWorkflow

__all__ = ["run_operations"]


async def run_operations(
    client: Client,
    branch: DurableBranch | str,
    operations: Iterable[Mapping[str, Any]],
    *,
    task_queue: str,
    id_prefix: str | None = None,
    max_starts_in_flight: int = 50,
    execution_timeout: timedelta | None = None,
) -> list[Traced]:
    """Run each mapping of ``operate()`` keywords as one ``lionops.operate``
    workflow on ``task_queue`` and return their ``Traced`` results in order.

    Every worker serving the task queue (with the plugin of ``branch``) takes
    a share. Workflow ids are ``<id_prefix>-<index>``, and an operation starts
    at most once: calling again with the same ``id_prefix`` (a client's retry
    after its own crash or timeout) starts none again; it returns the result of
    each operation that finished (a failure too) and waits for each one still
    running (Temporal keeps closed workflows for the namespace's retention
    period; past it an id may start again). An operation that
    raised gives ``Traced(DurableOperationError(...), trace)``: the others'
    results are kept. Given the ``DurableBranch`` (not only its name), a
    result is rebuilt as its response type (the generated Operative type
    included); otherwise a model result arrives as a dict unless its class
    is importable. The client must have been connected with the plugin
    (its data converter decodes the results).

    Raises:
        DurableArgumentError: a keyword is worker-side or cannot cross to the
            workflow (checked for all operations before any starts).
    """
    durable = branch if isinstance(branch, DurableBranch) else None
    name = branch.name if isinstance(branch, DurableBranch) else branch
    encoded = []
    for i, kw in enumerate(operations):
        bad = [k for k in WORKER_OWNED if k in kw]
        if bad:
            raise DurableArgumentError(f"operation {i}: {bad[0]}= is worker-side in a durable branch")
        encoded.append(encode_kwargs(dict(kw)))
    if max_starts_in_flight < 1:
        raise ConfigurationError(f"max_starts_in_flight must be at least 1, got {max_starts_in_flight}")
    prefix = id_prefix or f"lionops-{name}-{uuid.uuid4().hex[:12]}"
    starts = asyncio.Semaphore(max_starts_in_flight)

    async def one(index: int, kwargs: dict[str, Any]) -> Traced:
        async with starts:
            try:
                handle = await client.start_workflow(
                    OperateWorkflow.run, {"branch": name, "kwargs": kwargs},
                    id=f"{prefix}-{index}", task_queue=task_queue, execution_timeout=execution_timeout,
                    id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                    id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                )
            except WorkflowAlreadyStartedError:  # started before: attach to it, running or closed
                handle = client.get_workflow_handle(f"{prefix}-{index}", result_type=Traced)
        try:
            traced: Traced = await handle.result()
        except WorkflowFailureError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError):
                details = list(cause.details)
                trace = Trace.from_dict(details[0]) if details and isinstance(details[0], dict) else Trace()
                return Traced(DurableOperationError(cause.type or "Exception", cause.message, handle.id), trace)
            return Traced(DurableOperationError(type(cause).__name__, str(cause), handle.id), Trace())
        if isinstance(traced.result, dict) and durable is not None:
            # a generated response type does not travel: rebuild it here
            fmt = await durable.response_type(decode_kwargs(kwargs))
            if isinstance(fmt, type) and issubclass(fmt, BaseModel):
                with contextlib.suppress(ValueError):
                    return Traced(fmt.model_validate(traced.result), traced.trace)
        return traced

    return list(await asyncio.gather(*(one(i, kw) for i, kw in enumerate(encoded))))
