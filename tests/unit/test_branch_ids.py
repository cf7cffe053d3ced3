"""A Branch's id is a random version-4 UUID in 32 hex digits, unique per Branch."""

from __future__ import annotations

import uuid

from lionops import Branch


def test_branch_ids_are_uuid4_hex_and_unique() -> None:
    ids = [Branch().id for _ in range(500)]
    assert len(set(ids)) == len(ids)
    for value in ids:
        parsed = uuid.UUID(hex=value)
        assert parsed.hex == value and len(value) == 32
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
