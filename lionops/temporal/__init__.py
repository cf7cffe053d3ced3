"""lionops on Temporal: ``operate()`` as durable workflow code (see docs/temporal.md).

Install with ``pip install 'lionops[temporal]'``. Temporal's Python SDK runs
on asyncio only: workflows, workers and the client helpers here need an
asyncio event loop (the rest of lionops also runs on trio).
"""

from .approval import (
    MAX_DECISIONS_BYTES,
    MAX_DECISIONS_DEPTH,
    ApprovalRecord,
    HumanApproval,
    approve,
    decide,
    deny,
    pending_approvals,
)
from .branch import ActivityConfig, DurableBranch, WorkflowClock, idempotency_key
from .client import run_operations
from .errors import (
    ApprovalError,
    DurableArgumentError,
    DurableError,
    DurableOperationError,
    NotInWorkflowError,
    RemoteError,
)
from .plugin import LionopsPayloadConverter, LionopsPlugin, OperateWorkflow, data_converter

__all__ = [
    "DurableBranch", "LionopsPlugin", "ActivityConfig", "HumanApproval", "ApprovalRecord",
    "decide", "approve", "deny", "pending_approvals", "run_operations", "idempotency_key", "WorkflowClock",
    "OperateWorkflow", "LionopsPayloadConverter", "data_converter",
    "DurableError", "DurableArgumentError", "NotInWorkflowError", "RemoteError", "DurableOperationError",
    "ApprovalError", "MAX_DECISIONS_BYTES", "MAX_DECISIONS_DEPTH",
]
