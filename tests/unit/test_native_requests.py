"""The native request builders: pure functions from Chat Completions-shaped
messages and options to each protocol's body."""

from __future__ import annotations

import json

from lionops.endpoints.anthropic.request import messages_body
from lionops.endpoints.google.request import SYNTHETIC_ID, generate_body
from lionops.endpoints.openai_responses.request import responses_body

PNG = "data:image/png;base64,iVBORw0KGgo="
CITY = {"type": "object", "properties": {"city": {"type": "string"}}}
TOOLS = [{"type": "function", "function": {"name": "weather", "description": "Weather.", "parameters": CITY}}]
FORMAT = {"type": "json_schema", "json_schema": {"name": "Answer", "strict": True,
                                                 "schema": {"type": "object", "properties": {"a": {"type": "string"}},
                                                            "required": ["a"]}}}


def _call(call_id: str, city: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "weather", "arguments": json.dumps({"city": city})}}


HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": [{"type": "text", "text": "Look"}, {"type": "image_url", "image_url": {"url": PNG}}]},
    {"role": "assistant", "content": None, "tool_calls": [_call("c1", "Oslo"), _call("c2", "Rome")]},
    {"role": "tool", "tool_call_id": "c1", "content": '"sunny"'},
    {"role": "tool", "tool_call_id": "c2", "content": '"rain"'},
    {"role": "user", "content": "And now?"},
]


def test_messages_merge_turns_and_pair_tool_results():
    body = messages_body("claude", HISTORY, {"max_completion_tokens": 9, "stop": ["x"], "n": 1}, stream=False)
    assert body["system"] == "Be brief." and body["max_tokens"] == 9 and body["stop_sequences"] == ["x"]
    assert "n" not in body and "stream" not in body
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert body["messages"][0]["content"][1] == {"type": "image", "source": {
        "type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    assert [b["id"] for b in body["messages"][1]["content"]] == ["c1", "c2"]
    last = body["messages"][2]["content"]
    assert [b["type"] for b in last] == ["tool_result", "tool_result", "text"]  # results first
    assert [b["tool_use_id"] for b in last[:2]] == ["c1", "c2"]


def test_messages_send_thinking_back_and_only_answered_tool_uses():
    native = {"protocol": "anthropic", "content": [
        {"type": "thinking", "thinking": "hm", "signature": "sig=="},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "tool_use", "id": "c1", "name": "weather", "input": {"city": "Oslo"}},
        {"type": "tool_use", "id": "c9", "name": "weather", "input": {"city": "Nowhere"}}]}
    message = {"role": "assistant", "content": None, "tool_calls": [_call("c1", "Oslo")], "native": native}
    body = messages_body("claude", [{"role": "user", "content": "x"}, message], {}, stream=True)
    sent = body["messages"][1]["content"]
    assert sent[:2] == native["content"][:2]  # unchanged, signature included
    assert [b.get("id") for b in sent[2:]] == ["c1"]
    assert body["stream"] is True and body["max_tokens"] == 4096


def test_messages_structured_output_forces_the_answer_tool_unless_thinking():
    alone = messages_body("claude", [{"role": "user", "content": "x"}], {"response_format": FORMAT}, stream=False)
    assert alone["tool_choice"] == {"type": "tool", "name": "lionops_answer_Answer"}
    both = messages_body("claude", [{"role": "user", "content": "x"}], {"response_format": FORMAT, "tools": TOOLS},
                         stream=False)
    assert both["tool_choice"] == {"type": "any"} and [t["name"] for t in both["tools"]] == [
        "weather", "lionops_answer_Answer"]
    thinking = messages_body("claude", [{"role": "user", "content": "x"}], {
        "response_format": FORMAT, "thinking": {"type": "enabled", "budget_tokens": 2048}}, stream=False)
    assert thinking["tool_choice"] == {"type": "auto"}


def test_responses_items_pair_calls_and_outputs():
    body = responses_body("gpt", HISTORY, {"max_tokens": 7, "tools": TOOLS, "response_format": FORMAT},
                          stream=True)
    assert body["instructions"] == "Be brief." and body["max_output_tokens"] == 7 and body["stream"] is True
    assert body["input"][0]["content"][1] == {"type": "input_image", "image_url": PNG, "detail": "auto"}
    kinds = [(i.get("type"), i.get("call_id")) for i in body["input"][1:5]]
    assert kinds == [("function_call", "c1"), ("function_call", "c2"), ("function_call_output", "c1"),
                     ("function_call_output", "c2")]
    assert body["tools"] == [{"type": "function", "name": "weather", "parameters": TOOLS[0]["function"]["parameters"],
                              "description": "Weather.", "strict": False}]
    assert body["text"]["format"] == {"type": "json_schema", "name": "Answer",
                                      "schema": FORMAT["json_schema"]["schema"], "strict": True}


def test_responses_output_items_go_back_unchanged_with_only_answered_calls():
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    said = {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]}
    answered = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "weather",
                "arguments": '{"city":"Oslo"}'}
    unanswered = {**answered, "id": "fc_2", "call_id": "c2"}
    native = {"protocol": "openai_responses", "content": [reasoning, said, answered, unanswered]}
    with_call = {"role": "assistant", "content": "Checking.", "tool_calls": [_call("c1", "Oslo")], "native": native}
    assert responses_body("gpt", [with_call], {}, stream=False)["input"] == [reasoning, said, answered]
    alone = {"role": "assistant", "content": "", "native": {"protocol": "openai_responses", "content": [reasoning]}}
    assert responses_body("gpt", [alone], {}, stream=False)["input"] == []  # no item may follow: left out


def test_generate_content_names_function_responses_and_keeps_signatures():
    native = {"protocol": "google", "ids": [f"{SYNTHETIC_ID}0", "real-id"], "content": [
        {"text": "thinking", "thought": True},
        {"functionCall": {"name": "weather", "args": {"city": "Oslo"}}, "thoughtSignature": "c2ln"},
        {"functionCall": {"id": "real-id", "name": "weather", "args": {"city": "Rome"}}}]}
    history = [{"role": "user", "content": "x"},
               {"role": "assistant", "content": None, "native": native,
                "tool_calls": [_call(f"{SYNTHETIC_ID}0", "Oslo"), _call("real-id", "Rome")]},
               {"role": "tool", "tool_call_id": f"{SYNTHETIC_ID}0", "content": '"sunny"'},
               {"role": "tool", "tool_call_id": "real-id", "content": '{"sky": "rain"}'}]
    body = generate_body(history, {"temperature": 0.2, "max_tokens": 5, "stop": "END", "tools": TOOLS,
                                   "response_format": FORMAT})
    model = body["contents"][1]
    assert model["role"] == "model" and model["parts"][0] == {"text": "thinking", "thought": True}
    assert model["parts"][1] == {"functionCall": {"name": "weather", "args": {"city": "Oslo"}},
                                 "thoughtSignature": "c2ln"}
    assert body["contents"][2]["parts"] == [
        {"functionResponse": {"name": "weather", "response": {"result": "sunny"}}},
        {"functionResponse": {"name": "weather", "response": {"result": {"sky": "rain"}}, "id": "real-id"}}]
    config = body["generationConfig"]
    assert (config["temperature"], config["maxOutputTokens"], config["stopSequences"]) == (0.2, 5, ["END"])
    assert config["responseJsonSchema"] == FORMAT["json_schema"]["schema"]
    assert body["tools"][0]["functionDeclarations"][0]["parametersJsonSchema"] == TOOLS[0]["function"]["parameters"]


def test_generate_content_images_and_system():
    body = generate_body(HISTORY[:2], {})
    assert body["systemInstruction"] == {"parts": [{"text": "Be brief."}]}
    assert body["contents"][0]["parts"][1] == {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    url = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]
    assert generate_body(url, {})["contents"][0]["parts"] == [{"fileData": {"fileUri": "https://x/y.png"}}]


def test_provider_tools_go_as_given_beside_functions():
    search = {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    body = messages_body("claude", [{"role": "user", "content": "x"}], {"tools": [*TOOLS, search]}, stream=False)
    assert [t["name"] for t in body["tools"]] == ["weather", "web_search"] and body["tools"][1] == search
    grounding = {"googleSearch": {}}
    body = generate_body([{"role": "user", "content": "x"}], {"tools": [grounding]})
    assert body["tools"] == [grounding]
    hosted = {"type": "web_search"}
    assert responses_body("gpt", [], {"tools": [hosted]}, stream=False)["tools"] == [hosted]
