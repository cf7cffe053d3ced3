"""Every exported span, metric and GenAI event checked against the GenAI
semantic conventions' own YAML (tests/fixtures/semconv_genai, data only).

One run of each kind (an API call with tools, a denial and an unknown tool;
a stream; a stream that breaks off; a CLI agent run; a refused request) is
exported through the real SDK, with and without content capture. For each
span the group the conventions define for its operation and kind is
resolved (``extends`` followed), and the span must carry every ``required``
attribute, ``error.type`` when it failed, only attributes the group lists
(besides lionops' own ``lionops.*`` namespace), each of the registry's type
and, for a closed enum, one of its values. Metrics: name, instrument, unit,
required attributes and only listed ones. Events: name and attributes.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from opentelemetry.sdk.metrics.export import Histogram
from opentelemetry.trace import SpanKind, StatusCode

from lionops import Branch
from lionops.testing import Reply, chunked, completion, error_body, tool_call
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "semconv_genai"

#: Attributes of the core registry the GenAI groups reference (open-telemetry/semantic-conventions,
#: model/server/registry.yaml, model/error/registry.yaml, model/exceptions/registry.yaml).
CORE_TYPES = {"server.address": "string", "server.port": "int", "error.type": "string",
              "exception.type": "string", "exception.message": "string", "exception.stacktrace": "string"}

#: Metrics of open-telemetry/semantic-conventions-genai (docs/gen-ai/gen-ai-metrics.md, "Generative AI
#: agent metrics" and "Generative AI tool metrics") that the vendored metrics.yaml predates:
#: name -> (instrument, unit, required attributes, allowed attributes).
NEWER_METRICS = {
    "gen_ai.invoke_agent.duration": ("histogram", "s", {"gen_ai.operation.name", "gen_ai.provider.name"},
                                     {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.agent.name",
                                      "gen_ai.request.model", "error.type"}),
    "gen_ai.execute_tool.duration": ("histogram", "s", {"gen_ai.operation.name", "gen_ai.tool.name"},
                                     {"gen_ai.operation.name", "gen_ai.tool.name", "error.type"}),
}

#: (gen_ai.operation.name, span kind) -> the span group of spans.yaml.
SPAN_GROUPS = {
    ("invoke_agent", SpanKind.INTERNAL): "span.gen_ai.invoke_agent.internal",
    ("invoke_agent", SpanKind.CLIENT): "span.gen_ai.invoke_agent.client",
    ("chat", SpanKind.CLIENT): "span.gen_ai.inference.client",
    ("execute_tool", SpanKind.INTERNAL): "span.gen_ai.execute_tool.internal",
}


@cache
def _yaml(name: str) -> dict[str, Any]:
    return yaml.safe_load((FIXTURES / f"{name}.yaml").read_text())


@cache
def registry() -> dict[str, Any]:
    """attribute id -> its ``type`` (a string, or the enum's ``members``)."""
    out: dict[str, Any] = dict(CORE_TYPES)
    for group in _yaml("registry")["groups"]:
        for attribute in group.get("attributes", []):
            out[attribute["id"]] = attribute["type"]
    return out


@cache
def groups() -> dict[str, dict[str, Any]]:
    return {g["id"]: g for name in ("spans", "metrics", "events") for g in _yaml(name)["groups"]}


def resolved(group_id: str) -> dict[str, Any]:
    """attribute -> requirement level of a group, its ``extends`` chain included (the nearest wins)."""
    group = groups()[group_id]
    out = resolved(group["extends"]) if group.get("extends") else {}
    for attribute in group.get("attributes", []):
        if "ref" in attribute:
            out[attribute["ref"]] = attribute.get("requirement_level", out.get(attribute["ref"], "recommended"))
    return out


def _type_ok(kind: Any, value: Any) -> bool:
    if isinstance(kind, dict):  # an enum: its members' values, open unless the registry says otherwise
        return isinstance(value, str)
    return {
        "string": lambda v: isinstance(v, str), "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "double": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
        "boolean": lambda v: isinstance(v, bool),
        "string[]": lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v),
        "any": lambda v: isinstance(v, str) and json.loads(v) is not None,  # structured, as JSON on a span
    }[kind](value)


def check_attributes(where: str, attributes: dict[str, Any], allowed: dict[str, Any], failed: bool) -> None:
    for key, value in attributes.items():
        if key.startswith("lionops."):
            continue
        assert key in allowed, f"{where}: {key} is not an attribute of this operation"
        assert _type_ok(registry()[key], value), f"{where}: {key}={value!r} is not a {registry()[key]}"
    for key, level in allowed.items():
        if level == "required":
            assert key in attributes, f"{where}: required {key} missing"
    if failed:
        assert "error.type" in attributes, f"{where}: error.type missing on a failure"


def check_span(span: Any) -> None:
    attributes = dict(span.attributes or {})
    operation = attributes.get("gen_ai.operation.name")
    if operation is None:  # a lionops step (writeback): nothing of the GenAI namespace
        assert not [k for k in attributes if k.startswith("gen_ai.")], span.name
        return
    group = SPAN_GROUPS[(operation, span.kind)]
    check_attributes(span.name, attributes, resolved(group), span.status.status_code is StatusCode.ERROR)
    name = {"invoke_agent": attributes.get("gen_ai.agent.name"), "execute_tool": attributes.get("gen_ai.tool.name"),
            }.get(operation, attributes.get("gen_ai.request.model"))
    assert span.name == f"{operation} {name}", span.name  # the conventions' span name
    members = registry()["gen_ai.operation.name"]["members"]
    assert operation in {m["value"] for m in members}


def check_metric(metric: Any) -> None:
    data_points = list(metric.data.data_points)
    if metric.name in NEWER_METRICS:
        instrument, unit, required, allowed_names = NEWER_METRICS[metric.name]
        allowed = {k: ("required" if k in required else "recommended") for k in allowed_names}
    else:
        group = next(g for g in groups().values() if g.get("metric_name") == metric.name)
        instrument, unit, allowed = group["instrument"], group["unit"], resolved(group["id"])
    assert instrument == "histogram" and isinstance(metric.data, Histogram), metric.name
    assert metric.unit == unit, metric.name
    for point in data_points:
        check_attributes(metric.name, dict(point.attributes), allowed, False)


def check_event(record: Any) -> None:
    group = next(g for g in groups().values() if g.get("type") == "event" and g.get("name") == record.event_name)
    attributes = dict(record.attributes or {})
    allowed = resolved(group["id"])
    if record.event_name == "gen_ai.client.operation.exception":
        # "MAY populate exception events with the attributes captured on the client span"
        allowed = {**resolved("metric_attributes.gen_ai"), "error.type": "recommended", **allowed}
        assert record.severity_number.value == 13  # WARN, as the conventions say
    check_attributes(record.event_name, attributes, allowed, False)


async def _exercise(server, capture: bool) -> None:  # noqa: F811 - the fixture
    from tests.cli_support import fake_model

    box = ToolBox()
    answer = completion('{"answer": 1}', tool_calls=[
        tool_call("get_weather", {"city": "Paris"}, "call_1"), tool_call("send_message", {"to": "a", "body": "b"},
                                                                        "call_2"),
        tool_call("no_such_tool", {}, "call_3")])
    streamed = chunked(completion('{"answer": 2}'))
    server.push(answer)
    server.push(Reply(stream=streamed))
    server.push(Reply(stream=streamed[:2], done=False))
    server.push(Reply(error_body("Incorrect API key provided"), status=401))
    model = make_model(server, stream=False)
    stream_model = make_model(server, stream=True)
    try:
        branch = Branch(chat_model=model, tools=box.tools(), name="weather")
        branch.gate(lambda invocation: invocation.function != "send_message")
        await branch.operate(instruction="Weather?", response_format=Answer, actions=True,
                             temperature=0.2, top_k=5, stop=["END"], n=2)
        await Branch(chat_model=stream_model).operate(instruction="Again", response_format=Answer)
        for _ in range(2):  # a stream that breaks off, a refused request
            with pytest.raises(Exception):  # noqa: B017, PT011 - any typed failure; the spans are checked
                await Branch(chat_model=stream_model).operate(instruction="Once more", response_format=Answer)
    finally:
        await model.aclose()
        await stream_model.aclose()
    await Branch(chat_model=fake_model("two_tool_uses.jsonl"), tools=box.tools()).operate(
        instruction="Weather?", response_format=Answer, actions=True)


@pytest.mark.parametrize("capture", [False, True], ids=["default", "content"])
async def test_every_span_metric_and_event_follows_the_conventions_yaml(server, capture):  # noqa: F811
    from tests.otel_support import telemetry

    for otel in telemetry(capture_content=capture):
        await _exercise(server, capture)
        spans = otel.spans()
        kinds = {(s.attributes or {}).get("gen_ai.operation.name") for s in spans}
        assert kinds == {"invoke_agent", "chat", "execute_tool", None}
        for span in spans:
            check_span(span)
        metrics = otel.metrics()
        assert {"gen_ai.client.operation.duration", "gen_ai.client.token.usage", "gen_ai.invoke_agent.duration",
                "gen_ai.execute_tool.duration", "gen_ai.client.operation.time_to_first_chunk",
                "gen_ai.client.operation.time_per_output_chunk"} <= set(metrics)
        for name, metric in metrics.items():
            if name.startswith("gen_ai."):
                check_metric(metric)
        records = otel.records()
        names = {r.event_name for r in records}
        assert "gen_ai.client.operation.exception" in names
        assert ("gen_ai.client.inference.operation.details" in names) is capture
        for record in records:
            check_event(record)
