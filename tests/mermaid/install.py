"""Install Mermaid's parser (pinned in package-lock.json) into ``.cache/mermaid``.

Used by ``make mermaid-parser`` and, when that has not run, by
tests/unit/test_diagram_mermaid.py. Prints why and exits 1 when it cannot install
(no ``node``/``npm``, or the npm registry is unreachable).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE.parent.parent / ".cache" / "mermaid"
PINNED = ("package.json", "package-lock.json")
# What npm prints when it cannot reach the registry.
NETWORK_ERRORS = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH",
                  "EHOSTUNREACH", "network", "E502", "E503", "E504")
UNAVAILABLE = ("node/npm are not installed", "npm registry unreachable")


def installed(cache: Path = CACHE) -> bool:
    """True when ``cache`` holds the pinned install."""
    stamp = cache / ".installed"
    return stamp.is_file() and all((cache / n).read_bytes() == (HERE / n).read_bytes() for n in PINNED)


def install(cache: Path = CACHE) -> str | None:
    """Install when needed; ``None`` on success, else the reason it could not.

    A reason starting with one of ``UNAVAILABLE`` means the parser cannot be
    had on this machine; any other is a broken install.
    """
    if installed(cache):
        return None
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        return "node/npm are not installed"
    cache.mkdir(parents=True, exist_ok=True)
    for name in PINNED:
        shutil.copyfile(HERE / name, cache / name)
    proc = subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
        cwd=cache, capture_output=True, text=True, timeout=600,
    )
    if proc.returncode != 0:
        tail = proc.stderr.strip()[-400:]
        if any(marker in proc.stderr for marker in NETWORK_ERRORS):
            return f"npm registry unreachable: {tail}"
        return f"npm ci failed: {tail}"
    (cache / ".installed").touch()
    return None


if __name__ == "__main__":
    reason = install()
    if reason:
        print(f"mermaid parser not installed: {reason}")
        sys.exit(1)
    print(f"mermaid parser ready in {CACHE}")
