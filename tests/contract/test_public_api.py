"""The public surface of ``lionops`` is pinned: a name added or dropped is a
deliberate change of this list."""

from __future__ import annotations

import lionops

PUBLIC = {
    # the operation and its records (ADR-0022)
    "Branch", "iModel", "Tool", "ToolInvocation", "HookPoint", "Instruct", "Reason",
    "ActionRequestModel", "ActionResponseModel", "ActionRecord", "RawOutput",
    "ChatParam", "RunParam", "ParseParam", "ActionParam", "AlcallParams", "HandleValidation",
    "Spec", "FieldModel", "Operative", "Step", "prepare_operate_kw", "operate", "act",
    "Middle", "communicate", "run_and_collect", "Trace", "TransitionRecord", "Traced", "Usage",
    "RunTrace", "Ran", "MaxRoundsError",
    "instrument", "uninstrument",
    "LionopsError", "ConfigurationError", "BaseURLError", "MissingAPIKeyError", "RemovedKeywordError",
    "MisspelledKeywordError",
    "MismatchError", "RefusalError", "TruncatedOutputError",
    "EndpointError", "EndpointStatusError", "EndpointAuthError", "EndpointRateLimitError",
    "EndpointResponseError", "EndpointProviderError", "EndpointConnectionError", "EndpointTimeoutError",
    "CLIError", "CLIProcessError", "CLIResultError", "CLIStreamError", "CLITimeoutError",
    "InstrumentationError",
    "ResumeError", "UnknownCallError", "CallAlreadyDecidedError", "ToolChangedError", "SnapshotError",
    "UsageLimitExceeded",
    "Defer", "Approve", "Deny", "PendingCall", "UsageLimits",
    "__version__",
}


def test_all_is_pinned_exactly() -> None:
    assert len(lionops.__all__) == len(set(lionops.__all__))
    assert set(lionops.__all__) == PUBLIC


def test_every_public_name_is_importable() -> None:
    for name in lionops.__all__:
        assert getattr(lionops, name) is not None, name


def test_every_public_error_is_a_lionops_error() -> None:
    for name in lionops.__all__:
        value = getattr(lionops, name)
        if isinstance(value, type) and issubclass(value, BaseException):
            assert issubclass(value, lionops.LionopsError), name


def test_internal_packages_say_so() -> None:
    import lionops.engine
    import lionops.pipeline

    for package in (lionops.engine, lionops.pipeline):
        assert (package.__doc__ or "").startswith("Internal:")
        assert not getattr(package, "__all__", [])
