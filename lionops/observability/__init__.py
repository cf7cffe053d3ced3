"""Observability: the observer seam the machine reports through, and its OpenTelemetry export.

- :mod:`lionops.observability.observe`: the :class:`Observer` protocol and the
  process-wide list of observers the engine, the pipeline and the endpoints
  tell about each operation, adapter call, tool call, step and note;
- :mod:`lionops.observability.instrumentation`: ``instrument()`` and
  ``uninstrument()``, which add and remove the OpenTelemetry observer;
- :mod:`lionops.observability.otel`: that observer (it needs the optional
  ``opentelemetry-api``, so only ``instrument()`` imports it).

The package is one layer, just above the base: it imports only the base
modules (runtime, errors, records, secrets), so every other layer may report
through it.
"""

from .instrumentation import InstrumentationError, instrument, uninstrument
from .observe import Observer, add_observer, remove_observer

# ``observers`` is not re-exported: it is rebound on every add and remove, so
# read it where it lives, ``lionops.observability.observe.observers``.
__all__ = ["Observer", "add_observer", "remove_observer", "instrument", "uninstrument", "InstrumentationError"]
