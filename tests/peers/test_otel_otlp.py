"""OpenTelemetry over the wire: the real OTLP/HTTP exporters send to a
loopback receiver that decodes the protobuf (opentelemetry-proto), so the
attribute types and names a backend receives are what this checks."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import ExportMetricsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

import lionops
from lionops import Branch
from lionops.testing import completion, tool_call
from tests.helpers import Answer, ToolBox
from tests.openai_server import make_model, server  # noqa: F401 - fixtures

pytestmark = pytest.mark.anyio


class Receiver:
    """An OTLP/HTTP receiver on 127.0.0.1: keeps every decoded export request."""

    def __init__(self) -> None:
        self.traces: list[ExportTraceServiceRequest] = []
        self.metrics: list[ExportMetricsServiceRequest] = []
        self.content_types: set[str] = set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.content_types.add(self.headers.get("Content-Type", ""))
                if self.path == "/v1/traces":
                    receiver.traces.append(ExportTraceServiceRequest.FromString(body))
                elif self.path == "/v1/metrics":
                    receiver.metrics.append(ExportMetricsServiceRequest.FromString(body))
                else:
                    self.send_response(404)
                    self.end_headers()
                    return
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def spans(self) -> list[Any]:
        return [span for req in self.traces for rs in req.resource_spans for ss in rs.scope_spans
                for span in ss.spans]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    rec = Receiver()
    rec.thread.start()
    try:
        yield rec
    finally:
        rec.httpd.shutdown()
        rec.httpd.server_close()


def _value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    return getattr(any_value, kind)


def attributes(item: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in item.attributes}


async def test_spans_and_metrics_over_otlp_http(server, receiver):
    resource = Resource.create({"service.name": "lionops-test"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{receiver.url}/v1/traces",
                                                                           timeout=10)))
    reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=f"{receiver.url}/v1/metrics", timeout=10),
                                           export_interval_millis=3_600_000)
    meter_provider = MeterProvider(resource=resource, metric_readers=[reader])
    lionops.instrument(tracer_provider, meter_provider=meter_provider)
    try:
        server.push(completion('{"answer": 3}', tool_calls=[tool_call("get_weather", {"city": "Oslo"}, "call_o")]))
        model = make_model(server)
        branch = Branch(chat_model=model, tools=ToolBox().tools())
        result = await branch.operate(instruction="q", response_format=Answer, actions=True)
        await model.aclose()
    finally:
        lionops.uninstrument()
    assert result.answer == 3
    assert tracer_provider.force_flush(10_000) and meter_provider.force_flush(10_000)
    tracer_provider.shutdown()
    meter_provider.shutdown()

    assert receiver.content_types == {"application/x-protobuf"}
    (resource_spans,) = {id(rs): rs for req in receiver.traces for rs in req.resource_spans}.values()
    assert attributes(resource_spans.resource)["service.name"] == "lionops-test"
    (scope,) = {ss.scope.name for req in receiver.traces for rs in req.resource_spans for ss in rs.scope_spans}
    assert scope == "lionops"
    spans = {span.name: span for span in receiver.spans()}
    assert set(spans) == {"invoke_agent lionops", "chat gpt-4o-mini", "execute_tool get_weather", "writeback"}
    root = spans["invoke_agent lionops"]
    assert root.parent_span_id == b""
    for name in ("chat gpt-4o-mini", "execute_tool get_weather", "writeback"):
        assert spans[name].parent_span_id == root.span_id and spans[name].trace_id == root.trace_id
    root_attrs = attributes(root)
    assert root_attrs["lionops.exit"] == "enriched"
    assert root_attrs["lionops.states"] == branch.traces[-1].states
    assert [e.name for e in root.events] == branch.traces[-1].triggers
    assert attributes(root.events[0])["lionops.guard.preparation_succeeded"] is True
    chat = attributes(spans["chat gpt-4o-mini"])
    assert spans["chat gpt-4o-mini"].kind == 3  # SPAN_KIND_CLIENT
    assert chat["gen_ai.operation.name"] == "chat" and chat["gen_ai.provider.name"] == "openai"
    assert chat["gen_ai.usage.input_tokens"] == 52 and chat["gen_ai.response.finish_reasons"] == ["tool_calls"]
    tool = attributes(spans["execute_tool get_weather"])
    assert tool["gen_ai.tool.call.id"] == "call_o" and tool["lionops.tool.decision"] == "allowed"

    metrics = {m.name: m for req in receiver.metrics for rm in req.resource_metrics for sm in rm.scope_metrics
               for m in sm.metrics}
    duration = metrics["gen_ai.client.operation.duration"]
    assert duration.unit == "s"
    (point,) = duration.histogram.data_points
    assert point.count == 1 and list(point.explicit_bounds)[:2] == [0.01, 0.02]
    usage = metrics["gen_ai.client.token.usage"]
    assert usage.unit == "{token}"
    assert sorted(p.sum for p in usage.histogram.data_points) == [17, 52]
    (exits,) = metrics["lionops.operation.exits"].sum.data_points
    assert exits.as_int == 1 and attributes(exits) == {"lionops.exit": "enriched"}


def test_the_observability_page_examples_run(receiver, monkeypatch):
    """docs/observability.md: its two Python examples run as written and the
    trace they make reaches an OTLP/HTTP receiver (the endpoint from the environment)."""
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "observability.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) == 2
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", f"{receiver.url}/v1/traces")
    namespace: dict[str, Any] = {}
    try:
        for block in blocks:
            exec(compile(block, "docs/observability.md", "exec"), namespace)  # noqa: S102 - the page's own code
    finally:
        lionops.uninstrument()
        namespace["provider"].shutdown()
    spans = {span.name: attributes(span) for span in receiver.spans()}
    assert spans["invoke_agent lionops"]["lionops.exit"] == "enriched"
    assert spans["execute_tool send_email"]["lionops.tool.decision"] == "denied"
    assert spans["execute_tool get_weather"]["lionops.tool.decision"] == "allowed"
