"""Record and replay: recorded ``operate()`` runs as deterministic tests.

A *cassette* (plain JSON, validated by pydantic, versioned) holds one or
more runs: the normalized call, the adapter's raw exchanges, every tool call with its authorization decision
and output, the trace and the outcome — redacted before anything is written.
Replay re-runs the whole machine with the transport (HTTP, or a CLI
agent's stream lines) served from the cassette, no network and no
subprocess, and the tools returning their recorded outputs, and raises
:class:`ReplayDivergence` at the first difference.

    traced = await record("cassettes/trip.json", branch, instruction=..., response_format=Plan)
    traced = await replay("cassettes/trip.json", branch, instruction=..., response_format=Plan)
    traced = await replay("cassettes/trip.json")          # everything rebuilt from the cassette

:class:`CassetteSession` adds record modes (``none``, ``once``,
``new_episodes``, ``all``); the pytest fixture ``lionops_cassette`` is one
session per test. See docs/replay.md.
"""

from .._redact import DEFAULT_PATTERNS, Redactor, pattern_problem
from .cassette import CASSETTE_VERSION, Cassette, CassetteError, CassetteNotFoundError, Operation
from .cli import CliRecorder, CliReplay
from .divergence import ReplayDivergence
from .session import RECORD_MODES, CassetteSession, RecordMode, record, replay
from .transport import RecordingTransport, ReplayTransport

__all__ = [
    "Cassette", "Operation", "CassetteError", "CassetteNotFoundError", "CASSETTE_VERSION",
    "ReplayDivergence", "Redactor", "DEFAULT_PATTERNS", "pattern_problem", "CassetteSession", "RecordMode",
    "RECORD_MODES", "record", "replay", "RecordingTransport", "ReplayTransport", "CliRecorder", "CliReplay",
]
