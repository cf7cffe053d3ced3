"""lionops: one LLM ``operate()`` call as an explicit, inspectable state machine.

Implements ADR-0022 ("Composed branch operation pipeline"): ``Branch.operate``
normalizes a broad call (prepare), builds request/response schemas (schema),
awaits one model adapter (adapter), applies the caller's validation policy
(validate), and only then lets action requests reach tools through one
governed ``act()`` path (gate, act), attaching results (enrich). Every call
yields a transition :class:`Trace`.
"""

from .act import act
from .middles import Middle
from .middles.api import communicate
from .middles.cli import run_and_collect
from .alcall import AlcallParams
from .branch import Branch
from .errors import (
    ConfigurationError,
    LionopsError,
    MismatchError,
    MisspelledKeywordError,
    RefusalError,
    RemovedKeywordError,
    TruncatedOutputError,
)
from .fields import FieldModel, Spec
from .hooks import HookPoint
from .imodel import iModel
from .instrumentation import InstrumentationError, instrument, uninstrument
from .models import ActionRecord, ActionRequestModel, ActionResponseModel, Instruct, RawOutput, Reason
from .operate import operate, prepare_operate_kw
from .operative import Operative, Step
from .params import ActionParam, ChatParam, HandleValidation, ParseParam, RunParam
from .tools import Tool, ToolInvocation
from .trace import Trace, Traced, TransitionRecord

from .errors import (
    EndpointAuthError,
    EndpointConnectionError,
    EndpointError,
    EndpointProviderError,
    EndpointRateLimitError,
    EndpointResponseError,
    EndpointStatusError,
    EndpointTimeoutError,
)

__version__ = "0.1.0"

__all__ = [
    "Branch", "iModel", "Tool", "ToolInvocation", "HookPoint", "Instruct", "Reason",
    "ActionRequestModel", "ActionResponseModel", "ActionRecord", "ChatParam", "RunParam", "ParseParam",
    "ActionParam", "AlcallParams", "HandleValidation", "Spec", "FieldModel", "Operative",
    "Step", "prepare_operate_kw", "operate", "act", "Middle", "communicate",
    "run_and_collect", "Trace", "TransitionRecord", "Traced", "ConfigurationError",
    "LionopsError", "MismatchError", "MisspelledKeywordError", "RefusalError", "TruncatedOutputError",
    "RemovedKeywordError", "RawOutput", "__version__",
]
__all__ += [
    "EndpointError", "EndpointStatusError", "EndpointAuthError", "EndpointRateLimitError",
    "EndpointResponseError", "EndpointConnectionError", "EndpointTimeoutError",
]
__all__ += ["EndpointProviderError"]

from .errors import CLIError, CLIProcessError, CLIResultError, CLIStreamError, CLITimeoutError

__all__ += ["instrument", "uninstrument", "InstrumentationError"]
__all__ += ["CLIError", "CLIProcessError", "CLIResultError", "CLIStreamError", "CLITimeoutError"]
