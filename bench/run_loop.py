"""A three-round ``Branch.run()`` against three ``operate_traced()`` calls doing the same rounds.

    python bench/run_loop.py [--number 300] [--repeat 5]

Each run: round 1 and 2 ask for one trivial sync tool, round 3 answers
(a Middle that answers at once, validating a canned dict into the response
type it is handed). Prints the best of ``--repeat`` runs of ``--number`` runs,
in µs per run, for the loop and for the same three rounds called by hand
(with the same instructions), on one fresh Branch per run; the difference
is what the run machine costs.
"""

from __future__ import annotations

import argparse
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

    t0 = time.perf_counter()
    for _ in range(n):
        await Branch(tools=[get_weather]).run("weather?", response_format=Answer, middle=_middle())
    return time.perf_counter() - t0


async def _by_hand(n: int) -> float:
    from lionops import Branch
    from lionops.pipeline.loop import NEXT_ROUND_INSTRUCTION

    t0 = time.perf_counter()
    for _ in range(n):
        branch, middle = Branch(tools=[get_weather]), _middle()
        for instruction in ("weather?", NEXT_ROUND_INSTRUCTION, NEXT_ROUND_INSTRUCTION):
            await branch.operate_traced(instruction=instruction, response_format=Answer, actions=True, middle=middle)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--number", type=int, default=300)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    for label, fn in (("branch.run (3 rounds)", _loop), ("3 x operate_traced", _by_hand)):
        best = min(anyio.run(fn, args.number) for _ in range(args.repeat)) / args.number * 1e6
        print(f"{label}: {best:.1f} µs per run")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
