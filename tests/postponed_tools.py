"""Tool functions in a module with postponed annotations, for the signature
tests: quoted annotations here are strings of strings."""

from __future__ import annotations

from typing import Optional

from pydantic import BaseModel


class Point(BaseModel):
    x: int


def norm(p: "Point") -> int:  # noqa: UP037 - the quoted spelling is the case
    """Norm of a point."""
    return abs(p.x)


def total(points: list["Point"], scale: Optional["int"] = None) -> int:  # noqa: UP037, UP045
    """Sum of points."""
    return sum(p.x for p in points) * (scale or 1)


class Scaler:
    """A callable object whose method annotations are quoted."""

    def scale(self, p: "Point", /, factor: "int" = 2) -> int:  # noqa: UP037
        """Scale a point."""
        return p.x * factor

    def __call__(self, p: "Point") -> int:  # noqa: UP037
        return p.x + 1
