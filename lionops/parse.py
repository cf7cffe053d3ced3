"""Parse model text into the requested response format (the inner parse).

The inner parse never raises on a bad value: it returns the model instance
when it can, else the extracted mapping, else the text, else ``None``, so
that the coordinator's *outer* policy decides (ADR-0022 D3).

Steps, in order:

0. Reasoning is never the answer: ``<think>``, ``<thinking>``,
   ``<reasoning>``, ``<thought>`` and ``<reflection>`` blocks that open a
   line (and an unclosed one, which runs to the end; and text before a
   closing tag that has no opening one) are removed first
   (:func:`split_reasoning`); nothing inside them is parsed. A reasoning
   tag still in the answer after that (one that opens in the middle of a
   line, a second closing tag) leaves no way to tell reasoning from answer:
   the answer is parsed, but its body action requests are marked invalid
   (``REASONING_REQUEST_ERROR``), so nothing the model may only have mused
   about is executed.
1. JSON from the text: the whole text, a fenced block (decoded from its first
   character, so a string value holding triple backticks survives), or
   the first object in prose. Raw control characters inside strings are
   tolerated. An object that fails to decode is never mined for an inner
   object that does: extraction takes the outermost object or none. Only
   when none decodes, ``json-repair`` mends slightly broken JSON; action
   requests found in repaired text are marked invalid, so nothing recovered
   from broken text is ever executed. JSON nested too deep to decode
   gives a :class:`~lionops.models.RawOutput` with ``reason="too_deep"``
   (the mismatch policy decides), never a ``RecursionError``.
2. Keys the model must never supply (``action_responses``) are dropped
   (the model is never asked for them, ADR-0022 D2).
3. Keys are matched to the model's fields: exact, then case-insensitive, then
   Jaro-Winkler similarity at or above ``fuzzy_match_params.similarity_threshold``
   (0.85). The action fields are matched exactly only, and keys *inside* an
   action request use the explicit alias table of :mod:`lionops.models`.
4. Native tool calls handed in by the adapter join the body's
   ``action_requests`` (an identical body request is not repeated).
5. ``model_validate``. When the reply held no JSON object at all, the parse
   model (``parse_param.imodel``) is asked to restate the text as JSON, with
   retries under ``parse_param.alcall_params`` (ADR-0022 D1 defaults); its
   ``action_requests`` are ignored: the parse model reformats, it never
   proposes calls. A JSON object that fails validation is returned as is:
   asking a second model to "fix" values would invent them. An answer longer
   than :data:`PARSE_MODEL_MAX_CHARS` is never sent to the parse model.

This module is pure text and model analysis; step 5's re-ask, a network
call, is :func:`lionops.middles.parsing.parse_response`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import json_repair
from pydantic import BaseModel, ValidationError
from rapidfuzz.distance import JaroWinkler

from ._defaults import FUZZY_KEY_THRESHOLD
from ._json import check_text, check_value
from ._json import loads as bounded_json
from .errors import JSONLimitError
from .models import ActionRequestModel, RawOutput, normalize_request_keys
from .operative import request_exclude_of
from .params import FuzzyMatchKeysParams

__all__ = [
    "extract_json",
    "split_reasoning",
    "ends_inside_json",
    "repair_json",
    "match_keys",
    "merge_action_requests",
    "local_parse",
    "ACTION_FIELDS",
    "REPAIRED_REQUEST_ERROR",
    "REASONING_REQUEST_ERROR",
    "PARSE_MODEL_MAX_CHARS",
]

#: Fields matched by exact name only, never fuzzily.
ACTION_FIELDS = frozenset({"action_required", "action_requests", "action_responses"})

#: The ``invalid`` text of an action request recovered from repaired JSON.
REPAIRED_REQUEST_ERROR = "action request recovered from malformed JSON; not executed"
#: The ``invalid`` text of a body action request of an answer that still holds a reasoning tag.
REASONING_REQUEST_ERROR = "action request in an answer that holds a reasoning tag (it may be reasoning); not executed"

#: The longest answer (in characters) the parse model is asked to restate.
PARSE_MODEL_MAX_CHARS = 65_536

_FENCE_OPEN = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\n?")
#: ``strict=False``: raw control characters (a newline, a tab) inside strings decode.
_DECODER = json.JSONDecoder(strict=False)
_MAX_CANDIDATES = 32

_REASONING_TAGS = "think|thinking|reasoning|thought|reflection"
# A tag may carry spaces and attributes (``<think >``, ``<think type="plan">``, ``</ think>``).
_REASONING_OPEN = re.compile(rf"^[ \t]*<\s*({_REASONING_TAGS})\b[^>]*>", re.IGNORECASE | re.MULTILINE)
_REASONING_CLOSE = re.compile(rf"<\s*/\s*({_REASONING_TAGS})\s*>", re.IGNORECASE)
_REASONING_TAG = re.compile(rf"<\s*/?\s*({_REASONING_TAGS})\b[^>]*>", re.IGNORECASE)
#: A channel message of the "harmony" chat format some servers pass through as text.
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)[^<]*<\|message\|>(.*?)(?=<\|(?:end|start|return|call|channel)\|>|$)",
                      re.DOTALL)


class _TooDeep(Exception):
    """JSON nested deeper than the decoder can follow."""


def _decode_at(text: str, index: int) -> Any:
    """The JSON value starting at ``text[index]`` (trailing text ignored), or ``None``."""
    try:
        value, _ = _DECODER.raw_decode(text, index)
        check_value(value)
    except JSONLimitError:
        raise _TooDeep from None
    except ValueError:
        return None
    except RecursionError:
        raise _TooDeep from None
    return value


def _span_end(text: str, start: int) -> int | None:
    """Index just past the bracket that closes the one at ``text[start]``
    (strings and escapes respected), or ``None`` when it never closes."""
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def split_reasoning(text: str | None) -> tuple[str | None, str | None]:
    """``(answer, reasoning)``: ``text`` without its reasoning blocks, and their text.

    A block opens with ``<think>`` (or ``<thinking>``, ``<reasoning>``,
    ``<thought>``, ``<reflection>``) at the start of a line and ends at its
    closing tag, or at the end of the text when unclosed. Text before a
    closing tag that has no opening tag (a template that put the opening tag
    in the prompt) is reasoning too. In text of channel messages
    (``<|channel|>analysis<|message|>...``), only the ``final`` channel is the
    answer. A text that is one JSON value as a whole has no reasoning (the
    tags are inside its strings).
    """
    if not text or "<" not in text:
        return text, None
    try:
        bounded_json(text, strict=False)
        return text, None
    except ValueError:  # not JSON, or past the bounds (JSONLimitError)
        pass
    if "<|channel|>" in text:
        messages = [(m.group(1).lower(), m.group(2)) for m in _CHANNEL.finditer(text)]
        if messages:
            final = [body for channel, body in messages if channel == "final"]
            other = [body.strip() for channel, body in messages if channel != "final"]
            return "".join(final).strip(), "\n".join(other) or None
    reasoning: list[str] = []
    first_open, first_close = _REASONING_OPEN.search(text), _REASONING_CLOSE.search(text)
    if first_close and (first_open is None or first_open.start() > first_close.start()):
        reasoning.append(text[: first_close.start()])
        text = text[first_close.end():]
    while (opening := _REASONING_OPEN.search(text)) is not None:
        closing = re.compile(rf"<\s*/\s*{opening.group(1)}\s*>", re.IGNORECASE).search(text, opening.end())
        end = closing.end() if closing else len(text)
        reasoning.append(text[opening.end(): closing.start() if closing else len(text)])
        text = text[: opening.start()] + text[end:]
    if not reasoning:
        return text, None
    return text.strip(), "\n".join(r.strip() for r in reasoning)


def _fence_starts(text: str) -> list[int]:
    """Index of the first non-blank character after each opening fence."""
    starts = []
    for m in _FENCE_OPEN.finditer(text):
        i = m.end()
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text) and text[i] in "{[":
            starts.append(i)
    return starts


def extract_json(text: str, *, repair: bool = False) -> Any:
    """The first JSON value in ``text``, or ``None``.

    Tried in order: the whole text; each fenced block, decoded from its first
    character up to where the value ends (inner triple backticks are
    part of a string, not a fence); the first object found in prose, where an
    object that fails to decode hides everything up to its closing brace (an
    inner object of a broken outer one is a fragment, never the answer).
    Raw control characters inside strings are tolerated. With ``repair``,
    :func:`repair_json` is the last resort. JSON nested too deep to decode
    gives ``None``.
    """
    try:
        return _extract(text, repair=repair)
    except _TooDeep:
        return None


def _extract(text: str, *, repair: bool) -> Any:
    stripped = text.strip()
    try:
        return bounded_json(stripped, strict=False)
    except JSONLimitError:
        raise _TooDeep from None
    except ValueError:
        pass
    for start in _fence_starts(text):
        value = _decode_at(text, start)
        if value is not None:
            return value
    tried, hidden_until = 0, 0
    for m in re.finditer(r"\{", text):
        if m.start() < hidden_until:
            continue
        value = _decode_at(text, m.start())
        if isinstance(value, dict):
            return value
        end = _span_end(text, m.start())
        if end is None:
            break  # never closes: all that follows is inside it
        hidden_until = end
        tried += 1
        if tried >= _MAX_CANDIDATES:
            break
    return repair_json(text) if repair else None


def repair_json(text: str) -> dict[str, Any] | None:
    """A JSON object mended by ``json-repair`` from the first ``{`` on, or ``None``.

    Only a non-empty object counts; prose that merely contains a brace does
    not become data.
    """
    fences = _fence_starts(text)
    start = fences[0] if fences else text.find("{")
    if start < 0:
        return None
    candidate = text[start:]
    end = candidate.rfind("```")
    if fences and end > 0:
        candidate = candidate[:end]
    try:
        check_text(candidate)  # JSONLimitError past the bounds: json-repair recurses
        value = json_repair.loads(candidate)
    except Exception:  # noqa: BLE001 - a library failure means "no JSON"
        return None
    return value if isinstance(value, dict) and value else None


def _similarity(a: str, b: str) -> float:
    return float(JaroWinkler.normalized_similarity(a.lower(), b.lower()))


def match_keys(
    data: Mapping[str, Any],
    fmt: type[BaseModel],
    params: FuzzyMatchKeysParams | None = None,
) -> dict[str, Any] | None:
    """Rename ``data``'s keys to ``fmt``'s field names (step 3 of the module docstring).

    Matching is exact, then case-insensitive, then (with
    ``params.fuzzy_match``) Jaro-Winkler at or above
    ``params.similarity_threshold``, best pairs first. Action fields match
    exactly only (never case-folded or fuzzy targets). Unmatched keys follow ``params.handle_unmatched``:
    ``"remove"`` drops them, ``"ignore"`` keeps them, ``"raise"`` makes this
    return ``None`` (the value then stays unvalidated; the inner parse never
    raises).
    """
    params = params or FuzzyMatchKeysParams()
    names: dict[str, str] = {}
    for name, info in fmt.model_fields.items():
        names[name] = name
        if info.alias:
            names[info.alias] = name
    out: dict[str, Any] = {}
    unmatched: list[str] = []
    for key, value in data.items():
        if key in names:
            out[key] = value
            continue
        folded = [n for n in names if names[n] not in ACTION_FIELDS and n.lower() == str(key).lower()]
        if folded and folded[0] not in out:
            out[folded[0]] = value
        else:
            unmatched.append(key)
    if unmatched and params.fuzzy_match:
        threshold = params.similarity_threshold if params.similarity_threshold is not None else FUZZY_KEY_THRESHOLD
        open_fields = [n for n in names if names[n] not in ACTION_FIELDS and n not in out]
        pairs = sorted(
            ((_similarity(str(k), n), k, n) for k in unmatched for n in open_fields),
            key=lambda p: -p[0],
        )
        for score, key, name in pairs:
            if score < threshold:
                break
            if key in unmatched and name not in out:
                out[name] = data[key]
                unmatched.remove(key)
    if unmatched:
        if params.handle_unmatched == "raise":
            return None
        if params.handle_unmatched == "ignore":
            for key in unmatched:
                out[key] = data[key]
    return out


def _request_key(item: Any) -> tuple[Any, str] | None:
    if isinstance(item, ActionRequestModel):
        function, arguments = item.function, item.arguments
    elif isinstance(item, Mapping):
        norm = normalize_request_keys(dict(item))
        function, arguments = norm.get("function"), norm.get("arguments")
    else:
        return None
    try:
        return function, json.dumps(arguments, sort_keys=True, default=str)
    except (TypeError, ValueError, RecursionError):
        return None


def merge_action_requests(data: dict[str, Any], native: list[ActionRequestModel] | None) -> dict[str, Any]:
    """Append native tool calls to ``data["action_requests"]`` (step 4).

    A native call identical (function and arguments) to one in the body is
    not added twice. A body ``action_requests`` that is not a list is left as
    is, so validation fails and the outer policy decides.
    """
    if not native:
        return data
    body = data.get("action_requests")
    if body is None:
        data["action_requests"] = list(native)
        return data
    if not isinstance(body, list):
        return data
    seen = {_request_key(item) for item in body}
    data["action_requests"] = body + [r for r in native if _request_key(r) not in seen]
    return data


def _holds_reasoning_tag(text: str) -> bool:
    """Whether an answer, its reasoning blocks split off, still holds a reasoning
    tag outside of JSON strings (a text that is one JSON value as a whole has
    its tags inside strings)."""
    if _REASONING_TAG.search(text) is None:
        return False
    try:
        bounded_json(text, strict=False)
    except ValueError:  # not JSON, or past the bounds (JSONLimitError)
        return True
    return False


def _invalidate_requests(data: dict[str, Any], reason: str) -> None:
    """Mark every body action request invalid with ``reason``."""
    body = data.get("action_requests")
    if not isinstance(body, list):
        if body is not None:
            data["action_requests"] = None
        return
    marked = []
    for item in body:
        name = normalize_request_keys(item).get("function") if isinstance(item, Mapping) else None
        marked.append(ActionRequestModel(
            function=name if isinstance(name, str) else None, invalid=reason,
        ))
    data["action_requests"] = marked


def _validate(data: Any, fmt: type[BaseModel], parse_param: Any) -> Any:
    """Steps 2–5 on extracted data: a model instance, or the data as it was."""
    if not isinstance(data, dict):
        return data
    for key in request_exclude_of(fmt):
        data.pop(key, None)
    matched = match_keys(data, fmt, getattr(parse_param, "fuzzy_match_params", None))
    if matched is None:
        return data
    try:
        return fmt.model_validate(matched)
    except ValidationError:
        return data


def local_parse(text: str | None, fmt: type[BaseModel], parse_param: Any = None,
                action_requests: list[ActionRequestModel] | None = None) -> tuple[Any, bool]:
    """Parse without any model call: ``(value, found_json)``.

    ``value`` is a model instance, the extracted mapping, the text or
    ``None``; ``found_json`` tells whether the text held a JSON value.
    """
    try:
        data = _extract(text, repair=False) if text else None
    except _TooDeep:
        return RawOutput(text or "", reason="too_deep", detail="the answer's JSON is nested too deep to decode"), True
    repaired = False
    if data is None and text:
        data = repair_json(text)
        repaired = data is not None
    found = data is not None
    if repaired:
        _invalidate_requests(data, REPAIRED_REQUEST_ERROR)  # type: ignore[arg-type]
    elif isinstance(data, dict) and _holds_reasoning_tag(text):  # type: ignore[arg-type]
        _invalidate_requests(data, REASONING_REQUEST_ERROR)
    if data is None:
        if not action_requests:
            return text, False
        data = {}
    if isinstance(data, dict):
        data = merge_action_requests(data, action_requests)
    value = _validate(data, fmt, parse_param)
    if not isinstance(value, BaseModel) and not found and text is not None:
        return text, False
    return _plain_requests(value), found


def _plain_requests(value: Any) -> Any:
    """A mapping that failed validation, with its action requests as plain
    JSON objects (``invalid`` kept), so what the caller gets back serializes."""
    if isinstance(value, dict) and isinstance(value.get("action_requests"), list):
        value["action_requests"] = [
            {"function": r.function, "arguments": r.arguments, **({"invalid": r.invalid} if r.invalid else {})}
            if isinstance(r, ActionRequestModel) else r
            for r in value["action_requests"]
        ]
    return value


# ---------------------------------------------------------------- cut-off text

#: A strict-off decoder, as the parse uses: raw control characters inside strings decode.
_JSON = json.JSONDecoder(strict=False)
#: What the end of a text can leave of a number, a literal or an escape.
_OPEN_TOKEN = re.compile(r"-?[0-9.eE+-]*|t(r(ue?)?)?|f(a(l(se?)?)?)?|n(u(ll?)?)?|-?I(n(f(i(n(i(ty?)?)?)?)?)?)?"
                         r"|N(aN?)?")
#: A bracket that opens JSON rather than prose (``{"``, ``[{``, ``[1``, ...).
_LOOKS_LIKE_JSON = re.compile(r'\{\s*["}]|\[\s*[-"{\[\]0-9tfn]')
#: Values tried before the text is treated as cut (each costs one decode).
_MAX_JSON_STARTS = 256


def _stops_at_end(body: str, exc: json.JSONDecodeError) -> bool:
    """The decode failed because the text ended, not because of a bad character:
    inside a string, or where all that is left is nothing or the start of a
    number or a literal. (A cut inside a ``\\u`` escape leaves its string
    unterminated, which the caller's never-closed test sees.)"""
    return exc.msg.startswith("Unterminated string") or _OPEN_TOKEN.fullmatch(body[exc.pos:]) is not None


def ends_inside_json(text: str | None) -> bool:
    """True when ``text`` stops inside a JSON document or an open code fence:
    a ``{``/``[`` anywhere in the answer (reasoning blocks left out) starts a
    value that the end of the text interrupts, or a code fence in its prose
    (outside JSON values) is never closed. How a cut looks when the CLI reports no finish reason (Gemini
    CLI). An answer that is one JSON value as a whole is never a cut. A brace
    in prose (``{name}``) does not hide a later value that is cut; past
    :data:`_MAX_JSON_STARTS` values the text is treated as cut (fail-safe)."""
    body = (split_reasoning(text)[0] or "").rstrip()
    if not body:
        return False
    try:
        bounded_json(body, strict=False)
        return False
    except ValueError:  # not JSON, or past the bounds (JSONLimitError)
        pass
    pos, fences = 0, 0
    for _ in range(_MAX_JSON_STARTS):
        starts = [i for i in (body.find("{", pos), body.find("[", pos)) if i >= 0]
        if not starts:
            # Fences are counted in the prose only (a JSON string may hold one).
            return (fences + body.count("```", pos)) % 2 == 1
        start = min(starts)
        fences += body.count("```", pos, start)
        try:
            _, pos = _JSON.raw_decode(body, start)
        except json.JSONDecodeError as exc:
            if _stops_at_end(body, exc) or (_LOOKS_LIKE_JSON.match(body, start) and _span_end(body, start) is None):
                # Cut at the end, or broken earlier (a bad escape, ``01``) and never closed: cut either way.
                return True
            # What decoded before the failure is JSON: a fence marker in it is inside a string.
            pos = max(start + 1, exc.pos)
        except RecursionError:
            return False  # too deep to follow: the parse reports it as such
        except ValueError:  # a number past the interpreter's digit limit: whole when its value closes
            end = _span_end(body, start)
            if end is None:
                return True
            pos = end
    return True
