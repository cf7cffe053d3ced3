"""``ReplayDivergence`` and the comparisons that raise it."""

from __future__ import annotations

from typing import Any

from .._text import summarize
from ..errors import ReplayDivergence
from ..trace import Trace, TransitionRecord

__all__ = [
    "ReplayDivergence", "same_json", "first_difference", "compare_traces", "describe_transition", "unmatched_exchange",
]


def _short(value: Any, limit: int = 120) -> str:
    return summarize(value, limit - 3, use_repr=True)


def _kind(value: Any) -> type:
    """A JSON scalar's kind: ``True``, ``1`` and ``1.0`` are equal to Python, not to a replay."""
    return type(value) if isinstance(value, (bool, int, float)) else object


def same_json(expected: Any, actual: Any) -> bool:
    """Whether two JSON-compatible values are the same JSON: like ``==``, but
    a boolean, an integer and a float are never equal to one another
    (``true`` reaches a tool as ``True``, not as ``1``); lists and tuples compare alike."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return expected.keys() == actual.keys() and all(same_json(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        return len(expected) == len(actual) and all(same_json(a, b) for a, b in zip(expected, actual, strict=False))
    return _kind(expected) is _kind(actual) and expected == actual


def first_difference(expected: Any, actual: Any, path: str = "$") -> str | None:
    """The first place two JSON-compatible values differ, as
    ``"path: expected X, actual Y"``; ``None`` when equal."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        for key in [*expected, *(k for k in actual if k not in expected)]:
            if key not in actual:
                return f"{path}.{key}: expected {_short(expected[key])}, actual missing"
            if key not in expected:
                return f"{path}.{key}: expected missing, actual {_short(actual[key])}"
            found = first_difference(expected[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        for i, (a, b) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} items, actual {len(actual)}"
        return None
    if not same_json(expected, actual):
        return f"{path}: expected {_short(expected)}, actual {_short(actual)}"
    return None


def unmatched_exchange(label: str, root: str, number: int, where: str, nearest: tuple[dict[str, Any], str] | None,
                       live: dict[str, Any], *, total: int, operation: int) -> ReplayDivergence:
    """The divergence of ``label`` ``number`` (shown as ``where``) that no
    unused recorded exchange matches. ``nearest`` is the first unused one's
    match key and description (``None`` when all ``total`` are used); the
    message names the first field where ``live`` differs from it, under ``root``."""
    if nearest is None:
        message = f"{label} {number} ({where}) asks for an exchange the recording lacks: all {total} are used"
        expected = None
    else:
        want, expected = nearest
        message = f"{label} {number} ({where}) matches no recorded exchange; nearest differs at " \
                  f"{first_difference(want, live, root)}"
    return ReplayDivergence(message, kind="exchange", index=number, expected=expected, actual=where,
                            operation=operation)


def describe_transition(t: TransitionRecord | None) -> str | None:
    """``"validate --validated--> gate"`` (with the error type on ``failed``)."""
    if t is None:
        return None
    text = f"{t.source} --{t.trigger}--> {t.dest}"
    if t.error:
        text += f" [{t.error.split(':', 1)[0]}]"
    return text


def _identity(t: TransitionRecord) -> tuple[Any, ...]:
    return (t.source, t.trigger, t.dest, dict(t.guards), (t.error or "").split(":", 1)[0])


def compare_traces(expected: Trace, actual: Trace, *, operation: int = 0) -> ReplayDivergence | None:
    """The first transition (index, expected, actual) where ``actual`` leaves
    ``expected``: source, trigger, destination, guards evaluated and, on
    ``failed``, the exception type are compared; timing is not."""
    for i in range(max(len(expected.transitions), len(actual.transitions))):
        want = expected.transitions[i] if i < len(expected.transitions) else None
        got = actual.transitions[i] if i < len(actual.transitions) else None
        if want is not None and got is not None and _identity(want) == _identity(got):
            continue
        exp, act = describe_transition(want), describe_transition(got)
        detail = ""
        same_edge = want is not None and got is not None and (
            (want.source, want.trigger, want.dest) == (got.source, got.trigger, got.dest))
        if same_edge:
            assert want is not None and got is not None
            detail = (f" (guards {want.guards} vs {got.guards})" if want.guards != got.guards
                      else f" ({want.error} vs {got.error})")
        return ReplayDivergence(
            f"transition {i} differs: expected {exp or 'the run to end'}, actual {act or 'the run ended'}{detail}",
            kind="transition", index=i, expected=exp, actual=act, operation=operation,
        )
    return None
