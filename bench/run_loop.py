"""A three-round ``Branch.run()`` against three ``operate_traced()`` calls doing the same rounds.

    python bench/run_loop.py [--number 300] [--repeat 5]

Each run: round 1 and 2 ask for one trivial sync tool, round 3 answers
(a Middle that answers at once, validating a canned dict into the response
type it is handed). The loop and the same three rounds called by hand (with
the same instructions and action strategy), on one fresh Branch per run,
are timed in pairs, in alternating order, so both sides of a pair see the
same machine load. Prints, in µs per run of process CPU time, the best of
``--repeat`` blocks of ``--number`` runs for each side, and the median of
the paired ratios; the difference is what the run machine costs. The load
average at the start and the end is printed with them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import Any

import anyio
from pydantic import BaseModel


class Answer(BaseModel):
    city: str
    summary: str


def get_weather(city: str) -> dict[str, Any]:
    """Weather for a city."""
    return {"city": city, "temp_c": 21}


_ASK = {"city": "?", "summary": "", "action_requests": [{"function": "get_weather", "arguments": {"city": "L"}}]}
_ANSWER = {"city": "L", "summary": "21"}


def _middle() -> Any:
    script = [_ASK, _ASK, _ANSWER]

    async def middle(branch: Any, instruction: Any, chat_param: Any, parse_param: Any = None,
                     clear_messages: bool = False, skip_validation: bool = False) -> Any:
        return parse_param.response_format.model_validate(script.pop(0))

    return middle


async def _loop(n: int) -> float:
    from lionops import Branch

    t0 = time.process_time()
    for _ in range(n):
        await Branch(tools=[get_weather]).run("weather?", response_format=Answer, middle=_middle())
    return time.process_time() - t0


async def _by_hand(n: int) -> float:
    from lionops import Branch
    from lionops.pipeline.loop import NEXT_ROUND_INSTRUCTION

    t0 = time.process_time()
    for _ in range(n):
        branch, middle = Branch(tools=[get_weather]), _middle()
        for instruction in ("weather?", NEXT_ROUND_INSTRUCTION, NEXT_ROUND_INSTRUCTION):
            await branch.operate_traced(instruction=instruction, response_format=Answer, actions=True, middle=middle,
                                        action_strategy="concurrent")
    return time.process_time() - t0


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--number", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"load average at start: {_load()}")
    anyio.run(_loop, 20)  # warm both paths (imports, schema caches) before timing
    anyio.run(_by_hand, 20)
    loop_times: list[float] = []
    hand_times: list[float] = []
    for i in range(args.repeat):
        pair = (_loop, _by_hand) if i % 2 == 0 else (_by_hand, _loop)
        for fn in pair:
            (loop_times if fn is _loop else hand_times).append(anyio.run(fn, args.number) / args.number * 1e6)
    ratios = sorted(a / b for a, b in zip(loop_times, hand_times, strict=True))
    print(f"branch.run (3 rounds): {min(loop_times):.1f} µs CPU per run (best of {args.repeat} x {args.number})")
    print(f"3 x operate_traced:    {min(hand_times):.1f} µs CPU per run (best of {args.repeat} x {args.number})")
    print(f"paired ratio run / by hand: median {statistics.median(ratios):.3f} "
          f"(min {ratios[0]:.3f}, max {ratios[-1]:.3f})")
    print(f"load average at end: {_load()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
