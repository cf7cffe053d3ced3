"""Definition pinning: the hash of each tool's definition, per server."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from .._json import loads as bounded_json
from ..errors import ConfigurationError

__all__ = ["ToolPins", "definition_hash"]


def definition_hash(definition: dict[str, Any]) -> str:
    """The SHA-256 of a tool's definition (``name``, ``description``,
    ``inputSchema``, ``annotations``) as canonical JSON."""
    pinned = {k: definition.get(k) for k in ("name", "description", "inputSchema", "annotations")}
    text = json.dumps(pinned, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class ToolPins:
    """Pinned tool definitions: server name -> tool name -> definition hash.

    A tool seen for the first time is pinned; a tool whose definition no
    longer has its pinned hash is refused (:class:`MCPDefinitionChangedError`)
    until :meth:`accept` pins its new definition. Saved as JSON (:meth:`save`,
    :meth:`load`).
    """

    __slots__ = ("_pins",)

    def __init__(self, pins: dict[str, dict[str, str]] | None = None) -> None:
        self._pins: dict[str, dict[str, str]] = {s: dict(t) for s, t in (pins or {}).items()}

    def get(self, server: str, tool: str) -> str | None:
        return self._pins.get(server, {}).get(tool)

    def pin(self, server: str, tool: str, digest: str) -> None:
        self._pins.setdefault(server, {})[tool] = digest

    def accept(self, server: str, tool: str, definition: dict[str, Any] | None = None) -> None:
        """Accept the current definition of ``tool``: with ``definition``, pin its
        hash; without, forget the pin (the next listing pins what it sees)."""
        if definition is None:
            self._pins.get(server, {}).pop(tool, None)
        else:
            self.pin(server, tool, definition_hash(definition))

    def as_dict(self) -> dict[str, dict[str, str]]:
        return {s: dict(t) for s, t in self._pins.items()}

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the pins to ``path`` as JSON (through a temporary file, then renamed)."""
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_text(json.dumps(self._pins, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        os.replace(tmp, target)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> ToolPins:
        """Pins saved by :meth:`save`.

        Raises:
            ConfigurationError: the file is not a JSON object of objects of strings.
        """
        try:
            data = bounded_json(Path(path).read_text(encoding="utf-8"), what="tool pins")
        except ValueError as exc:  # not JSON, or nested past the bound (JSONLimitError)
            raise ConfigurationError(f"{os.fspath(path)!r} does not hold tool pins: {exc}") from None
        if not isinstance(data, dict) or not all(
                isinstance(t, dict) and all(isinstance(h, str) for h in t.values()) for t in data.values()):
            raise ConfigurationError(f"{os.fspath(path)!r} does not hold tool pins (server -> tool -> hash)")
        return cls(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolPins) and self._pins == other._pins

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ToolPins({sum(map(len, self._pins.values()))} tools of {len(self._pins)} servers)"
