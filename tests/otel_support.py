"""Shared helpers of the OpenTelemetry tests: the real SDK with its in-memory
exporter and metric reader, instrumented through ``lionops.instrument()``
(the ``otel`` and ``otel_content`` fixtures in conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

import lionops


@dataclass
class Telemetry:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider
    logs: InMemoryLogRecordExporter

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.split(" ")[0] == prefix]

    def roots(self) -> list[ReadableSpan]:
        """The operations' spans (``invoke_agent``, INTERNAL)."""
        return [s for s in self.named("invoke_agent") if s.kind is SpanKind.INTERNAL]

    def cli_runs(self) -> list[ReadableSpan]:
        """The CLI agent runs (``invoke_agent``, CLIENT)."""
        return [s for s in self.named("invoke_agent") if s.kind is SpanKind.CLIENT]

    def root(self) -> ReadableSpan:
        (root,) = self.roots()
        return root

    def records(self) -> list[Any]:
        """The exported log records (the GenAI events)."""
        return [r.log_record for r in self.logs.get_finished_logs()]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        kids = [s for s in self.spans() if s.parent is not None and s.parent.span_id == parent.context.span_id]
        return sorted(kids, key=lambda s: s.start_time or 0)

    def dump(self) -> str:
        """What the run exported (names, kinds, statuses, attributes, events, links) as one text.

        Left out is what the SDK or the run draws at random or reads from a
        clock: trace and span ids, timestamps, the resource's instance id, and
        the values of the id attributes the run generates and of measured floats. A
        test that asserts a text is absent can then not be failed by chance, as
        ``"4111"`` once was by a span id.
        """
        return json.dumps([_exported(json.loads(s.to_json())) for s in self.spans()])

    def metrics(self) -> dict[str, Any]:
        """metric name -> the SDK metric (its data points and unit)."""
        data = self.reader.get_metrics_data()
        out: dict[str, Any] = {}
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    out[metric.name] = metric
        return out


_GENERATED_KEYS = ("context", "parent_id", "start_time", "end_time", "resource")
# attribute values the run draws or counts: branch ids are random, response ids count up per process
_GENERATED_ATTRIBUTES = {"gen_ai.conversation.id", "lionops.branch.id", "gen_ai.response.id", "lionops.response.id"}


def _generated(attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes with generated ids and measured floats set to ``None``."""
    return {k: None if k in _GENERATED_ATTRIBUTES or isinstance(v, float) else v for k, v in attributes.items()}


def _exported(span: dict[str, Any]) -> dict[str, Any]:
    kept = {k: v for k, v in span.items() if k not in _GENERATED_KEYS}
    kept["attributes"] = _generated(span.get("attributes", {}))
    kept["events"] = [{"name": e["name"], "attributes": _generated(e["attributes"])}
                      for e in span.get("events", [])]
    kept["links"] = [{"attributes": link.get("attributes", {})} for link in span.get("links", [])]
    return kept


def telemetry(capture_content: bool = False) -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    logs = InMemoryLogRecordExporter()
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    lionops.instrument(tracer_provider, meter_provider=meter_provider, logger_provider=logger_provider,
                       capture_content=capture_content)
    try:
        yield Telemetry(exporter, reader, tracer_provider, meter_provider, logs)
    finally:
        lionops.uninstrument()
        tracer_provider.shutdown()
        meter_provider.shutdown()
        logger_provider.shutdown()


def events(span: ReadableSpan) -> list[str]:
    return [e.name for e in span.events]
