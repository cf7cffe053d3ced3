"""Smoke test of the native-protocol rows (``bench/native.py``): every system
sends the body lionops sends and returns the same result, and one paired pass
of each case reaches the table. Timings are never asserted."""

from __future__ import annotations

import asyncio
from typing import Any


def test_native_systems_send_the_same_request_and_agree(bench):
    import native
    from native_peer import NativePeer

    async def each(root: str, peer: Any) -> None:
        for protocol, scenario in native._all_cases():
            sent, results = [], []
            for name in native.SYSTEMS:
                results.append((await native.BUILD[name](root, protocol, scenario)()).model_dump(exclude_none=True))
                sent.append((peer.paths[-1], peer.requests[-1]))
            assert results[0] == results[1] == results[2], (protocol, scenario)
            assert sent[0] == sent[1] == sent[2], (protocol, scenario)
            if scenario != "H1":
                assert [r["output"] for r in results[1]["action_responses"]] == [3, "hi"]
        part = await native.paired(root, 0.0, True, native._all_cases())
        table = native.render(part)
        assert table.count("\n") == 1 + len(native._all_cases())
        assert "| anthropic | H4 |" in table and "nan" not in table

    with NativePeer() as peer:
        asyncio.run(each(peer.base_url, peer))
