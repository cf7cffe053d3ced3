"""pytest plugin of lionops (entry point ``pytest11``): the ``lionops_cassette`` fixture.

A test asks for ``lionops_cassette`` (a :class:`lionops.replay.CassetteSession`)
and runs its operations through it::

    async def test_trip(lionops_cassette):
        branch = Branch(chat_model=iModel(provider="openai", model="gpt-4o-mini"), tools=[get_weather])
        result, trace = await lionops_cassette.operate_traced(branch, instruction="...", actions=True)

The first run records (a live endpoint is needed then); later runs replay
offline and fail with ``ReplayDivergence`` when the path changes. A
recording that fails before the model answers (the server is down, 5xx or
429 after the retries, a timeout, a CLI that cannot start) fails the test
and is not saved, so the next run records afresh. The
record mode (``none``, ``once``, ``new_episodes``, ``all``) comes from, in
order: ``--lionops-record-mode``, the marker
``@pytest.mark.lionops_cassette(record_mode=...)``, the ini option
``lionops_record_mode``, else ``once``. One cassette per test by default:
``<test dir>/cassettes/<module>/<test>.json`` (the anyio backend is not part
of the name, so asyncio and trio runs share one cassette). The marker also
takes ``path`` (relative to the test file's folder), ``patterns``, ``secrets``, ``redact`` and ``run_tools``.

Importing this module imports nothing of lionops: the fixture does, when used.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["lionops_cassette", "cassette_path"]

_MODES = ("none", "once", "new_episodes", "all")
_OPTION = "--lionops-record-mode"
_report_key = pytest.StashKey[pytest.TestReport]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lionops", "lionops record and replay")
    group.addoption(_OPTION, choices=_MODES, default=None,
                    help="record mode of the lionops_cassette fixture (overrides markers and ini)")
    parser.addini("lionops_record_mode", "default record mode of lionops_cassette (default: once)", default="once")
    parser.addini("lionops_cassette_dir", "cassette folder, relative to each test file's folder (default: cassettes)",
                  default="cassettes")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "lionops_cassette(path=None, record_mode=None, patterns=(), secrets=(), redact=True, run_tools=False): "
        "options of the lionops_cassette fixture",
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    if report.when == "call":
        item.stash[_report_key] = report
    return report


def cassette_path(node: pytest.Item, folder: str = "cassettes") -> Path:
    """``<test dir>/<folder>/<module>/<test name>.json``, the anyio backend
    left out of the name and unsafe characters replaced."""
    name = node.name
    callspec = getattr(node, "callspec", None)
    backend = callspec.params.get("anyio_backend") if callspec is not None else None
    if backend is not None and "[" in name:
        base, _, ids = name.partition("[")
        kept = [part for part in ids.rstrip("]").split("-") if part != str(backend)]
        name = f"{base}[{'-'.join(kept)}]" if kept else base
    safe = re.sub(r"[^\w.\-\[\]]+", "_", name)
    return Path(str(node.path)).parent / folder / Path(str(node.path)).stem / f"{safe}.json"


@pytest.fixture
def lionops_cassette(request: pytest.FixtureRequest) -> Iterator[Any]:
    """A :class:`lionops.replay.CassetteSession` for this test (see the module docstring).

    At teardown of a passing test, recorded operations left unreplayed fail
    the test with ``ReplayDivergence``.
    """
    from lionops.replay import CassetteSession

    marker = request.node.get_closest_marker("lionops_cassette")
    options = dict(marker.kwargs) if marker else {}
    marked_mode = options.pop("record_mode", None)
    mode = request.config.getoption(_OPTION) or marked_mode or request.config.getini("lionops_record_mode")
    path = options.pop("path", None)
    if path is None:
        path = cassette_path(request.node, request.config.getini("lionops_cassette_dir"))
    elif not Path(path).is_absolute():
        path = Path(str(request.node.path)).parent / path
    session = CassetteSession(path, mode, **options)
    yield session
    report = request.node.stash.get(_report_key, None)
    if report is None or report.passed:
        session.finish()
