"""CLI agent runs in cassettes, through the runtime's ``cli_transport``.

:class:`CliRecorder` runs the real subprocess (``endpoint.spawn``) and keeps
each run, redacted, as a :class:`~lionops.replay.cassette.CliExchange`: the
normalized command, the stdin text, stdout as lines, the exit status and the
stderr tail. :class:`CliReplay` serves recorded runs with no subprocess: a
run is matched on its normalized command and stdin text (both redacted), the
first unused equal exchange serving it. The served stdout goes through the
endpoint's own sink, decoder and collector, and the exit status and stderr
tail through its own checks, so a recorded failure fails the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import anyio.lowlevel

from .._redact import Redactor
from ..endpoints.cli import CLIEndpoint, CLIExit, CLIStdout
from .cassette import CliExchange, ErrorRecord
from .divergence import unmatched_exchange
from .transport import RecordedExchanges

__all__ = ["CliRecorder", "CliReplay", "command_of"]


def command_of(endpoint: CLIEndpoint, argv: Sequence[str], redactor: Redactor) -> list[str]:
    """``argv`` as recorded and compared, redacted: the configured executable
    and its leading arguments (``cli_command``, which says where the CLI is
    installed) become the provider's executable name; the arguments lionops
    added follow unchanged."""
    prefix = list(endpoint.cli_command)
    if prefix and list(argv[: len(prefix)]) == prefix:
        name = endpoint.default_executable or os.path.basename(prefix[0])
        argv = [name, *argv[len(prefix):]]
    return [redactor.text(arg) for arg in argv]


def _redactor(redactor: Redactor, endpoint: CLIEndpoint) -> Redactor:
    """``redactor`` that also removes the endpoint's secret ``env`` values."""
    return redactor if endpoint.scrub in redactor.scrubbers else redactor.with_scrubbers([endpoint.scrub])


def _shown(command: Sequence[str], limit: int = 80) -> str:
    text = " ".join(command)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _Tap:
    """Hands stdout on unchanged and keeps a copy of its bytes."""

    def __init__(self, inner: CLIStdout) -> None:
        self.inner = inner
        self.data = bytearray()

    @property
    def turn_over(self) -> Any:
        return self.inner.turn_over

    async def feed(self, chunk: bytes) -> None:
        self.data.extend(chunk)
        await self.inner.feed(chunk)

    def end(self) -> None:
        self.inner.end()


class CliRecorder:
    """A runtime ``cli_transport`` that runs the real CLI
    and appends each run, redacted by ``redactor`` (plus the endpoint's secret
    ``env`` values), to ``exchanges`` as a :class:`CliExchange`.

    A run that could not start is recorded with ``error``. A run cut short by
    an exception (a failing sink, cancellation) is not recorded.
    """

    def __init__(self, redactor: Redactor, exchanges: list[Any]) -> None:
        self.redactor = redactor
        self.exchanges = exchanges

    async def __call__(self, endpoint: CLIEndpoint, argv: list[str], stdin: str, stdout: CLIStdout) -> CLIExit:
        tap = _Tap(stdout)
        done = await endpoint.spawn(argv, stdin, tap)  # type: ignore[arg-type]
        redactor = _redactor(self.redactor, endpoint)
        text = bytes(tap.data).decode("utf-8", errors="replace")
        error = (None if done.start_error is None
                 else ErrorRecord(type="OSError", message=redactor.text(done.start_error)))
        self.exchanges.append(CliExchange(
            command=command_of(endpoint, argv, redactor), input=redactor.text(stdin),
            lines=[redactor.text(line) for line in text.split("\n")] if text else [],
            returncode=done.returncode, stderr=redactor.text(done.stderr), timed_out=done.timed_out, error=error,
        ))
        return done


async def _serve(exchange: CliExchange, stdout: CLIStdout) -> CLIExit:
    """Feed the recorded stdout, one line per chunk, and give the recorded exit."""
    await anyio.lowlevel.checkpoint()
    if exchange.error is not None:
        return CLIExit(start_error=exchange.error.message)
    last = len(exchange.lines) - 1
    for i, line in enumerate(exchange.lines):
        piece = line if i == last else line + "\n"
        if piece:
            await stdout.feed(piece.encode("utf-8"))
    if not exchange.timed_out:
        stdout.end()
    return CLIExit(returncode=exchange.returncode, stderr=exchange.stderr or "", timed_out=exchange.timed_out)


class CliReplay(RecordedExchanges):
    """A runtime ``cli_transport`` serving recorded CLI
    ``exchanges`` with no subprocess (arguments: :class:`RecordedExchanges`).

    Raises (when called):
        ReplayDivergence: no unused recorded exchange has this run's
            normalized command and stdin text.
    """

    kind = CliExchange

    @staticmethod
    def _key(exchange: CliExchange, redactor: Redactor) -> dict[str, Any]:
        return {"command": [redactor.text(a) for a in exchange.command], "input": redactor.text(exchange.input or "")}

    async def __call__(self, endpoint: CLIEndpoint, argv: list[str], stdin: str, stdout: CLIStdout) -> CLIExit:
        redactor = _redactor(self.redactor, endpoint)
        live = {"command": command_of(endpoint, argv, redactor), "input": redactor.text(stdin)}
        number = self.asked
        self.asked += 1
        exchange = self.take(lambda e: self._key(e, redactor) == live)
        if exchange is not None:
            return await _serve(exchange, stdout)
        pending = self.nearest()
        nearest = None if pending is None else (self._key(pending, redactor), _shown(pending.command))
        raise self.report(unmatched_exchange("CLI run", "run", number, _shown(live["command"]), nearest, live,
                                             total=len(self.exchanges), operation=self.operation))

    def describe(self, index: int) -> str:
        return "CLI " + _shown(self.exchanges[index].command)
