"""The loopback HTTP server base of the test peers, from :mod:`lionops.testing.native`.

``LoopbackPeer`` is :class:`lionops.testing.native.LoopbackServer` recording
headers as sent (the tests check which credential header a client used);
subclasses implement ``answer(path, request)``. ``Answer`` is
:class:`lionops.testing.native.NativeReply`.
"""

from __future__ import annotations

from typing import Any

from lionops.testing.native import LoopbackServer, NativeReply, sse

__all__ = ["Answer", "LoopbackPeer", "Tripwire", "sse"]

Answer = NativeReply


class LoopbackPeer(LoopbackServer):
    """Start with ``with Peer(...) as peer:``; ``peer.base_url`` is its address."""

    def __init__(self) -> None:
        super().__init__(redact=False)


class Tripwire(LoopbackPeer):
    """A peer that answers nothing and records every request (``CONNECT`` too).

    Set as ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` of a CLI (with
    ``NO_PROXY`` naming loopback), it catches any attempt of a proxy-aware
    client to reach another host: ``paths`` must stay empty.
    """

    def __init__(self) -> None:
        super().__init__()
        peer = self

        def do_connect(self: Any) -> None:
            with peer._lock:
                peer.paths.append(f"CONNECT {self.path}")
            self._not_found()

        self.handler_class.do_CONNECT = do_connect  # type: ignore[attr-defined]

    def answer(self, path: str, request: dict[str, Any]) -> Answer | None:
        return None

    def proxy_env(self) -> dict[str, str]:
        url = self.base_url
        return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "ALL_PROXY": url, "http_proxy": url, "https_proxy": url,
                "all_proxy": url, "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
