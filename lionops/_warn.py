"""Warnings shown where the caller's code is, not inside lionops."""
from __future__ import annotations

import os
import sys
import warnings

#: the lionops package directory; frames in files under it are lionops' own
_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def warn_caller(text: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(text, category)`` attributed to the nearest frame outside
    lionops (the caller's ``await branch.operate(...)``), so the warning names
    a line the caller can change; without such a frame (a task lionops
    started), the frame that called this function."""
    frame = sys._getframe(0)
    level = 1
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    warnings.warn(text, category, stacklevel=level if frame is not None else 2)
