"""Gemini CLI: its stream-json collector and endpoint."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from ...errors import ConfigurationError
from ...usage import Usage
from .collect import _Collector, _distinct, _failure_message, _int, _object, _usage
from .process import CLIEndpoint
from .records import CLIRun, CLIToolEvent


class GeminiStreamCollector(_Collector):
    """Gemini CLI ``-o stream-json`` events.

    ``init`` gives the session and model; ``message`` with role
    ``assistant`` gives text (``delta: true`` pieces are concatenated as
    printed; role ``user`` is the CLI's echo of the prompt and ignored);
    ``tool_use`` / ``tool_result`` are CLI tool calls (paired by
    ``tool_id``); ``error`` events are kept (their messages become
    :attr:`CLIRun.warnings`, or the failure reason when the result has
    none); ``result`` ends the turn: ``status`` ``"error"`` is a failure
    whatever the exit code, and ``stats`` gives usage (``input`` is the
    uncached input, ``cached`` the cache reads) and the duration.

    The CLI reports no finish reason: a reply cut at the output limit ends
    as ``status: "success"`` with partial text. The endpoint therefore says
    ``reports_cuts = False``, and ``run_and_collect`` treats an answer that
    ends inside a JSON value as a cut (docs/cli.md).
    """

    _USAGE = {"input": "input_tokens", "output_tokens": "output_tokens", "cached": "cache_read_input_tokens"}

    def __init__(self, run: CLIRun, on_tool: Callable[[CLIToolEvent], None] | None = None) -> None:
        super().__init__(run, on_tool)
        self._names: dict[str, tuple[str | None, dict[str, Any]]] = {}
        self._errors: list[str] = []
        self._message = 0
        self._fatal: str | None = None

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        run = self.run
        if kind == "init":
            run.session_id = event.get("session_id") or run.session_id
            run.model = event.get("model") or run.model
        elif kind == "message":
            if event.get("role") == "assistant" and isinstance(event.get("content"), str):
                if not event.get("delta"):
                    self._message += 1  # a whole message starts a new one
                self._text(("message", self._message), event["content"])
        elif kind == "tool_use":
            call_id = event.get("tool_id")
            args = _object(event.get("parameters"))
            self._names[str(call_id)] = (event.get("tool_name"), args)
            self._tool(CLIToolEvent("request", call_id, event.get("tool_name"), args))
            self._message += 1
        elif kind == "tool_result":
            call_id = event.get("tool_id")
            name, args = self._names.get(str(call_id), (None, {}))
            error = event.get("error")
            output = event.get("output") if error is None else {"output": event.get("output"), "error": error}
            self._tool(CLIToolEvent("response", call_id, name, args, output=output,
                                    is_error=event.get("status") == "error" or error is not None))
        elif kind == "error":
            message = event.get("message")
            if isinstance(message, str) and message.strip():
                self._errors.append(message.strip())
        elif kind == "result":
            self._result(event)

    def finish(self) -> None:
        super().finish()
        # Notices after the result are kept too; the fatal reason is not repeated.
        self.run.warnings = _distinct(self._errors, without=self._fatal)

    def _result(self, event: dict[str, Any]) -> None:
        run = self.run
        if run.is_error:
            return  # a failure the CLI reported is final: a later result does not undo it
        run.finished = True
        status = event.get("status")
        run.subtype = status if isinstance(status, str) else None
        stats = _object(event.get("stats"))
        run.usage = _usage(stats, self._USAGE)
        run.tokens = Usage.from_gemini(stats)
        tool_calls = _int(stats.get("tool_calls"))
        if tool_calls is not None:
            run.usage["tool_calls"] = tool_calls
        duration = stats.get("duration_ms")
        run.duration_ms = duration if isinstance(duration, (int, float)) and not isinstance(duration, bool) else None
        if status == "success":
            return
        run.is_error = True
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        fatal = message.strip() if isinstance(message, str) and message.strip() else (
            self._errors[-1] if self._errors else None)
        self._fatal = fatal
        run.error_message = _failure_message(status, fatal, None)


#: The settings the Gemini preset writes to ``$GEMINI_CLI_HOME/.gemini/settings.json``
#: (``general.maxAttempts`` is the endpoint's ``max_attempts``).
GEMINI_SETTINGS: dict[str, Any] = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"maxAttempts": 1},
}


class GeminiEndpoint(CLIEndpoint):
    """Gemini CLI: ``gemini -p "" -o stream-json [-m MODEL] --skip-trust``, prompt on stdin.

    The system text is put before the prompt (the CLI has no flag that adds
    to its system prompt). The CLI reports no finish reason, so a reply cut
    at the output limit cannot be told from a whole one (``reports_cuts``
    is false; see :class:`GeminiStreamCollector`).

    Server preset (``base_url=`` the server root, e.g.
    ``http://127.0.0.1:8000``; ``api_key=``; ``home=``;
    ``max_attempts=1``): ``GEMINI_CLI_HOME`` is the state folder, where
    ``.gemini/settings.json`` is written (when absent) with API-key auth,
    usage statistics and telemetry off and ``general.maxAttempts``
    (:data:`GEMINI_SETTINGS`): without that file the CLI rejects the base
    URL. ``GOOGLE_GEMINI_BASE_URL``, ``GEMINI_API_KEY`` and ``TMPDIR`` (a
    folder in the state folder: the CLI writes error reports there) are set.
    One attempt is the default because the CLI keeps a failed attempt's
    text in the stream, unmarked, when it retries.
    """

    default_executable = "gemini"
    provider_name = "gemini"
    collector_class = GeminiStreamCollector
    reports_cuts: ClassVar[bool] = False

    def __init__(self, provider: str | None = None, model: str | None = None, *, max_attempts: int = 1,
                 **options: Any) -> None:
        if max_attempts < 1:
            raise ConfigurationError("max_attempts must be at least 1")
        self.max_attempts = max_attempts
        super().__init__(provider, model, **options)

    def argv(self, options: Mapping[str, Any] | None = None, system: str | None = None) -> list[str]:
        argv = [*self.cli_command, "-p", "", "-o", "stream-json"]
        if self.model:
            argv += ["-m", self.model]
        return argv + ["--skip-trust"] + self._extra(options)

    def stdin_text(self, prompt: str, system: str | None = None) -> str:
        return f"{system}\n\n{prompt}" if system else prompt

    def preset(self, base_url: str, api_key: str | None) -> tuple[dict[str, str], list[str]]:
        return {"GOOGLE_GEMINI_BASE_URL": base_url, "GEMINI_API_KEY": api_key if api_key is not None else "unused"}, []

    def state_env(self) -> dict[str, str]:
        home = self.state_dir()
        return {"GEMINI_CLI_HOME": home, "TMPDIR": os.path.join(home, "tmp")}

    def state_files(self) -> dict[str, str | None]:
        if self.base_url is None:
            return {}
        home = self.state_dir()
        data = json.loads(json.dumps(GEMINI_SETTINGS))
        data["general"]["maxAttempts"] = self.max_attempts
        return {os.path.join(home, "tmp"): None,
                os.path.join(home, ".gemini", "settings.json"): json.dumps(data, indent=2)}
