"""Inherited defaults, kept in one place (ADR-0022 D1, D4).

The operations code records no measurement or rationale for the inherited
values; they are centralized so callers can replace the parameter objects.
The governance bounds below are lionops' own (the shipped code had none):
generous enough not to cut a working gate, hook or batch, small enough that
nothing waits forever or fans out without limit; each is a ``Branch`` keyword.
"""

from __future__ import annotations

from ._alcall import AlcallParams

__all__ = [
    "DEFAULT_PARSE_CALL_PARAMS", "DEFAULT_ACTION_CALL_PARAMS", "FUZZY_KEY_THRESHOLD",
    "DEFAULT_GATE_TIMEOUT", "DEFAULT_OBSERVER_TIMEOUT", "DEFAULT_MAX_REQUESTS",
]

#: ADR-0022 D1 make_parse_param(): serialize parse attempts, three retries.
DEFAULT_PARSE_CALL_PARAMS = AlcallParams(
    retry_initial_delay=1,
    retry_backoff=1.85,
    retry_attempts=3,
    max_concurrent=1,
    throttle_period=1,
)

#: ADR-0022 D4: the default action AlcallParams sets output_dropna=True only.
DEFAULT_ACTION_CALL_PARAMS = AlcallParams(output_dropna=True)

#: Jaro-Winkler similarity at or above which a key is fuzzily matched.
FUZZY_KEY_THRESHOLD = 0.85

#: Seconds one gate check may take before it counts as a denial (``timed_out``).
DEFAULT_GATE_TIMEOUT = 30.0

#: Seconds one hook handler or context-provider writeback may take before it
#: is abandoned and logged.
DEFAULT_OBSERVER_TIMEOUT = 30.0

#: Action requests one ``act()`` call runs; the ones past it get error
#: payloads (decision ``rejected``) and do not run.
DEFAULT_MAX_REQUESTS = 64
