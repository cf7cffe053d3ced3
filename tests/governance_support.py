"""Shared helpers of the governance tests: one scenario through the API path
(a real HTTP server on loopback), the CLI path (the fake CLI subprocess) and a
custom Middle, with real tool functions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lionops import Branch, Traced
from lionops.testing import OpenAIServer, completion

from .cli_support import fake_model
from .helpers import Answer, ScriptedMiddle, as_response
from .openai_server import make_model

#: The three ways an answer with action requests reaches act().
PATHS = ["api", "cli", "middle"]


def cli_session(directory: Path, text: str) -> Path:
    """A stream-json session whose final answer is ``text``."""
    sid = "6a1f0c2e-0d4b-4c1e-9a3f-2b8d6e4c1a91"
    lines = [
        {"type": "system", "subtype": "init", "session_id": sid, "tools": [], "model": "claude-sonnet-4-5"},
        {"type": "assistant", "message": {"id": "msg_1", "type": "message", "role": "assistant",
                                          "model": "claude-sonnet-4-5",
                                          "content": [{"type": "text", "text": text}],
                                          "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 5}},
         "parent_tool_use_id": None, "session_id": sid},
        {"type": "result", "subtype": "success", "is_error": False, "num_turns": 1, "result": text,
         "stop_reason": "end_turn", "session_id": sid,
         "usage": {"input_tokens": 5, "output_tokens": 5}},
    ]
    path = directory / "session.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def operate_via(path: str, tmp_path: Path, branch: Branch, requests: list[Any],
                      **kw: Any) -> Traced:
    """``branch.operate_traced(response_format=Answer, actions=True, **kw)``
    where the model answers ``{"answer": 1, "action_requests": requests}``
    through ``path``."""
    data = {"answer": 1, "action_requests": requests}
    kw = {"instruction": "go", "response_format": Answer, "actions": True, **kw}
    if path == "api":
        with OpenAIServer() as server:
            server.push(completion(json.dumps(data)))
            model = make_model(server)
            try:
                return await branch.operate_traced(chat_model=model, **kw)
            finally:
                await model.aclose()
    if path == "cli":
        session = cli_session(tmp_path, json.dumps(data))
        return await branch.operate_traced(chat_model=fake_model(str(session)), **kw)
    assert path == "middle"
    return await branch.operate_traced(middle=ScriptedMiddle(as_response(data)), **kw)
