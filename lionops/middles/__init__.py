"""Middles: what the adapter phase of ``operate()`` awaits exactly once (ADR-0022 D3).

A Middle is ``async (branch, instruction, chat_param, parse_param=None,
clear_messages=False, skip_validation=False)``. It clears branch messages
first when ``clear_messages``; records the user instruction and the
assistant response on the branch; returns the raw text when
``skip_validation``; parses into ``parse_param.response_format`` when one is
set; returns text, a mapping, a model instance, or ``None`` when the model
produced no text. It never executes tools.

The two built-in Middles are :func:`lionops.middles.api.communicate` (API
models) and :func:`lionops.middles.cli.run_and_collect` (CLI agents).
:mod:`.common` holds what both share (the user turn, recording messages,
the inner parse) and :mod:`.shaping` what an API request asks for (the
request schema, strict JSON schemas, the response format option). Middles
call endpoints (:mod:`lionops.endpoints`); endpoints never import Middles.
"""

from typing import Any, Protocol

__all__ = ["Middle"]


class Middle(Protocol):
    """The Middle contract (see the module docstring)."""

    async def __call__(
        self,
        branch: Any,
        instruction: Any,
        chat_param: Any,
        parse_param: Any = None,
        clear_messages: bool = False,
        skip_validation: bool = False,
    ) -> Any: ...
