"""Model endpoints behind ``iModel``: HTTP (Chat Completions) and CLI agents."""
