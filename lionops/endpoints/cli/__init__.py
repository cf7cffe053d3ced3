"""CLI agent endpoints: one turn through a subprocess that streams JSON lines.

``iModel(provider="claude_code", cli_command=[...], model=..., timeout=...)``
builds a :class:`ClaudeCodeEndpoint`; ``provider="codex"`` a
:class:`CodexEndpoint`; ``provider="gemini"`` a :class:`GeminiEndpoint`.
All are CLI-backed (``is_cli`` is true), so ``prepare_operate_kw`` selects
``RunParam`` and the coordinator selects ``run_and_collect`` (ADR-0022 D1/D3).

The package is split by concern: :mod:`.records` (the run record; the
errors are defined in :mod:`lionops.errors`),
:mod:`.decode` (stdout bytes to events, pure), :mod:`.collect` (what the
collectors share), :mod:`.process` (the subprocess: the only IO),
:mod:`.argv` (secrets in a command line), and one module per agent
(:mod:`.claude`, :mod:`.codex`, :mod:`.gemini`: its collector and endpoint;
the files an agent needs are declared by ``state_files()`` and written by
the process module).
Every public name is importable from here; the process and agent modules
load when one of their names is first used.

One run (:meth:`CLIEndpoint.run`):

1. starts ``cli_command`` plus the provider's arguments with
   ``anyio.open_process`` in a new session (so its whole process group can be
   killed), writes the prompt to its stdin and closes it;
2. reads stdout incrementally, splits it into lines (a line may arrive in
   several reads), skips blank lines and non-JSON noise, repairs a JSON line
   split by an injected event, bounds the work and the
   length of each line, hands each raw chunk to an optional sink (stream
   persistence) and each event to the provider's collector; once the final
   result event is handled the turn is over: the CLI gets ``linger`` seconds
   to exit, then its group is stopped;
3. keeps the last ``stderr_tail`` bytes of stderr;
4. returns a :class:`CLIRun` or raises a :class:`CLIError` subclass carrying
   the stderr tail (secrets from ``env`` and the argv redacted).

Whatever happens (success, error, timeout, cancellation), the process group
is terminated (SIGTERM, then SIGKILL after ``kill_grace`` seconds) and the
child is reaped before :meth:`CLIEndpoint.run` returns or raises.

Steps 1 and 3 (the process) are :meth:`CLIEndpoint.spawn`. When
the runtime has a ``cli_transport`` (:func:`lionops.runtime.use_runtime`),
:meth:`CLIEndpoint.run` calls it instead:
record and replay (:mod:`lionops.replay`) capture a run there, or serve a
recorded one with no subprocess; the decoding, collecting, sink and error
checks of step 2 and 4 run the same either way.

The CLI's own tool calls (``tool_use``/``tool_result``, Codex command and
MCP items, Gemini ``tool_use``/``tool_result``) are reported as
:class:`CLIToolEvent` for provenance; nothing here executes a tool.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ...errors import CLIError, CLIProcessError, CLIResultError, CLIStreamError, CLITimeoutError
from ..registry import ProviderSpec, register_provider
from .argv import argv_secrets
from .collect import _failure_message  # noqa: F401 - for the decoder tests
from .decode import LineDecoder
from .records import CUT_OFF_STOP_REASONS, REDACTED, CLIRun, CLIToolEvent

#: The CLI agents (registered in :mod:`lionops.endpoints.registry`). Each
#: logs in by itself (or through ``base_url=``/``api_key=``, docs/cli.md).
CLI_PROVIDERS = tuple(register_provider(spec) for spec in (
    ProviderSpec("claude_code", "lionops.endpoints.cli:ClaudeCodeEndpoint", "anthropic", is_cli=True),
    ProviderSpec("codex", "lionops.endpoints.cli:CodexEndpoint", "openai", is_cli=True),
    ProviderSpec("gemini", "lionops.endpoints.cli:GeminiEndpoint", "gcp.gemini", is_cli=True),
))

if TYPE_CHECKING:
    from .claude import ClaudeCodeEndpoint, ClaudeStreamCollector
    from .codex import CODEX_KEY_ENV, CodexEndpoint, CodexStreamCollector
    from .gemini import GEMINI_SETTINGS, GeminiEndpoint, GeminiStreamCollector
    from .process import OFFLOAD_BYTES, CLIEndpoint, CLIExit, CLIStdout, CLITransport

#: Names of the modules that start processes, loaded on first use (so that
#: ``import lionops`` loads no subprocess machinery): name -> module.
_LAZY = {
    "CLIEndpoint": "process", "CLIExit": "process", "CLIStdout": "process", "CLITransport": "process",
    "OFFLOAD_BYTES": "process",
    "ClaudeCodeEndpoint": "claude", "ClaudeStreamCollector": "claude",
    "CodexEndpoint": "codex", "CodexStreamCollector": "codex", "CODEX_KEY_ENV": "codex",
    "GeminiEndpoint": "gemini", "GeminiStreamCollector": "gemini", "GEMINI_SETTINGS": "gemini",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "CLI_PROVIDERS",
    "CLIEndpoint",
    "ClaudeCodeEndpoint",
    "CodexEndpoint",
    "GeminiEndpoint",
    "CLIRun",
    "CLIToolEvent",
    "CLIError",
    "CLIProcessError",
    "CLITimeoutError",
    "CLIStreamError",
    "CLIResultError",
    "LineDecoder",
    "ClaudeStreamCollector",
    "CodexStreamCollector",
    "GeminiStreamCollector",
    "CUT_OFF_STOP_REASONS",
    "argv_secrets",
    "CLIStdout",
    "CLIExit",
    "CLITransport",
    "CODEX_KEY_ENV",
    "GEMINI_SETTINGS",
    "OFFLOAD_BYTES",
    "REDACTED",
]
