"""Test and demo support shipped with lionops: a loopback OpenAI-compatible server."""

from .openai_server import (
    OpenAIServer,
    Reply,
    chunked,
    completion,
    error_body,
    load_recording,
    replay,
    tool_call,
)

__all__ = ["OpenAIServer", "Reply", "chunked", "completion", "error_body", "load_recording", "replay", "tool_call"]
