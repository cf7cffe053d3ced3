"""The CLI process: the only IO of a CLI turn (spawn, pump, stop, check)."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import anyio
import anyio.abc
import anyio.to_thread

from ..._files import atomic_write_text
from ..._secrets import MARK, replace_secrets, scrub_url, secret_variables, url_secrets
from ...errors import CLIError, CLIProcessError, CLIResultError, CLIStreamError, CLITimeoutError, ConfigurationError
from ...runtime import current_runtime
from ..registry import otel_provider_name
from .argv import argv_secrets, embedded_secrets
from .collect import _Collector
from .decode import LineDecoder
from .records import REDACTED, CLIRun, CLIToolEvent


class _Tail:
    """The last ``limit`` bytes written to it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data.extend(chunk)
        if len(self.data) > self.limit:
            del self.data[: len(self.data) - self.limit]

    def text(self) -> str:
        return bytes(self.data).decode("utf-8", errors="replace")


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_running(pgid: int) -> bool:
    """True while a non-zombie process of group ``pgid`` exists (Linux ``/proc``;
    elsewhere: while the group can be signalled)."""
    try:
        entries = os.listdir("/proc")
    except OSError:
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                fields = fh.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "did not exit"
    if code < 0:
        try:
            return f"was killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with status {code}"


Sink = Callable[[bytes], Awaitable[None]]


#: Decoding work above this many buffered bytes runs in a worker thread, so a
#: huge line never holds the event loop while it is parsed.
OFFLOAD_BYTES = 1024 * 1024


class CLIStdout:
    """Where a run's stdout goes: ``await feed(chunk)`` for each chunk as it
    arrives (the sink first, then the decoder and collector), ``end()`` once
    stdout reached its end (not called when the run was cut short).
    ``finished`` turns true once the final result event was handled;
    ``turn_over`` is set then, or when a line outgrew ``max_line_bytes``
    (the turn is over either way: the process is stopped)."""

    __slots__ = ("_decoder", "_collector", "_sink", "turn_over")

    def __init__(self, decoder: LineDecoder, collector: _Collector, sink: Sink | None) -> None:
        self._decoder = decoder
        self._collector = collector
        self._sink = sink
        self.turn_over = anyio.Event()

    @property
    def finished(self) -> bool:
        return self._collector.run.finished

    async def feed(self, chunk: bytes) -> None:
        if self._sink is not None:
            await self._sink(chunk)
        if self._decoder.buffered + len(chunk) > OFFLOAD_BYTES:
            events = await anyio.to_thread.run_sync(self._decoder.feed, chunk)
        else:
            events = self._decoder.feed(chunk)
        self._handle(events)

    def _handle(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self._collector.handle(event)
        if (self.finished or self._decoder.oversized is not None) and not self.turn_over.is_set():
            self.turn_over.set()

    def end(self) -> None:
        self._handle(self._decoder.close())


@dataclass(slots=True)
class CLIExit:
    """How a CLI process ended.

    Attributes:
        returncode: exit status (negative: killed by that signal); ``None``
            when it did not start or had not exited on its own.
        stderr: the last ``stderr_tail`` bytes of stderr, decoded (not yet redacted).
        timed_out: the run was stopped at ``timeout``.
        pid: the child's process id, when one was started.
        start_error: why the process could not start (``OSError`` text).
    """

    returncode: int | None = None
    stderr: str = ""
    timed_out: bool = False
    pid: int | None = None
    start_error: str | None = None


#: ``await transport(endpoint, argv, stdin, stdout) -> CLIExit``: one CLI run.
CLITransport = Callable[["CLIEndpoint", list[str], str, CLIStdout], Awaitable[CLIExit]]



class CLIEndpoint:
    """A CLI agent that runs one turn and streams JSON lines on stdout.

    Args:
        provider: the provider name (set by ``iModel``).
        model: passed to the CLI (``--model``/``-m``) when not ``None``.
        cli_command: the executable and its leading arguments, a list or a
            shell-like string (default: the provider's executable name).
            Provider arguments are appended, then ``args``.
        timeout: seconds for the whole run (``None``: no limit); past it the
            process group is killed and :class:`CLITimeoutError` raised.
        env: variables set on top of the inherited environment. Values of
            names containing KEY, TOKEN, SECRET, PASSWORD, CREDENTIAL or
            AUTH are redacted from errors and never shown by ``repr``.
        inherit_env: start from this process's environment (default); when
            false the CLI sees ``env`` only.
        cwd: the working directory of the CLI.
        args: extra arguments appended after the provider's.
        system: text sent as the system prompt addition (Claude Code
            ``--append-system-prompt``; Codex: prefixed to the prompt).
        kill_grace: seconds between SIGTERM and SIGKILL of the group.
        linger: seconds to wait, after the CLI exited, for descendants that
            still hold its pipes; they are killed after that.
        stderr_tail: how many trailing bytes of stderr errors carry.
        max_line_bytes: the longest stdout line decoded; a longer one is
            skipped (memory stays bounded) and fails the turn with
            :class:`CLIStreamError`.
        max_repair_scans: how many ``{"type":`` markers of a broken line
            are tried when looking for an event written into it.
        base_url, api_key, home: the server preset (docs/cli.md): point the
            CLI at ``base_url`` with ``api_key``, non-interactive, with its
            state in ``home`` (default: a private temporary folder made on
            the first run). What each provider sets is in its class
            docstring; ``env`` and ``args`` given here come after it.

    Secrets are redacted from errors, logs and recordings: values of
    secret-named ``env`` variables, and in ``args`` the value of a flag
    naming a key, token, secret, password or auth (``--api-key V``,
    ``--api-key=V``, ``-k V``) and of a ``NAME=VALUE`` argument whose name
    does.
    """

    is_cli: ClassVar[bool] = True
    #: The CLI says when the answer was cut off at a token limit.
    reports_cuts: ClassVar[bool] = True
    default_executable: ClassVar[str] = ""
    #: The registered provider this class serves (:mod:`lionops.endpoints.registry`):
    #: its ``otel_name`` is this endpoint's when no ``provider`` is given.
    provider_name: ClassVar[str] = ""
    collector_class: ClassVar[type[_Collector]] = _Collector

    def __init__(
        self,
        provider: str | None = None,
        model: str | None = None,
        *,
        cli_command: str | Sequence[str] | None = None,
        timeout: float | None = 600.0,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = True,
        cwd: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        system: str | None = None,
        kill_grace: float = 2.0,
        linger: float = 2.0,
        stderr_tail: int = 4096,
        max_line_bytes: int = 64 * 1024 * 1024,
        max_repair_scans: int = 16,
        base_url: str | None = None,
        api_key: str | None = None,
        home: str | os.PathLike[str] | None = None,
    ) -> None:
        if cli_command is None:
            cli_command = [self.default_executable]
        elif isinstance(cli_command, str):
            cli_command = shlex.split(cli_command)
        if not cli_command:
            raise ConfigurationError("cli_command must name an executable")
        self.provider = provider or self.default_executable
        self.otel_name = otel_provider_name(provider or self.provider_name) or self.provider
        self.model = model
        self.cli_command = [str(c) for c in cli_command]
        self.timeout = timeout
        self.env = dict(env or {})
        self.inherit_env = inherit_env
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.args = [str(a) for a in args]
        self.system = system
        self.kill_grace = kill_grace
        self.linger = linger
        self.stderr_tail = stderr_tail
        LineDecoder(max_line_bytes=max_line_bytes, max_repair_scans=max_repair_scans)  # validates
        self.max_line_bytes = max_line_bytes
        self.max_repair_scans = max_repair_scans
        # The preset's URL may hold credentials (user info, a key in the query):
        # the child gets it through its environment or a 0600 file, never its
        # argv; ``base_url`` is the form shown and recorded: without user info
        # and query, as the HTTP endpoint shows its own.
        self._base_url = base_url
        self.base_url = scrub_url(base_url) if base_url is not None else None
        self.home = os.fspath(home) if home is not None else None
        if base_url is not None:
            preset_env, preset_args = self.preset(base_url, api_key)
            self.env = {**preset_env, **self.env}
            self.args = [*preset_args, *self.args]
        elif api_key is not None:
            raise ConfigurationError(
                "api_key= is part of the server preset: give base_url= too, or pass the key in env=")

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(provider={self.provider!r}, model={self.model!r}, "
            f"cli_command={self.cli_command[:1]!r}..., timeout={self.timeout!r}, env_keys={sorted(self.env)})"
        )

    # -- provider specifics

    def argv(self, options: Mapping[str, Any] | None = None, system: str | None = None) -> list[str]:
        """The full command line (the prompt goes to stdin); ``system`` overrides ``self.system``."""
        raise NotImplementedError

    def stdin_text(self, prompt: str, system: str | None = None) -> str:
        """What is written to the CLI's stdin for ``prompt``."""
        return prompt

    def _extra(self, options: Mapping[str, Any] | None) -> list[str]:
        return self.args + [str(a) for a in (options or {}).get("cli_args", ())]

    # -- running

    # -- the server preset

    def preset(self, base_url: str, api_key: str | None) -> tuple[dict[str, str], list[str]]:
        """``(env, args)`` pointing the CLI at ``base_url`` (see the class docstring)."""
        raise ConfigurationError(f"{type(self).__name__} has no server preset")

    def state_dir(self) -> str:
        """The CLI's private state folder of the preset (``home``, else a
        temporary folder made once per endpoint)."""
        if self.home is None:
            self.home = tempfile.mkdtemp(prefix=f"lionops-{self.provider}-")
        os.makedirs(self.home, exist_ok=True)
        return self.home

    def state_files(self) -> dict[str, str | None]:
        """Files the CLI needs before it starts: path -> text (``None``: a folder)."""
        return {}

    def secret_files(self) -> dict[str, str]:
        """Files holding credentials the CLI reads (path -> text): written anew
        before every start, readable by the owner only (mode 0600)."""
        return {}

    def prepare(self) -> None:
        """Make the :meth:`state_files` that do not exist yet and write the
        :meth:`secret_files` (called by :meth:`spawn` only)."""
        for path, secret in self.secret_files().items():
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            atomic_write_text(path, secret)  # made by mkstemp: mode 0600 from the start
            os.chmod(path, 0o600)
        for path, text in self.state_files().items():
            if text is None:
                os.makedirs(path, exist_ok=True)
            elif not os.path.exists(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(text)

    # -- running

    def secrets(self, argv: Sequence[str] = ()) -> list[str]:
        """Secret values of ``env`` (secret-named variables, and credentials
        written inside any value), ``args`` and ``argv``, longest first."""
        found = secret_variables(self.env)
        # A credential inside another variable's value (``EXTRA_HEADERS="Authorization: Bearer V"``).
        found += [s for v in self.env.values() for s in embedded_secrets(v)]
        found += argv_secrets(self.args) + argv_secrets(argv)
        if self._base_url is not None:
            found += url_secrets(self._base_url)
        return sorted({v for v in found if len(v) >= 4}, key=len, reverse=True)

    def redact(self, text: str, mark: str = REDACTED, argv: Sequence[str] = ()) -> str:
        """``text`` with the secrets of ``env``, ``args`` and ``argv`` replaced by ``mark``."""
        return replace_secrets(text, self.secrets(argv), mark)

    def scrub(self, text: str) -> str:
        """``text`` with secret ``env`` values replaced by ``***`` (the mark of cassettes)."""
        return self.redact(text, MARK)

    async def aclose(self) -> None:
        """Nothing to release: every run's process group is stopped and reaped
        before :meth:`run` returns (the ``home`` folder stays for the next run)."""

    def _environ(self) -> dict[str, str]:
        env = dict(os.environ) if self.inherit_env else {}
        env.update(self.env)
        if self.base_url is not None:
            env.update(self.state_env())
        return env

    def state_env(self) -> dict[str, str]:
        """Variables naming the preset's state folder (set at spawn time)."""
        return {}

    def _error(self, cls: type[CLIError], message: str, run: CLIRun, argv: Sequence[str] = (),
               **kw: Any) -> CLIError:
        return cls(self.redact(message, argv=argv), provider=self.provider, returncode=run.returncode,
                   stderr_tail=self.redact(run.stderr_tail, argv=argv), run=run, **kw)

    async def run(
        self,
        prompt: str,
        *,
        system: str | None = None,
        options: Mapping[str, Any] | None = None,
        sink: Sink | None = None,
        on_tool: Callable[[CLIToolEvent], None] | None = None,
    ) -> CLIRun:
        """Run one turn for ``prompt`` and return what it produced.

        ``system`` (default: the endpoint's ``system``) is the system prompt
        addition. ``sink`` is awaited with every raw stdout chunk as it
        arrives (before it is decoded); ``on_tool`` is called with each CLI
        tool event.
        ``options`` are per-call model options (``cli_args``: extra argv).

        Raises:
            CLIProcessError: the CLI could not start, exited non-zero, was
                killed, or ended without a final result event.
            CLITimeoutError: it ran past ``timeout`` seconds.
            CLIStreamError: a stdout line was corrupt and not repairable.
            CLIResultError: the final result reports an error (``is_error``).
        """
        run = CLIRun(provider=self.provider)
        collector = self.collector_class(run, on_tool)
        decoder = LineDecoder(max_line_bytes=self.max_line_bytes, max_repair_scans=self.max_repair_scans)
        system = system if system is not None else self.system
        argv = self.argv(options, system)
        stdout = CLIStdout(decoder, collector, sink)
        transport = current_runtime().cli_transport
        stdin = self.stdin_text(prompt, system)
        if transport is None:
            done = await self.spawn(argv, stdin, stdout)
        else:
            done = await transport(self, argv, stdin, stdout)
        run.pid, run.returncode = done.pid, done.returncode
        run.stderr_tail = self.redact(done.stderr, argv=argv)
        if done.start_error is not None:
            raise self._error(CLIProcessError, f"{self.provider}: could not start {argv[0]!r}: {done.start_error}",
                              run, argv)
        collector.finish()
        run.counts.update(decoder.counts)
        run.corrupt = decoder.corrupt
        run.oversized = decoder.oversized
        run.warnings = [self.redact(w, argv=argv) for w in run.warnings]
        self._check(run, done.timed_out, argv)
        return run

    async def spawn(self, argv: list[str], stdin: str, stdout: CLIStdout) -> CLIExit:
        """Run ``argv`` as a subprocess: write ``stdin`` to it, hand its stdout
        to ``stdout`` as it arrives, keep the stderr tail, stop it at
        ``timeout``, and terminate its process group and reap it whatever
        happens. A start failure is returned (``start_error``), not raised;
        a failing sink raises its own exception."""
        try:
            self.prepare()
            # Shielded: a cancellation landing while the child is being spawned
            # (trio spawns in a worker thread) must not lose the process handle.
            with anyio.CancelScope(shield=True):
                process = await anyio.open_process(
                    argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                    cwd=self.cwd, env=self._environ(), start_new_session=True,
                )
        except OSError as exc:
            return CLIExit(start_error=str(exc))
        tail = _Tail(self.stderr_tail)
        stopped = False
        try:
            with anyio.move_on_after(self.timeout) as deadline:
                try:
                    stopped = await self._pump(process, stdin, stdout, tail)
                except BaseExceptionGroup as group:
                    # A failing sink (disk full, ...) surfaces as itself.
                    if len(group.exceptions) == 1 and isinstance(group.exceptions[0], Exception):
                        raise group.exceptions[0] from None
                    raise
        finally:
            await self._terminate(process)
        returncode = process.returncode
        if stopped and returncode is not None and returncode >= 0:
            # Stopped by lionops after its result, though the CLI exited with a
            # code of its own on the signal: reported as the signal.
            returncode = -signal.SIGTERM
        return CLIExit(returncode=returncode, stderr=tail.text(), timed_out=deadline.cancelled_caught,
                       pid=process.pid)

    async def _pump(self, process: anyio.abc.Process, stdin: str, stdout: CLIStdout, tail: _Tail) -> bool:
        """Feed stdin, read stdout and stderr until the turn is over; true when
        the CLI had to be stopped after its result (it did not exit in time)."""
        stopped: list[bool] = []
        stdout_done = anyio.Event()
        stderr_done = anyio.Event()
        assert process.stdin is not None and process.stdout is not None and process.stderr is not None

        async def feed() -> None:
            try:
                await process.stdin.send(stdin.encode("utf-8"))  # type: ignore[union-attr]
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                pass  # the CLI exited without reading; its exit status tells why
            finally:
                with anyio.CancelScope(shield=True):
                    await process.stdin.aclose()  # type: ignore[union-attr]

        async def drain_stderr() -> None:
            try:
                async for chunk in process.stderr:  # type: ignore[union-attr]
                    tail.add(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            finally:
                stderr_done.set()

        async def reap(scope: anyio.CancelScope) -> None:
            # After the CLI exits, descendants holding its pipes get `linger`
            # seconds, then the group is killed so the pipes close.
            await process.wait()
            with anyio.move_on_after(self.linger):
                await stdout_done.wait()
            _signal_group(process.pid, signal.SIGKILL)
            with anyio.move_on_after(self.linger):
                await stderr_done.wait()
            scope.cancel()

        async def end_after_result(scope: anyio.CancelScope) -> None:
            # A final result (or a fatal oversized line) ends the turn: the CLI
            # gets `linger` seconds to exit by itself, then its group is stopped
            # (it may keep running, or keep stdout open, after its result).
            await stdout.turn_over.wait()
            with anyio.move_on_after(self.linger):
                await process.wait()
            if process.returncode is None:
                stopped.append(True)
                _signal_group(process.pid, signal.SIGTERM)
                with anyio.move_on_after(self.kill_grace):
                    await process.wait()
            _signal_group(process.pid, signal.SIGKILL)
            with anyio.move_on_after(self.linger):
                await stdout_done.wait()
            with anyio.move_on_after(self.linger):
                await stderr_done.wait()
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(feed)
            tg.start_soon(drain_stderr)
            tg.start_soon(reap, tg.cancel_scope)
            tg.start_soon(end_after_result, tg.cancel_scope)
            try:
                async for chunk in process.stdout:
                    await stdout.feed(chunk)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass
            stdout.end()
            stdout_done.set()
        return bool(stopped)

    async def _terminate(self, process: anyio.abc.Process) -> None:
        """SIGTERM the group, SIGKILL it after ``kill_grace``, reap the child (shielded)."""
        with anyio.CancelScope(shield=True):
            if process.returncode is None:
                _signal_group(process.pid, signal.SIGTERM)
                with anyio.move_on_after(self.kill_grace):
                    await process.wait()
            # Descendants that outlived the CLI die with the group.
            _signal_group(process.pid, signal.SIGKILL)
            if process.returncode is None:
                await process.wait()
            # SIGKILL is delivered asynchronously: wait (bounded) until no
            # member of the group runs any more.
            with anyio.move_on_after(max(self.kill_grace, 1.0)):
                while _group_running(process.pid):
                    await anyio.sleep(0.005)
            await process.aclose()

    def _check(self, run: CLIRun, timed_out: bool, argv: Sequence[str] = ()) -> None:
        name = self.provider
        if timed_out:
            raise self._error(CLITimeoutError, f"{name}: no result within {self.timeout} s; process group killed",
                              run, argv)
        if run.is_error:
            raise self._error(
                CLIResultError,
                f"{name}: the CLI reported failure ({run.subtype}): {run.error_message}; "
                f"it {_describe_exit(run.returncode)}",
                run, argv, subtype=run.subtype,
            )
        if run.oversized is not None:
            line, preview = run.oversized
            raise self._error(
                CLIStreamError,
                f"{name}: stdout line {line} is longer than max_line_bytes ({self.max_line_bytes}) and was "
                f"not decoded: {preview!r}",
                run, argv, line=line, preview=preview,
            )
        if run.returncode != 0 and not run.ended_after_result and not (run.finished and run.cut):
            raise self._error(CLIProcessError, f"{name}: the CLI {_describe_exit(run.returncode)}", run, argv)
        if run.corrupt is not None:
            line, preview = run.corrupt
            raise self._error(
                CLIStreamError,
                f"{name}: stdout line {line} is corrupt JSON and could not be repaired: {preview!r}",
                run, argv, line=line, preview=preview,
            )
        if not run.finished:
            raise self._error(
                CLIProcessError, f"{name}: the stream ended without a final result event (exit status 0)", run, argv,
            )
