"""``lionops.instrument()`` / ``lionops.uninstrument()``: OpenTelemetry export
as a layer over the core.

This module imports no OpenTelemetry code: ``instrument()`` imports
:mod:`lionops.observability.otel` (which needs the optional ``opentelemetry-api``,
``pip install 'lionops[otel]'``) and registers its observer on the core's
seam (:mod:`lionops.observability.observe`). Until then, and after ``uninstrument()``,
``operate()`` pays one truthiness check per seam. See docs/observability.md.
"""

from __future__ import annotations

import threading
from typing import Any

from ..errors import LionopsError
from . import observe

__all__ = ["instrument", "uninstrument", "InstrumentationError", "OTEL_EXTRA"]

#: The extra that installs what ``instrument()`` needs.
OTEL_EXTRA = "lionops[otel]"

_lock = threading.Lock()
_active: Any = None


class InstrumentationError(LionopsError, ImportError):
    """``instrument()`` cannot run: the OpenTelemetry API is not installed."""


def instrument(tracer_provider: Any = None, *, meter_provider: Any = None, logger_provider: Any = None,
               capture_content: bool | None = None) -> Any:
    """Export every ``operate()`` in this process as OpenTelemetry spans, metrics and events.

    Args:
        tracer_provider: the ``TracerProvider`` to use; the global one when ``None``.
        meter_provider: the ``MeterProvider`` of the metrics; the global one when ``None``.
        logger_provider: the ``LoggerProvider`` of the GenAI events; the global one when ``None``.
        capture_content: also record instructions, answers, tool arguments and
            outputs (redacted of secrets). ``None`` (the default): on when the
            environment variable ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``
            says so (``true``, ``span_only``, ``event_only``, ``span_and_event``), else
            off: spans then carry names, decisions, counts and timings only.

    Returns:
        The active instrumentation (its ``repr`` says what it exports to).
        Calling ``instrument()`` again replaces it.

    Raises:
        InstrumentationError: ``opentelemetry-api`` is not installed
            (``pip install 'lionops[otel]'``).
    """
    global _active
    try:
        from .otel import OpenTelemetryObserver, capture_from_env
    except ImportError as exc:
        raise InstrumentationError(
            f"lionops.instrument() needs the OpenTelemetry API: pip install '{OTEL_EXTRA}' "
            f"(missing: {exc.name or exc})"
        ) from None
    capture = capture_from_env() if capture_content is None else bool(capture_content)
    observer = OpenTelemetryObserver(tracer_provider, meter_provider=meter_provider,
                                     logger_provider=logger_provider, capture_content=capture)
    with _lock:
        if _active is not None:
            observe.remove_observer(_active)
        observe.add_observer(observer)
        _active = observer
    return observer


def uninstrument() -> None:
    """Stop exporting; spans of operations still running are ended normally."""
    global _active
    with _lock:
        if _active is not None:
            observe.remove_observer(_active)
            _active = None
