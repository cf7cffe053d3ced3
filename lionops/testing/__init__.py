"""Test and demo support shipped with lionops: loopback servers of the
OpenAI-compatible Chat Completions API (:class:`OpenAIServer`) and of the
native protocols (:class:`ResponsesServer`, :class:`AnthropicServer`,
:class:`GeminiServer`)."""

from .native import (
    AnthropicServer,
    GeminiServer,
    NativeReply,
    NativeServer,
    ResponsesServer,
    Turn,
    native_error,
    native_reply,
)
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

__all__ = ["OpenAIServer", "Reply", "chunked", "completion", "error_body", "load_recording", "replay", "tool_call",
           "ResponsesServer", "AnthropicServer", "GeminiServer", "NativeServer", "NativeReply", "Turn",
           "native_reply", "native_error"]
