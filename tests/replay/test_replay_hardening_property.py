"""Properties over mutated cassettes and traces (hypothesis, tests/strategies.py).

A real recording (loopback HTTP server, tools, a denial) is mutated at a
random place: a value replaced by a hostile one, a key dropped or added, a
value wrapped, moved or nested deep, the text cut or a byte changed. Then:

- loading it either gives a cassette or raises ``CassetteError``;
- replaying what loads (rebuilt from the cassette alone) either returns,
  raises ``CassetteError`` or ``ReplayDivergence``, or re-raises the error
  the recording itself ended with; nothing else escapes (no RecursionError,
  KeyError, TypeError, ValueError of lionops' own making);
- ``Trace.from_dict`` of a mutated trace gives a trace or raises ``ValueError``.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lionops.errors import TraceFormatError
from lionops.replay import Cassette, CassetteError, ReplayDivergence, replay
from lionops.trace import Trace
from tests.replay.test_replay_hardening import ANSWER, record_run
from tests.strategies import hostile_value, json_values

DEEP = "<deep>"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path: Path = tmp_path_factory.mktemp("property") / "run.json"
    anyio.run(record_run, path, ANSWER)
    return json.loads(path.read_text())


def _places(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``value`` (the root included)."""
    out = [path]
    if isinstance(value, dict):
        for k, v in value.items():
            out.extend(_places(v, (*path, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.extend(_places(v, (*path, i)))
    return out


def _get(data: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        data = data[part]
    return data


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = {"k": value}
    return value


#: What an editor (or an attacker) may put anywhere in a cassette.
cassette_values = st.one_of(
    hostile_value.filter(lambda v: not isinstance(v, bytes)),
    json_values,
    st.sampled_from([10**30, -1, 2**63, 1e308, "x" * 100_000, "", "(a|aa)+$", "rm -rf", "__init__", [],
                     {}, DEEP, _nested(300), {"$ref": "#/$defs/Self"}, {"kind": "cli", "command": []},
                     {"function": {"name": "rm -rf"}}, "prepare", "act", "failed", True]),
)


def fresh(draw: st.DrawFn) -> Any:
    """A drawn cassette value, copied: the sampled constants must never be changed by a later edit."""
    return copy.deepcopy(draw(cassette_values))


def _mutate(draw: st.DrawFn, data: dict[str, Any], how: str) -> None:
    """One structural change to ``data`` at a place drawn from all of its places."""
    places = _places(data)
    path = draw(st.sampled_from(places[1:]))
    parent, key = _get(data, path[:-1]), path[-1]
    if how == "replace":
        parent[key] = fresh(draw)
    elif how == "drop":
        del parent[key]
    elif how == "add":
        target = _get(data, path)
        if isinstance(target, dict):
            target[draw(st.sampled_from(["extra", "index", "kind", "$defs", "trace"]))] = fresh(draw)
        elif isinstance(target, list):
            target.append(fresh(draw))
        else:
            parent[key] = [target, fresh(draw)]
    elif how == "wrap":
        parent[key] = [parent[key]] if draw(st.booleans()) else {"value": parent[key]}
    else:  # move: another place's value (not one inside this place) put here
        other = draw(st.sampled_from(places))
        if not (len(other) >= len(path) and other[: len(path)] == path):
            parent[key] = copy.deepcopy(_get(data, other))


@st.composite
def mutated(draw: st.DrawFn, doc: dict[str, Any]) -> str:
    """``doc`` changed in one to three places, then perhaps cut or given a stray byte, as text."""
    data = copy.deepcopy(doc)
    for _ in range(draw(st.integers(1, 3))):
        if isinstance(data, dict) and len(_places(data)) > 1:
            _mutate(draw, data, draw(st.sampled_from(["replace", "replace", "replace", "drop", "add", "wrap", "move"])))
    text = json.dumps(data).replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000)
    how = draw(st.sampled_from(["keep", "keep", "keep", "cut", "byte"]))
    if how == "keep":
        return text
    at = draw(st.integers(0, len(text) - 1))
    if how == "cut":
        return text[:at]
    return text[:at] + draw(st.sampled_from(["\x00", "{", "]", '"', "\\"])) + text[at + 1:]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@given(data=st.data())
def test_a_mutated_cassette_loads_or_is_a_cassette_error_and_replays_without_stray_errors(recorded, backend, data):
    text = data.draw(mutated(recorded), label="cassette")
    try:
        cassette = Cassette.loads(text)
    except CassetteError as exc:
        assert "\n" not in str(exc)
        return
    try:
        anyio.run(functools.partial(replay, cassette), backend=backend)
    except (CassetteError, ReplayDivergence):
        pass
    except Exception as exc:  # only the error the recording itself ended with
        ended = cassette.operations[0].outcome.error if cassette.operations else None
        assert ended is not None and ended.type == type(exc).__name__, repr(exc)


@given(data=st.data())
def test_a_mutated_trace_reads_or_is_a_value_error(recorded, data):
    trace = copy.deepcopy(recorded["operations"][0]["trace"])
    places = _places(trace)
    path = data.draw(st.sampled_from(places[1:]))
    parent = _get(trace, path[:-1])
    if data.draw(st.booleans()):
        parent[path[-1]] = copy.deepcopy(data.draw(cassette_values.filter(lambda v: v != DEEP)))
    else:
        del parent[path[-1]]
    try:
        Trace.from_dict(trace)
    except ValueError as exc:
        assert type(exc) is TraceFormatError and str(exc)
