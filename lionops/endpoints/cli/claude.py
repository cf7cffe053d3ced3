"""Claude Code: its stream-json collector and endpoint."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from ...usage import Usage
from .collect import _Collector, _failure_message, _int, _object, _usage
from .process import CLIEndpoint
from .records import CLIRun, CLIToolEvent

#: Claude Code's words when the model kept hitting its output limit.
_CLAUDE_OUTPUT_LIMIT = re.compile(r"response exceeded the \d+ output token maximum")


class ClaudeStreamCollector(_Collector):
    """Claude Code ``--output-format stream-json`` events.

    ``system``/``init`` gives the session and model; ``assistant`` messages
    give text blocks (top level only, not sub-agents) and ``tool_use``
    blocks; ``user`` messages give ``tool_result`` blocks; ``result`` ends
    the turn with usage, cost, and ``is_error``/``subtype`` (a failed result
    saying the response exceeded the output token maximum is a cut,
    ``stop_reason`` ``"max_tokens"``); ``rate_limit_event``, ``stream_event`` and unknown types are ignored.
    Several ``assistant`` events sharing one ``message.id`` are one message:
    its text is the exact concatenation of their text blocks.
    """

    _USAGE = {
        "input_tokens": "input_tokens", "output_tokens": "output_tokens",
        "cache_read_input_tokens": "cache_read_input_tokens",
        "cache_creation_input_tokens": "cache_creation_input_tokens",
    }

    def __init__(self, run: CLIRun, on_tool: Callable[[CLIToolEvent], None] | None = None) -> None:
        super().__init__(run, on_tool)
        self._names: dict[str, tuple[str | None, dict[str, Any]]] = {}

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "system" and event.get("subtype") == "init":
            self.run.session_id = event.get("session_id") or self.run.session_id
            self.run.model = event.get("model") or self.run.model
        elif kind == "assistant":
            self._assistant(event)
        elif kind == "user":
            self._user(event)
        elif kind == "result":
            self._result(event)
        elif kind == "rate_limit_event":
            self.run.counts["rate_limit_events"] = self.run.counts.get("rate_limit_events", 0) + 1

    def _blocks(self, event: dict[str, Any]) -> list[Any]:
        message = event.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            return [{"type": "text", "text": content}]
        return content if isinstance(content, list) else []

    def _assistant(self, event: dict[str, Any]) -> None:
        parent = event.get("parent_tool_use_id")
        message = event.get("message")
        if isinstance(message, dict) and message.get("model") == "<synthetic>":
            return  # the CLI's own notice (an API error's text), not the model's
        key = self._key(message.get("id") if isinstance(message, dict) else None)
        if parent is None and isinstance(message, dict):
            # The stop reason of the latest top-level message (null while the
            # CLI streams); the result event, when it carries one, has the last word.
            reason = message.get("stop_reason")
            self.run.stop_reason = reason if isinstance(reason, str) else None
        for block in self._blocks(event):
            if not isinstance(block, dict):
                continue
            if block.get("type") == "text" and parent is None and isinstance(block.get("text"), str):
                self._text(key, block["text"])
            elif block.get("type") in ("tool_use", "server_tool_use"):
                args = _object(block.get("input"))
                call_id = block.get("id")
                self._names[str(call_id)] = (block.get("name"), args)
                self._tool(CLIToolEvent("request", call_id, block.get("name"), args, parent=parent))

    def _user(self, event: dict[str, Any]) -> None:
        for block in self._blocks(event):
            if isinstance(block, dict) and block.get("type") == "tool_result":
                call_id = block.get("tool_use_id")
                name, args = self._names.get(str(call_id), (None, {}))
                self._tool(CLIToolEvent(
                    "response", call_id, name, args, output=block.get("content"),
                    is_error=bool(block.get("is_error")), parent=event.get("parent_tool_use_id"),
                ))

    def _result(self, event: dict[str, Any]) -> None:
        run = self.run
        if run.is_error:
            return  # a failure the CLI reported is final: a later result does not undo it
        run.finished = True
        run.subtype = event.get("subtype")
        run.is_error = bool(event.get("is_error")) or (
            isinstance(run.subtype, str) and run.subtype.startswith("error")
        )
        run.session_id = event.get("session_id") or run.session_id
        run.usage = _usage(event.get("usage"), self._USAGE)
        run.tokens = Usage.from_anthropic(event.get("usage"))
        cost = event.get("total_cost_usd")
        run.cost_usd = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
        duration = event.get("duration_ms")
        run.duration_ms = duration if isinstance(duration, (int, float)) else None
        run.num_turns = _int(event.get("num_turns"))
        if isinstance(event.get("stop_reason"), str):
            run.stop_reason = event["stop_reason"]
        result = event.get("result")
        if run.is_error and isinstance(result, str) and _CLAUDE_OUTPUT_LIMIT.search(result):
            # The CLI asked the model to resume after each cut, and gave up: a cut, not an error.
            run.is_error = False
            run.stop_reason, run.stop_detail = "max_tokens", result.strip()
        elif run.is_error:
            run.error_message = _failure_message(run.subtype, result, event.get("errors"),
                                                 event.get("api_error_status"))
        elif isinstance(result, str):
            self._result_text = result


class ClaudeCodeEndpoint(CLIEndpoint):
    """Claude Code: ``claude -p --output-format stream-json --verbose``, prompt on stdin.

    Adds ``--model MODEL`` and ``--append-system-prompt SYSTEM`` when set.

    Server preset (``base_url=``, ``api_key=``, ``home=``): ``ANTHROPIC_BASE_URL``,
    ``ANTHROPIC_API_KEY``, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1``,
    ``DISABLE_AUTOUPDATER=1``, and ``HOME`` when ``home`` is given (the CLI
    keeps its state under ``$HOME/.claude``).
    """

    default_executable = "claude"
    provider_name = "claude_code"
    collector_class = ClaudeStreamCollector

    def argv(self, options: Mapping[str, Any] | None = None, system: str | None = None) -> list[str]:
        argv = [*self.cli_command, "-p", "--output-format", "stream-json", "--verbose"]
        if self.model:
            argv += ["--model", self.model]
        if system:
            argv += ["--append-system-prompt", system]
        return argv + self._extra(options)

    def preset(self, base_url: str, api_key: str | None) -> tuple[dict[str, str], list[str]]:
        env = {"ANTHROPIC_BASE_URL": base_url, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
               "DISABLE_AUTOUPDATER": "1"}
        if api_key is not None:
            env["ANTHROPIC_API_KEY"] = api_key
        return env, []

    def state_env(self) -> dict[str, str]:
        return {"HOME": self.home} if self.home is not None else {}
