"""Usage limits of a branch: checked before the effect they limit.

``Branch(limits=UsageLimits(requests=..., input_tokens=..., output_tokens=...,
total_tokens=..., tool_calls=..., cost=...))`` bounds what a branch may
spend over all its operations (``branch.usage`` holds what it spent).

- Before each model request (the ``adapter`` phase, before the Middle is
  awaited): a ``requests`` limit the request would pass, or a token or
  ``cost`` limit already reached, ends the operation at ``over_limit`` →
  ``raised`` with :class:`~lionops.errors.UsageLimitExceeded`; no request is made.
- Before each parse-model request (a re-ask of the parse model when the
  answer held no JSON): the same check, with the operation's own requests
  counted; going over ends the operation at ``over_limit`` too, and the
  re-ask is not made. Each parse-model request counts as a request, with
  its tokens and cost (the trace keeps its facts in ``meta["parse_requests"]``).
- Before each tool call (in ``act()``, after every gate allowed it): a
  ``tool_calls`` limit the call would pass makes the call's decision
  ``over_limit``; the tool is not invoked, the model gets an error payload.

Tokens are the counts the model endpoint reports for each request: the
normalized ``tokens`` record when the adapter gives one (input inclusive of
cache, output inclusive of reasoning), else its ``usage`` as reported
(``prompt_tokens``/``completion_tokens`` of an API endpoint,
``input_tokens``/``output_tokens`` of a CLI agent).
``cost`` (US dollars) comes from the CLI's own ``cost_usd`` when it reports
one, else from ``genai-prices`` (the ``prices`` extra) for the provider and
model of the request; when a ``cost`` limit is set and no price is known,
the operation fails with ``UsageLimitExceeded``'s sibling
:class:`~lionops.errors.ConfigurationError`, never counting a silent zero.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from .errors import ArgumentTypeError, ConfigurationError, SnapshotError, UsageLimitExceeded

__all__ = [
    "UsageLimits", "UsageSoFar", "check_request", "check_parse_request", "claim_tool_call", "count_request",
    "note_parse_request", "price_requests", "reserve_request",
]

#: the limits checked before a model request, in the order they are checked
_REQUEST_LIMITS = ("requests", "input_tokens", "output_tokens", "total_tokens", "cost")


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """Upper bounds on a branch's usage; ``None`` (the default of each) is no bound."""

    requests: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    tool_calls: int | None = None
    cost: float | None = None

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if value is None:
                continue
            kinds = (int, float) if name == "cost" else (int,)
            if isinstance(value, bool) or not isinstance(value, kinds):
                kind = "a number" if name == "cost" else "an int"
                raise ArgumentTypeError(f"UsageLimits.{name} must be {kind} or None, got {type(value).__name__}")
            if value < 0:
                raise ConfigurationError(f"UsageLimits.{name} must be >= 0 or None, got {value!r}")


@dataclass(slots=True)
class UsageSoFar:
    """What a branch has used: model requests, their reported tokens, tool calls, cost (USD)."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    total_tokens: int = 0
    tool_calls: int = 0
    cost: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> UsageSoFar:
        """Rebuild from :meth:`as_dict` (a snapshot's ``usage``): SnapshotError
        for anything but known fields holding counts (ints) and a cost
        (a number), none negative."""
        if not isinstance(data, dict):
            raise SnapshotError(f"usage must be an object, got {type(data).__name__}")
        known = cls.__dataclass_fields__
        for name, value in data.items():
            kinds = (int, float) if name == "cost" else (int,)
            if name not in known or isinstance(value, bool) or not isinstance(value, kinds) or not value >= 0:
                raise SnapshotError(f"usage {str(name)[:40]!r} must be a known count, not negative")
        return cls(**data)


def check_request(limits: UsageLimits | None, used: UsageSoFar) -> UsageLimitExceeded | None:
    """The error a next model request would meet, else ``None``: one more
    request past ``requests``, or a token or cost limit already reached."""
    if limits is None:
        return None
    for name in _REQUEST_LIMITS:
        value = getattr(limits, name)
        if value is None:
            continue
        spent = getattr(used, name)
        if (spent + 1 > value) if name == "requests" else (spent >= value):
            return UsageLimitExceeded(name, value, used.as_dict())
    return None


def reserve_request(limits: UsageLimits | None, used: UsageSoFar) -> UsageLimitExceeded | None:
    """Check the next model request and count it at once, before it is
    made: concurrent operations of a branch (and of its forks, which share
    its usage) each take a slot, so together they never pass ``requests``,
    and a request that fails after it was sent still counts. The error,
    with nothing counted, when the request would pass a limit."""
    over = check_request(limits, used)
    if over is None:
        used.requests += 1
    return over


def claim_tool_call(limits: UsageLimits | None, used: UsageSoFar) -> UsageLimitExceeded | None:
    """Count one tool call, or return the error when it would pass ``tool_calls``."""
    cap = limits.tool_calls if limits is not None else None
    if cap is not None and used.tool_calls + 1 > cap:
        return UsageLimitExceeded("tool_calls", cap, used.as_dict())
    used.tool_calls += 1
    return None


def _int(raw: dict[str, Any], *names: str) -> int:
    for name in names:
        value = raw.get(name)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return 0


def _counts(meta: dict[str, Any]) -> dict[str, int]:
    """The request's token counts: the normalized record (``tokens``: input
    inclusive of cache, output inclusive of reasoning) when the adapter gives
    one, else read from the provider's ``usage`` as reported."""
    tokens = meta.get("tokens")
    if isinstance(tokens, dict) and tokens:
        counts = {k: _int(tokens, k) for k in ("input_tokens", "output_tokens", "cache_read_tokens",
                                                  "cache_write_tokens", "total_tokens")}
    else:
        raw = meta.get("usage")
        raw = raw if isinstance(raw, dict) else {}
        counts = {"input_tokens": _int(raw, "prompt_tokens", "input_tokens"),
                  "output_tokens": _int(raw, "completion_tokens", "output_tokens"),
                  "total_tokens": _int(raw, "total_tokens")}
    counts["total_tokens"] = counts["total_tokens"] or counts["input_tokens"] + counts["output_tokens"]
    return counts


def count_request(limits: UsageLimits | None, used: UsageSoFar, meta: dict[str, Any], *,
                  reserved: bool = False) -> None:
    """Add one model request and the usage its adapter reported (``meta``:
    the trace facts, ``tokens`` or ``usage``, ``provider``, ``model``,
    ``cost_usd``), and each parse-model request the operation made
    (``meta["parse_requests"]``, the same facts each). With ``reserved``
    the model request itself was counted already (:func:`reserve_request`):
    only its tokens and cost are added."""
    _count_one(limits, used, meta, request=not reserved)
    for facts in meta.get("parse_requests") or ():
        if isinstance(facts, dict):
            _count_one(limits, used, facts)


def note_parse_request(meta: dict[str, Any], facts: dict[str, Any]) -> None:
    """Keep the facts of one parse-model request on the operation's trace
    (``meta["parse_requests"]``), so :func:`count_request` counts it."""
    meta.setdefault("parse_requests", []).append(facts)


def check_parse_request(limits: UsageLimits | None, used: UsageSoFar,
                        meta: dict[str, Any]) -> UsageLimitExceeded | None:
    """The error a parse-model request would meet, else ``None``: the usage
    so far (the operation's model request counted when it was reserved) with
    the operation's own usage added (its model request's tokens and the
    parse-model requests before this one, ``meta``), checked as before any
    model request."""
    if limits is None:
        return None
    trial = UsageSoFar(**used.as_dict())
    count_request(limits, trial, meta, reserved=True)
    return check_request(limits, trial)


def price_requests(limits: UsageLimits | None, meta: dict[str, Any]) -> None:
    """Set ``cost_usd`` on the facts of the operation's model request and of
    each parse-model request, where the request happened (a durable model
    activity), so counting them later looks no price up. Only under a
    ``cost`` limit; ConfigurationError when no price is known."""
    if limits is None or limits.cost is None:
        return
    for facts in [meta, *(f for f in meta.get("parse_requests") or () if isinstance(f, dict))]:
        reported = facts.get("cost_usd")
        if not (isinstance(reported, (int, float)) and not isinstance(reported, bool)):
            facts["cost_usd"] = _price(facts.get("provider"), facts.get("model"), _counts(facts))


def _count_one(limits: UsageLimits | None, used: UsageSoFar, meta: dict[str, Any], *, request: bool = True) -> None:
    if request:
        used.requests += 1
    if "tokens" not in meta and "usage" not in meta and (limits is None or limits.cost is None):
        return  # nothing reported and no price to work out: every count stays as it is
    counts = _counts(meta)
    used.input_tokens += counts["input_tokens"]
    used.output_tokens += counts["output_tokens"]
    used.total_tokens += counts["total_tokens"]
    if limits is None or limits.cost is None:
        return
    reported = meta.get("cost_usd")
    if isinstance(reported, (int, float)) and not isinstance(reported, bool):
        used.cost += float(reported)
        return
    used.cost += _price(meta.get("provider"), meta.get("model"), counts)


def _price(provider: Any, model: Any, counts: dict[str, int]) -> float:
    """US dollars for one request from genai-prices; ConfigurationError when unknown."""
    try:
        from genai_prices import Usage, calc_price
    except ImportError:
        raise ConfigurationError("a cost limit needs prices: install lionops[prices] (genai-prices)") from None
    if not isinstance(model, str) or not model:
        raise ConfigurationError("a cost limit is set but the model of the request is unknown: no price")
    try:
        usage = Usage(**{k: v for k, v in counts.items() if v and k != "total_tokens"})
        price = calc_price(usage, model, provider_id=provider if isinstance(provider, str) else None)
    except LookupError as exc:
        raise ConfigurationError(f"a cost limit is set but no price is known for {model!r}: {exc}") from None
    return float(price.total_price)
