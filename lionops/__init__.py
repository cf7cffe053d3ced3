"""lionops: one LLM ``operate()`` call as an explicit, inspectable state machine.

Implements ADR-0022 ("Composed branch operation pipeline"): ``Branch.operate``
normalizes a broad call (prepare), builds request/response schemas (schema),
awaits one model adapter (adapter), applies the caller's validation policy
(validate), and only then lets action requests reach tools through one
governed ``act()`` path (gate, act), attaching results (enrich). Every call
yields a transition :class:`Trace`.
"""

from ._alcall import AlcallParams
from ._hooks import HookPoint
from ._limits import UsageLimits
from ._version import __version__
from .branch import Branch
from .errors import (
    BaseURLError,
    CallAlreadyDecidedError,
    CLIError,
    CLIProcessError,
    CLIResultError,
    CLIStreamError,
    CLITimeoutError,
    ConfigurationError,
    EndpointAuthError,
    EndpointConnectionError,
    EndpointError,
    EndpointProviderError,
    EndpointRateLimitError,
    EndpointResponseError,
    EndpointStatusError,
    EndpointTimeoutError,
    LionopsError,
    MaxRoundsError,
    MismatchError,
    MissingAPIKeyError,
    MisspelledKeywordError,
    RefusalError,
    RemovedKeywordError,
    ResumeError,
    SnapshotError,
    ToolChangedError,
    TruncatedOutputError,
    UnknownCallError,
    UsageLimitExceeded,
)
from .fields import FieldModel, Spec
from .governance import Approve, Defer, Deny, PendingCall
from .imodel import iModel
from .middles import Middle
from .middles.api import communicate
from .middles.cli import run_and_collect
from .models import ActionRecord, ActionRequestModel, ActionResponseModel, Instruct, RawOutput, Reason
from .observability import InstrumentationError, instrument, uninstrument
from .operate import operate, prepare_operate_kw
from .operative import Operative, Step
from .params import ActionParam, ChatParam, HandleValidation, ParseParam, RunParam
from .pipeline.act import act
from .run import Ran, RunTrace
from .tools import Tool, ToolInvocation
from .trace import Trace, Traced, TransitionRecord
from .usage import Usage

__all__ = [
    # the operation and its records (ADR-0022)
    "Branch", "iModel", "Tool", "ToolInvocation", "HookPoint", "Instruct", "Reason",
    "ActionRequestModel", "ActionResponseModel", "ActionRecord", "RawOutput",
    "ChatParam", "RunParam", "ParseParam", "ActionParam", "AlcallParams", "HandleValidation",
    "Spec", "FieldModel", "Operative", "Step", "prepare_operate_kw", "operate", "act",
    "Middle", "communicate", "run_and_collect", "Trace", "TransitionRecord", "Traced", "Usage",
    # the run loop (states/run.toml)
    "RunTrace", "Ran", "MaxRoundsError",
    # observability
    "instrument", "uninstrument",
    # the error tree (every one a LionopsError)
    "LionopsError", "ConfigurationError", "BaseURLError", "MissingAPIKeyError", "RemovedKeywordError",
    "MisspelledKeywordError",
    "MismatchError", "RefusalError", "TruncatedOutputError",
    "EndpointError", "EndpointStatusError", "EndpointAuthError", "EndpointRateLimitError",
    "EndpointResponseError", "EndpointProviderError", "EndpointConnectionError", "EndpointTimeoutError",
    "CLIError", "CLIProcessError", "CLIResultError", "CLIStreamError", "CLITimeoutError",
    "InstrumentationError",
    "ResumeError", "UnknownCallError", "CallAlreadyDecidedError", "ToolChangedError", "SnapshotError",
    "UsageLimitExceeded",
    # deferred tool calls
    "Defer", "Approve", "Deny", "PendingCall",
    # usage limits
    "UsageLimits",
    "__version__",
]
