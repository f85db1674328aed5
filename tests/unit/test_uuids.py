"""Object uids and request ids: canonical version 4 UUIDs (RFC 4122 variant), never repeated,
across the batches of random bytes they are cut from."""

from __future__ import annotations

import re
import uuid

from gateway.apimachinery.uuids import new_uuid

CANONICAL = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_each_is_a_canonical_version_4_uuid() -> None:
    for _ in range(600):  # more than two batches of random bytes
        text = new_uuid()
        assert CANONICAL.match(text), text
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text


def test_none_repeats_across_batches() -> None:
    made = [new_uuid() for _ in range(5000)]
    assert len(set(made)) == len(made)
    # the 122 random bits vary everywhere: no position is stuck across many ids
    for position in range(36):
        if position in (8, 13, 14, 18, 23):  # dashes, the version digit
            continue
        assert len({text[position] for text in made}) > 1, position
