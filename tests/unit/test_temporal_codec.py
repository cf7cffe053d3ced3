"""lionops.temporal parts that need no Temporal server: typed errors, the
codec across activity boundaries, the payload converter. The async ones run
on asyncio and on trio (only Temporal's client and workers need asyncio)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

import pytest
from pydantic import BaseModel, BeforeValidator, Field, PlainSerializer

pytest.importorskip("temporalio", reason="temporalio is not installed: pip install 'lionops[temporal]'")

from tests import temporal_app as app  # noqa: E402


class Local:  # not a pydantic model
    pass


def test_worker_side_keywords_and_values_that_cannot_cross_are_typed_errors():
    from lionops.temporal import DurableArgumentError
    from lionops.temporal._codec import encode_kwargs

    def make_local_model():
        class Hidden(BaseModel):
            x: int
        return Hidden

    with pytest.raises(DurableArgumentError, match="module level"):
        encode_kwargs({"response_format": make_local_model()})
    with pytest.raises(DurableArgumentError, match=r"keyword 'context'\['obj'\]: a Local cannot cross"):
        encode_kwargs({"context": {"obj": Local()}})
    with pytest.raises(DurableArgumentError, match="keys must be strings"):
        encode_kwargs({"context": {1: "a"}})
    assert issubclass(DurableArgumentError, TypeError)


def test_codec_round_trips_classes_models_bytes_and_results():
    from lionops import RawOutput
    from lionops.temporal._codec import decode_kwargs, decode_result, encode_kwargs, encode_result

    kw = {"response_format": app.Answer, "context": {"prior": app.Answer(answer="a", confidence=1.0)},
          "images": [b"\x89PNG"], "instruction": "hi"}
    assert decode_kwargs(encode_kwargs(kw)) == kw
    raw = decode_result(encode_result(RawOutput("cut", reason="length", detail="d")))
    assert isinstance(raw, RawOutput) and (raw, raw.reason, raw.detail) == ("cut", "length", "d")
    assert decode_result(encode_result(None)) is None
    assert decode_result(encode_result({"a": [1]})) == {"a": [1]}
    assert decode_result(encode_result(app.Answer(answer="x", confidence=0.5))) == app.Answer(
        answer="x", confidence=0.5)


def test_payload_converter_carries_trace_and_traced():
    from lionops.temporal import data_converter
    from lionops.trace import Trace, Traced, TransitionRecord

    trace = Trace(started_at=12.5,
                  transitions=[TransitionRecord("prepared", "prepare", "schema",
                                                {"phase_raised": False, "preparation_succeeded": True}, 3, 2)],
                  meta={"middle": "communicate"})
    conv = data_converter.payload_converter
    [payload] = conv.to_payloads([Traced(app.Answer(answer="x", confidence=0.5), trace)])
    [back] = conv.from_payloads([payload])
    assert back.trace == trace and back.result == app.Answer(answer="x", confidence=0.5)
    [payload] = conv.to_payloads([trace])
    assert conv.from_payloads([payload]) == [trace]


def test_durable_branch_definition_errors():
    from lionops.errors import ConfigurationError
    from lionops.temporal import DurableBranch, HumanApproval, LionopsPlugin

    with pytest.raises(ValueError, match="name"):
        DurableBranch("has space", chat_model=app.chat_model)
    with pytest.raises(ConfigurationError, match="chat_model= or middle="):
        DurableBranch("nomodel")
    with pytest.raises(TypeError, match="gate"):
        DurableBranch("g", chat_model=app.chat_model, gate=[42])
    with pytest.raises(ValueError, match="positive"):
        HumanApproval(timeout=timedelta(0))
    with pytest.raises(ValueError, match="unique"):
        LionopsPlugin(app.shop, DurableBranch("shop", chat_model=app.chat_model))  # names must be unique
    names = [a.__temporal_activity_definition.name for a in app.shop.activities()]
    assert names == ["shop.model", "shop.tool.lookup", "shop.tool.charge", "shop.tool.ship"]
    assert repr(app.shop) == "DurableBranch('shop', tools=['lookup', 'charge', 'ship'], gates=0)"


@pytest.mark.anyio
async def test_operate_outside_a_workflow_is_a_typed_error(anyio_backend):
    from lionops.temporal import NotInWorkflowError, idempotency_key
    from lionops.temporal.errors import DurableError

    with pytest.raises(NotInWorkflowError, match="workflow code"):
        await app.shop.operate(instruction="hi")
    with pytest.raises(DurableError, match="tool activity"):
        idempotency_key()


@pytest.mark.anyio
async def test_response_type_is_the_generated_operative_type(anyio_backend):
    fmt = await app.shop.response_type({"instruction": "x", "response_format": app.Answer, "actions": True})
    assert issubclass(fmt, app.Answer) and "action_responses" in fmt.model_fields
    assert await app.shop.response_type({"instruction": "x"}) is None


def test_remote_errors_read_like_the_original():
    from lionops.temporal import RemoteError
    from lionops.temporal.errors import remote_error

    err = remote_error("ValueError", "bad")
    assert isinstance(err, RemoteError) and isinstance(err, ValueError)
    assert (type(err).__name__, str(err), err.remote_type) == ("ValueError", "bad", "ValueError")
    grouped = remote_error("ExceptionGroup", "two")  # a constructor that takes more: not combined
    assert isinstance(grouped, RemoteError) and type(grouped).__name__ == "ExceptionGroup"
    assert type(remote_error("EndpointStatusError", "x")).__name__ == "EndpointStatusError"


def test_a_tool_selector_crosses_by_name():
    from lionops.temporal._codec import encode_kwargs
    from lionops.temporal.branch import _tool_names

    assert _tool_names([app.lookup, app.shop.tools[1], "ship"]) == ["lookup", "charge", "ship"]
    assert _tool_names(app.lookup) == "lookup" and _tool_names(True) is True
    assert encode_kwargs({"tools": _tool_names([app.lookup])}) == {"tools": ["lookup"]}


class TickClock:
    """A clock whose trace readings are fixed ticks (what a workflow's clock gives)."""

    def __init__(self) -> None:
        self.ticks = 0

    async def sleep(self, seconds: float) -> None:
        import anyio

        await anyio.lowlevel.checkpoint()

    def monotonic(self) -> float:
        return 0.0

    def time(self) -> float:
        return 1_700_000_000.0

    def perf_counter_ns(self) -> int:
        self.ticks += 1
        return self.ticks * 1_000


@pytest.mark.anyio
async def test_the_trace_reads_its_clock_from_the_installed_clock(anyio_backend):
    """The seam a durable branch uses for workflow time: ``started_at`` and the
    row timings come from the installed clock, so a replay gives the same trace."""
    from lionops import Branch
    from lionops.clock import use_clock
    async def middle(branch, instruction, chat_param, parse_param=None, clear_messages=False, skip_validation=False):
        return "text"

    with use_clock(TickClock()):  # type: ignore[arg-type]
        traced = await Branch().operate_traced(instruction="x", middle=middle, skip_validation=True)
    assert traced.trace.started_at == 1_700_000_000.0
    # one tick per reading: the start, each phase's start and end (a row's time is
    # its phase's end), the entry of the decision-only state validate
    assert [t.at_ns for t in traced.trace.transitions] == [2_000, 4_000, 6_000, 7_000]
    assert [t.phase_ns for t in traced.trace.transitions] == [1_000, 1_000, 1_000, 0]


# ------------------------------------------------------------ data is data


def test_marker_keys_in_user_data_survive_as_data():
    from lionops.temporal._codec import decode_kwargs, encode_kwargs

    for data in (
        {"$lionops_class": "os:environ"},
        {"$lionops_model": "os:environ", "data": {}},
        {"$lionops_bytes": "aGk="},
        {"$lionops_data": {"$lionops_class": "os:environ"}},
        {"rows": [{"$lionops_class": "subprocess:Popen"}], "$lionops_x": 1, "plain": {"a": [1, None]}},
        [{"$lionops_data": 1}, "$lionops_class"],
    ):
        kw = {"context": data, "instruction": "$lionops_class"}
        assert decode_kwargs(encode_kwargs(kw)) == kw


def test_a_reference_is_looked_up_among_registered_types_and_never_imported():
    import sys

    from lionops.temporal import DurableArgumentError
    from lionops.temporal._codec import decode_result, decode_value

    sys.modules.pop("this", None)
    for raw in ({"$lionops_class": "this:s"}, {"$lionops_model": "this:s", "data": {}},
                {"$lionops_class": "os:environ"}, {"x": [{"$lionops_class": "antigravity:geohash"}]}):
        with pytest.raises(DurableArgumentError, match="not a registered type"):
            decode_value(raw)
    assert "this" not in sys.modules and "antigravity" not in sys.modules
    # a model result of an unregistered class arrives as its data
    assert decode_result({"kind": "model", "name": "s", "ref": "this:s", "data": {"a": 1}}) == {"a": 1}
    assert "this" not in sys.modules


# ------------------------------------------------------------ the approved arguments cross unchanged


def _tool_with(annotation):
    def tool(value=None):
        """A tool.

        Args:
            value: a value.
        """
        return value
    tool.__annotations__ = {"value": annotation}
    return tool


def test_tools_whose_validated_arguments_cannot_cross_unchanged_are_refused():
    import datetime
    import decimal
    import enum
    from typing import Annotated, Any, Literal

    from pydantic import BeforeValidator, Field, SecretStr

    from lionops.errors import ConfigurationError
    from lionops.temporal import DurableBranch

    class Color(enum.Enum):
        RED = "red"

    for bad in (SecretStr, Color, datetime.date, decimal.Decimal, app.Answer, set[str], tuple[int, int],
                dict[int, str], list[SecretStr], Literal[Color.RED], bytes, int | SecretStr):
        with pytest.raises(ConfigurationError, match="cannot cross to a Temporal activity unchanged"):
            DurableBranch("refused", chat_model=app.chat_model, tools=[_tool_with(bad)])
    for good in (int, str, float, bool, None, Any, list[int], dict[str, list[float | None]], Literal["a", 1],
                 Annotated[int, BeforeValidator(lambda v: v)], Annotated[str, Field(alias="V")], int | None):
        DurableBranch("accepted", chat_model=app.chat_model, tools=[_tool_with(good)])


def test_values_that_would_change_on_the_way_are_refused_at_the_call():
    import math

    from lionops import Tool
    from lionops.temporal import DurableArgumentError
    from lionops.temporal.branch import _crossed

    tool = Tool(_tool_with(object))
    for good in ([1, 2.5, "x", None, {"a": True}], math.inf, math.nan, 2**70):
        assert _crossed(tool, {"value": good})["value"] is good
    for value in ({1, 2}, (1, 2), b"x", object(), {1: "a"}, [1, (2,)], 1.0 + 2j):
        with pytest.raises(DurableArgumentError, match="tool 'tool'"):
            _crossed(tool, {"value": value})


def test_a_masking_serializer_or_an_alias_does_not_change_what_the_tool_receives():
    from lionops import Tool
    from lionops.temporal import DurableBranch
    from lionops.temporal.branch import _crossed

    def send(token: Annotated[str, PlainSerializer(lambda v: "***")], cents: Annotated[
            int, BeforeValidator(lambda v: round(float(v) * 100) if isinstance(v, str) else v * 100)],
            note: Annotated[str, Field(alias="Note")] = "") -> None:
        """Send.

        Args:
            token: a token.
            cents: dollars in, cents out.
            note: a note.
        """

    DurableBranch("masked", chat_model=app.chat_model, tools=[send])
    tool = Tool(send)
    kwargs = tool.validate_arguments({"token": "abc", "cents": "15.00", "Note": "n"})
    assert kwargs == {"token": "abc", "cents": 1500, "note": "n"}
    assert _crossed(tool, kwargs) == {"token": "abc", "cents": 1500, "note": "n"}
