"""Codex: its ``exec --json`` collector and endpoint."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from ...usage import Usage
from .collect import _Collector, _distinct, _failure_message, _object, _usage
from .process import CLIEndpoint
from .records import CLIRun, CLIToolEvent

#: Codex's words for a response that ended at the output limit, and for a
#: context window that ran out (``turn.failed`` messages of ``codex exec``).
_CODEX_INCOMPLETE = re.compile(r"Incomplete response returned, reason: ([A-Za-z_]+)")
_CODEX_CONTEXT = re.compile(r"ran out of room in the model's context window|context_length_exceeded", re.IGNORECASE)


class CodexStreamCollector(_Collector):
    """Codex ``exec --json`` events.

    ``thread.started`` gives the thread id; ``item.completed`` with an
    ``agent_message`` gives text (the answer is the last one, or the last
    whose ``phase`` is ``final_answer`` when the CLI marks phases: the
    others are commentary); ``command_execution``, ``mcp_tool_call``,
    ``file_change`` and ``web_search`` items are CLI tool calls (a request
    and a response each); ``turn.completed`` ends the turn with usage;
    ``turn.failed`` ends it failed: its message is the one fatal reason, and
    the other ``error`` events and ``error`` items (reconnect notices, model
    metadata warnings) are kept as :attr:`CLIRun.warnings`. A ``turn.failed``
    that says the response was incomplete at ``max_output_tokens``, or that
    the context window ran out, is a cut (``stop_reason``
    ``"max_output_tokens"`` / ``"model_context_window_exceeded"``), not an
    error. Other events (``reasoning``, ``todo_list``, ``item.started``, ...)
    are ignored.
    """

    _USAGE = {
        "input_tokens": "input_tokens", "output_tokens": "output_tokens",
        "cached_input_tokens": "cache_read_input_tokens",
        "cache_write_input_tokens": "cache_creation_input_tokens",
    }
    _TOOL_ARGS: ClassVar[dict[str, tuple[str, ...]]] = {
        "command_execution": ("command", "cwd"),
        "file_change": ("changes",),
        "web_search": ("query",),
    }

    def __init__(self, run: CLIRun, on_tool: Callable[[CLIToolEvent], None] | None = None) -> None:
        super().__init__(run, on_tool)
        self._errors: list[str] = []
        self._final: set[Any] = set()
        self._fatal: str | None = None

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        run = self.run
        if kind == "thread.started":
            run.session_id = event.get("thread_id") or run.session_id
        elif kind == "item.completed" and isinstance(event.get("item"), dict):
            self._item(event["item"])
        elif run.is_error and kind in ("turn.completed", "turn.failed"):
            return  # a failure the CLI reported is final: a later turn event does not undo it
        elif kind == "turn.completed":
            run.finished = True
            run.subtype = "success"
            run.usage = _usage(event.get("usage"), self._USAGE, cached_in_input="cached_input_tokens",
                               keep_extra=True)
            run.tokens = Usage.from_responses(event.get("usage"))
            run.num_turns = (run.num_turns or 0) + 1
        elif kind == "turn.failed":
            self._failed(event)
        elif kind == "error":
            message = event.get("message")
            if isinstance(message, str) and message:
                self._errors.append(message)

    def _failed(self, event: dict[str, Any]) -> None:
        run = self.run
        run.finished = True
        run.subtype = "turn.failed"
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        if not isinstance(message, str) or not message.strip():
            message = self._errors[-1] if self._errors else None
        fatal = message.strip() if isinstance(message, str) else None
        self._fatal = fatal
        incomplete = _CODEX_INCOMPLETE.search(fatal or "")
        if incomplete is not None and incomplete.group(1) == "max_output_tokens":
            run.stop_reason, run.stop_detail = "max_output_tokens", fatal
        elif fatal is not None and _CODEX_CONTEXT.search(fatal):
            run.stop_reason, run.stop_detail = "model_context_window_exceeded", fatal
        else:
            run.is_error = True
            run.error_message = _failure_message("turn.failed", fatal, None)

    def finish(self) -> None:
        super().finish()
        # Notices after the turn ended are kept too; the fatal reason is not repeated.
        self.run.warnings = _distinct(self._errors, without=self._fatal)

    def _answer(self) -> str:
        final = [text for key, text in self._segments if key in self._final and text]
        return final[-1] if final else super()._answer()

    def _item(self, item: dict[str, Any]) -> None:
        kind = item.get("type")
        if kind == "agent_message" and isinstance(item.get("text"), str):
            key = self._key(item.get("id"))
            if item.get("phase") == "final_answer":
                self._final.add(key)
            self._text(key, item["text"])
            return
        if kind == "error" and isinstance(item.get("message"), str):
            self._errors.append(item["message"])
            return
        if kind == "mcp_tool_call":
            name = f"{item.get('server')}.{item.get('tool')}"
            args = _object(item.get("arguments"))
            output = item.get("result") if item.get("error") is None else item.get("error")
        elif kind in self._TOOL_ARGS:
            name = kind
            args = {k: item[k] for k in self._TOOL_ARGS[kind] if k in item}
            output = {k: item[k] for k in ("aggregated_output", "exit_code", "status") if k in item}
        else:
            return
        failed = item.get("status") == "failed" or item.get("error") is not None or (
            isinstance(item.get("exit_code"), int) and item["exit_code"] != 0
        )
        call_id = item.get("id")
        self._tool(CLIToolEvent("request", call_id, name, args))
        self._tool(CLIToolEvent("response", call_id, name, args, output=output, is_error=failed))


#: The variable the Codex preset passes the key in (named by ``env_key``).
CODEX_KEY_ENV = "LIONOPS_CODEX_API_KEY"


class CodexEndpoint(CLIEndpoint):
    """Codex: ``codex exec --json [-m MODEL] -``, prompt on stdin.

    Server preset (``base_url=`` the Responses API base, e.g.
    ``http://127.0.0.1:8000/v1``; ``api_key=``; ``home=``): a custom model
    provider ``lionops`` (``wire_api="responses"``, no request retries, one
    stream retry) whose key is read from ``LIONOPS_CODEX_API_KEY``;
    ``--skip-git-repo-check --ephemeral``, analytics and web search off, and
    ``--disable plugins`` (without it the CLI looks up plugin hosts in DNS);
    ``CODEX_HOME`` is the state folder.
    """

    default_executable = "codex"
    provider_name = "codex"
    collector_class = CodexStreamCollector

    def argv(self, options: Mapping[str, Any] | None = None, system: str | None = None) -> list[str]:
        argv = [*self.cli_command, "exec", "--json"]
        if self.model:
            argv += ["-m", self.model]
        return argv + self._extra(options) + ["-"]

    def stdin_text(self, prompt: str, system: str | None = None) -> str:
        return f"{system}\n\n{prompt}" if system else prompt

    def preset(self, base_url: str, api_key: str | None) -> tuple[dict[str, str], list[str]]:
        # The provider (its base URL may hold credentials) is defined in
        # $CODEX_HOME/config.toml (mode 0600, secret_files), never on the command line.
        args = ["--skip-git-repo-check", "--ephemeral", "-c", "model_provider=lionops",
                "-c", "analytics.enabled=false", "-c", "web_search=disabled", "--disable", "plugins"]
        return {CODEX_KEY_ENV: api_key if api_key is not None else "unused"}, args

    def secret_files(self) -> dict[str, str]:
        if self._base_url is None:
            return {}
        # JSON strings are TOML basic strings (the same escapes). The CLI appends
        # its path to base_url, so a query (a key in ``?api-key=``) goes to query_params.
        parts = urlsplit(self._base_url)
        base = urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        query = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in pairs)
        provider = (
            f'[model_providers.lionops]\nname = "lionops"\nbase_url = {json.dumps(base)}\n'
            f'env_key = "{CODEX_KEY_ENV}"\nwire_api = "responses"\nrequest_max_retries = 0\n'
            'stream_max_retries = 1\n' + (f"query_params = {{ {query} }}\n" if query else "")
        )
        return {os.path.join(self.state_dir(), "config.toml"): provider}

    def state_env(self) -> dict[str, str]:
        return {"CODEX_HOME": self.state_dir()}
