"""Profile lionops on S1, S2, S3, S5-1 and H2 with pyinstrument (``make bench`` installs it).

    python bench/profile.py [--seconds 2] [--system lionops] [--scenarios S1,S2,S3,S5-1,H2]
    python bench/profile.py --waiting [--system reference]   # what an S4 call holds while it waits

S1, S2, S3 and S5-1 run in-process with the zero-latency Middle; H2 runs the real
API adapter against the loopback peer (``bench/peer.py``, its own process),
a fresh Branch per call; the wait for the peer's answer shows under the
event loop's ``select``, not under the call. Writes ``out/bench/profile-<scenario>.txt`` (call
trees, frames under 2% hidden) and prints them.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from common import SCENARIOS  # noqa: E402
from systems import build  # noqa: E402


async def profile(case: tuple[Any, Any], label: str, seconds: float) -> str:
    from pyinstrument import Profiler
    new_branch, call = case
    branch = new_branch()
    for _ in range(50):
        await call(branch)
    profiler = Profiler(interval=0.0001, async_mode="disabled")
    calls, t0 = 0, time.perf_counter()
    profiler.start()
    while time.perf_counter() - t0 < seconds:
        branch = new_branch()
        for _ in range(20):
            await call(branch)
        calls += 20
    profiler.stop()
    head = f"{label}: {calls} calls in {seconds:.1f} s under the profiler\n"
    return head + profiler.output_text(unicode=False, color=False, show_all=False,
                                       timeline=False, processor_options={"filter_threshold": 0.02})


async def waiting(system: str, calls: int = 1000, top: int = 15) -> str:
    """What an S4 call holds while it waits in its Middle: ``calls`` calls on
    their own branches (made before the first snapshot), ``tracemalloc``
    snapshots before they start and while all of them wait; per call, by
    the line that allocated it."""
    import gc
    import tracemalloc

    from common import S4_SLEEP

    new_branch, call = build(system).scenario("structured", 0, S4_SLEEP)
    warm = [new_branch() for _ in range(20)]
    await asyncio.gather(*(call(b) for b in warm))
    branches = [new_branch() for _ in range(calls)]
    gc.collect()
    tracemalloc.start(10)
    before = tracemalloc.take_snapshot()
    tasks = [asyncio.ensure_future(call(b)) for b in branches]
    await asyncio.sleep(S4_SLEEP / 2)  # every call is in its Middle's sleep now
    during = tracemalloc.take_snapshot()
    await asyncio.gather(*tasks)
    tracemalloc.stop()
    diff = during.compare_to(before, "lineno")
    lines = [f"{system}: {sum(d.size_diff for d in diff) / calls:,.0f} bytes a waiting call ({calls} calls)"]
    for d in diff[:top]:
        frame = d.traceback[0]
        lines.append(f"{d.size_diff / calls:8,.0f}  {frame.filename}:{frame.lineno}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--system", default="lionops")
    ap.add_argument("--scenarios", default="S1,S2,S3,S5-1,H2")
    ap.add_argument("--out", default=str(HERE.parent / "out" / "bench"))
    ap.add_argument("--waiting", action="store_true", help="what an S4 call holds while it waits (tracemalloc)")
    args = ap.parse_args()
    if args.waiting:
        print(asyncio.run(waiting(args.system)))
        return 0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for scenario in args.scenarios.split(","):
        if scenario in SCENARIOS:
            case = build(args.system).scenario(*SCENARIOS[scenario])
            text = asyncio.run(profile(case, f"{args.system} {scenario}", args.seconds))
        else:
            import e2e
            from peer import Peer

            with Peer() as peer:
                case = e2e.build(args.system, peer.root).case(scenario)
                text = asyncio.run(profile(case, f"{args.system} {scenario} (HTTP)", args.seconds))
        (out / f"profile-{scenario}.txt").write_text(text)
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
