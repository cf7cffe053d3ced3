"""Text for observers: the one home of truncation in lionops.

Hook payload summaries, error previews, divergence reports and log lines cut
values here (observability only: what a tool receives and returns is never
truncated), and never fail on a value whose ``__str__`` or ``__repr__`` raises.
"""

from __future__ import annotations

__all__ = ["SUMMARY_LIMIT", "VERBOSE_ARGS_LIMIT", "summarize", "safe_str"]

#: ADR-0022 D4: hook payload summaries are cut at 200 characters.
SUMMARY_LIMIT = 200
#: ADR-0022 D4: verbose debug logging cuts its argument preview at 50 characters.
VERBOSE_ARGS_LIMIT = 50


def safe_str(value: object) -> str:
    """``str(value)``, or ``<unprintable TypeName>`` when its ``__str__``
    raises: error payloads and observer logs never fail on a hostile value."""
    try:
        return str(value)
    except Exception:  # noqa: BLE001
        return f"<unprintable {type(value).__name__}>"


def summarize(value: object, limit: int = SUMMARY_LIMIT, *, use_repr: bool = False) -> str:
    """``str(value)`` (``repr`` with ``use_repr``) cut to ``limit`` characters,
    with ``...`` when cut: hook payloads, error previews and divergence
    reports all use it."""
    if use_repr:
        try:
            text = repr(value)
        except Exception:  # noqa: BLE001
            text = f"<unprintable {type(value).__name__}>"
    else:
        text = safe_str(value)
    return text if len(text) <= limit else text[:limit] + "..."
