"""Shared helpers of the OpenTelemetry tests: the real SDK with its in-memory
exporter and metric reader, instrumented through ``lionops.instrument()``
(the ``otel`` and ``otel_content`` fixtures in conftest.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import lionops


@dataclass
class Telemetry:
    exporter: InMemorySpanExporter
    reader: InMemoryMetricReader
    tracer_provider: TracerProvider
    meter_provider: MeterProvider

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name.split(" ")[0] == prefix]

    def root(self) -> ReadableSpan:
        (root,) = self.named("operate")
        return root

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        kids = [s for s in self.spans() if s.parent is not None and s.parent.span_id == parent.context.span_id]
        return sorted(kids, key=lambda s: s.start_time or 0)

    def dump(self) -> str:
        """Everything exported (names, attributes, events, statuses) as one text."""
        return json.dumps([json.loads(s.to_json()) for s in self.spans()])

    def metrics(self) -> dict[str, Any]:
        """metric name -> the SDK metric (its data points and unit)."""
        data = self.reader.get_metrics_data()
        out: dict[str, Any] = {}
        for resource in data.resource_metrics if data else []:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    out[metric.name] = metric
        return out


def telemetry(capture_content: bool = False) -> Iterator[Telemetry]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    lionops.instrument(tracer_provider, meter_provider=meter_provider, capture_content=capture_content)
    try:
        yield Telemetry(exporter, reader, tracer_provider, meter_provider)
    finally:
        lionops.uninstrument()
        tracer_provider.shutdown()
        meter_provider.shutdown()


def events(span: ReadableSpan) -> list[str]:
    return [e.name for e in span.events]
