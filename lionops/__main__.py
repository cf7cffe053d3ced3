"""``python -m lionops``: the same command line as the ``lionops`` console script."""

from __future__ import annotations

import sys

from .cli.commands import main

if __name__ == "__main__":
    sys.exit(main(prog="python -m lionops"))
