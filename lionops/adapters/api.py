"""``communicate``: the API Middle (ADR-0022 D3). Placeholder until the API adapter lands."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError

__all__ = ["communicate"]


async def communicate(
    branch: Any,
    instruction: Any,
    chat_param: Any,
    parse_param: Any = None,
    clear_messages: bool = False,
    skip_validation: bool = False,
) -> Any:
    """Run one API chat turn. Raises ConfigurationError: no API endpoint is configured yet."""
    raise ConfigurationError(
        "communicate: no API endpoint configured; pass middle= to operate() "
        "or a chat_model=iModel(provider='openai', ...)"
    )
