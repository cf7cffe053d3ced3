"""``run_and_collect``: the CLI Middle (ADR-0022 D3). Placeholder until the CLI adapter lands."""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError

__all__ = ["run_and_collect"]


async def run_and_collect(
    branch: Any,
    instruction: Any,
    chat_param: Any,
    parse_param: Any = None,
    clear_messages: bool = False,
    skip_validation: bool = False,
) -> Any:
    """Run one CLI turn. Raises ConfigurationError: no CLI endpoint is configured yet."""
    raise ConfigurationError(
        "run_and_collect: no CLI endpoint configured; pass middle= to operate() "
        "or a chat_model=iModel(provider='claude_code', ...)"
    )
