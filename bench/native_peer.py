"""The loopback peer of the native-protocol scenarios (N-H1, N-H2, N-H4).

    python bench/native_peer.py          # prints "port N" when listening

Serves the three native protocols from ``tests/native_recordings.py`` (the
shapes the adapter tests use) under a scenario prefix: ``/h1/v1/responses``,
``/h2/v1/messages``, ``/h1/v1beta/models/<m>:generateContent``,
``...:streamGenerateContent?alt=sse``. ``h1`` answers the structured answer
as the text; ``h2`` the structured answer with the two tool calls of
:data:`common.H2_CALLS` inside it as ``action_requests`` (tools described in
the prompt, as lionops sends them). Streamed when the request asks for it.
Every answer is rendered once at start-up; the peer runs in its own process,
so a client's CPU time never includes it.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
for _dir in (str(HERE), str(HERE.parent)):
    if _dir not in sys.path:
        sys.path.insert(0, _dir)

from common import ANSWER, H2_CALLS  # noqa: E402
from tests.loopback_peer import Answer  # noqa: E402
from tests.native_recordings import PROTOCOLS, ScriptPeer, Turn, render  # noqa: E402


def _text(scenario: str) -> str:
    if scenario == "h1":
        return json.dumps(ANSWER)
    return json.dumps({**ANSWER, "action_requests": [{"function": n, "arguments": a} for n, a in H2_CALLS]})


def protocol_of(path: str) -> str:
    route = path.split("?")[0]
    if route.endswith("/responses"):
        return "openai_responses"
    if route.endswith("/messages"):
        return "anthropic"
    return "google"


#: the Messages API answers a structured call as the input of the forced answer tool
ANSWER_TOOL = "lionops_answer_ForecastRequest"


def _turn(protocol: str, scenario: str) -> Turn:
    if protocol == "anthropic":
        return Turn(calls=[("toolu_answer", ANSWER_TOOL, json.loads(_text(scenario)))])
    return Turn(text=_text(scenario))


def canned() -> dict[tuple[str, str, bool], Answer]:
    return {(p, s, stream): render(p, _turn(p, s), stream=stream)
            for p in PROTOCOLS for s in ("h1", "h2") for stream in (False, True)}


class NativePeer(ScriptPeer):
    """Answers by protocol (the path), scenario (its first segment) and stream flag."""

    def __init__(self) -> None:
        super().__init__(Answer(404, b"{}"))
        self.answers = canned()  # each sent in one write (the server buffers its head with the body)

    def answer(self, path: str, request: dict[str, Any]) -> Answer | None:
        with self._lock:  # keep only the last request of each kind (the smoke test reads them)
            del self.requests[:-8], self.paths[:-8], self.headers[:-8]
        scenario = path.lstrip("/").split("/", 1)[0]
        protocol = protocol_of(path)
        stream = bool(request.get("stream")) or "streamGenerateContent" in path
        return self.answers.get((protocol, scenario, stream))


def Peer() -> Any:  # noqa: N802 - used as bench/peer.py's class is
    """This peer as a child process: ``with Peer() as peer: peer.root``."""
    from peer import Peer as ChildPeer

    return ChildPeer(Path(__file__).resolve())


def main() -> int:
    with NativePeer() as peer:
        print(f"port {peer.base_url.rsplit(':', 1)[1]}", flush=True)
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
