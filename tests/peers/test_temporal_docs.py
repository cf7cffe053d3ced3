"""The complete example of docs/temporal.md, run as written.

Its three files are written to a temporary folder and ``main.py`` runs in a
subprocess against this session's dev server, with the model at the loopback
OpenAI-compatible server (``OPENAI_BASE_URL``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from lionops.testing import OpenAIServer, completion, tool_call
from tests.temporal_support import REPO, dev_server_address, requires_temporal

pytestmark = requires_temporal

DOC = REPO / "docs" / "temporal.md"


def example_files() -> dict[str, str]:
    text = DOC.read_text()
    return dict(re.findall(r"<!-- file: (\S+) -->\n```python\n(.*?)```", text, flags=re.S))


def _temporal_teardown_abort(done: subprocess.CompletedProcess[str]) -> bool:
    """The Temporal client's native threads can abort a short-lived process
    while the interpreter finalizes, after all its work is done: a known
    temporalio bug (github.com/temporalio/sdk-python/issues/300). Only that
    abort, with the whole output printed, is tolerated."""
    return (done.returncode == -6 and "Python runtime state: finalizing" in done.stderr
            and "PyGILState_Release" in done.stderr and len(done.stdout.splitlines()) == 3)


def test_the_documented_example_runs(tmp_path: Path):
    files = example_files()
    assert set(files) == {"store.py", "workflows.py", "main.py"}
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    reply = completion('{"summary": "Sold one teapot."}', tool_calls=[
        tool_call("price", {"item": "teapot"}), tool_call("charge", {"amount_cents": 1200}),
    ])
    with OpenAIServer(lambda _request: reply) as server:
        env = {**os.environ, "TEMPORAL_ADDRESS": dev_server_address(), "OPENAI_BASE_URL": server.base_url,
               "OPENAI_API_KEY": "sk-docs-example", "PYTHONPATH": str(tmp_path)}
        done = subprocess.run([sys.executable, "main.py"], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)
    assert done.returncode == 0 or _temporal_teardown_abort(done), done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert lines[0] == "Sold one teapot."
    assert lines[1] == "price 1200"
    assert lines[2].startswith("charge {'charged_cents': 1200, 'idempotency_key': 'sale-teapot/")
    assert len(server.chat_requests) == 1
