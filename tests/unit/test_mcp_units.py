"""lionops.mcp's pure parts: annotation defaults, definition hashes, the check
``deny_destructive``, and that importing lionops imports nothing of the SDK."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lionops.errors import ConfigurationError
from lionops.mcp import MCPTool, ToolAnnotations, definition_hash, deny_destructive
from lionops.mcp.tool import _never
from lionops.tools import Tool, ToolInvocation

DEFINITION = {"name": "write", "description": "Write.", "inputSchema": {
    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"],
    "additionalProperties": False}}


def mcp_tool(**definition: object) -> MCPTool:
    d = {**DEFINITION, **definition}
    return MCPTool(_never, name="write", server="s", remote_name="write", definition=d,
                   annotations=ToolAnnotations.of(d.get("annotations")))  # type: ignore[arg-type]


def test_importing_lionops_imports_nothing_of_the_sdk():
    code = ("import sys, lionops; "
            "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'lionops.mcp'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("hints", "expected"), [
    (None, ToolAnnotations(read_only=False, destructive=True, idempotent=False, open_world=True)),
    ({"readOnlyHint": True, "destructiveHint": True}, ToolAnnotations(read_only=True, destructive=False)),
    ({"destructiveHint": False, "idempotentHint": True, "openWorldHint": False},
     ToolAnnotations(destructive=False, idempotent=True, open_world=False)),
    ({"readOnlyHint": "yes", "title": "W"}, ToolAnnotations(title="W")),  # a hint that is not a bool: the default
])
def test_annotations_take_the_specification_defaults(hints, expected):
    assert ToolAnnotations.of(hints) == expected


def test_deny_destructive_reads_the_tool_annotations_and_allows_functions():
    destructive = mcp_tool()
    read_only = mcp_tool(annotations={"readOnlyHint": True})
    assert deny_destructive(ToolInvocation("write", {"path": "p"}, destructive)) is False
    assert deny_destructive(ToolInvocation("write", {"path": "p"}, read_only)) is True
    plain = ToolInvocation("f", {}, Tool(lambda: None, name="f"))
    assert deny_destructive(plain) is True and plain.server is None and plain.annotations is None


def test_the_definition_hash_changes_with_each_pinned_field_only():
    base = definition_hash(DEFINITION)
    assert definition_hash({**DEFINITION, "title": "ignored", "_meta": {"x": 1}}) == base
    for key, value in [("name", "w2"), ("description", "Write more."), ("inputSchema", {"type": "object"}),
                       ("annotations", {"readOnlyHint": True})]:
        assert definition_hash({**DEFINITION, key: value}) != base


def test_arguments_are_validated_against_the_input_schema():
    tool = mcp_tool()
    assert tool.validate_arguments({"path": "a"}) == {"path": "a"}
    for bad, text in [({}, "'path' is a required property"), ({"path": 1}, "path: 1 is not of type 'string'"),
                      ({"path": "a", "x": 1}, "Additional properties are not allowed")]:
        with pytest.raises(ValueError, match=text):
            tool.validate_arguments(bad)
    assert tool.schema["function"]["parameters"] == DEFINITION["inputSchema"]
    assert tool.offered_schema is tool.offered_schema


def test_an_input_schema_that_is_not_json_schema_is_refused():
    with pytest.raises(ConfigurationError, match="not valid JSON Schema"):
        mcp_tool(inputSchema={"type": "objekt"})
