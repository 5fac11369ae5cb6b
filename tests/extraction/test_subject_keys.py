"""A stored subject's key in SQL (`subject_key`, which picks the facts of a category a new fact
is about) is the write path's own (`normalise_subject`) for every subject in ASCII; a subject
beyond ASCII, whose case-folding SQL cannot follow, is always read (`beyond_ascii`)."""

from __future__ import annotations

import pytest
from sqlalchemy import String, literal, select
from sqlalchemy.ext.asyncio import AsyncEngine

from service.extraction.prompt import normalise_subject
from service.memories.repository import beyond_ascii, subject_key

ASCII_SUBJECTS = [
    "home_city",
    "Home City",
    "  HOME--city__ ",
    "__pets__",
    "Programming Languages (2026)",
    "a" * 63 + "_b",
    "x" * 70,
    "---",
    "C++ / Rust",
]
BEYOND_ASCII = ["Straße", "Ünïcode topic", "ﬁle_format", "café"]


@pytest.mark.parametrize("subject", ASCII_SUBJECTS)
async def test_the_sql_key_of_an_ascii_subject_is_the_write_paths(
    runtime_engine: AsyncEngine, subject: str
) -> None:
    stored = literal(subject, String())
    async with runtime_engine.connect() as connection:
        key, beyond = (
            await connection.execute(select(subject_key(stored), beyond_ascii(stored)))
        ).one()
    assert key == (normalise_subject(subject) or "")
    assert beyond is False


@pytest.mark.parametrize("subject", BEYOND_ASCII)
async def test_a_subject_beyond_ascii_is_always_read(
    runtime_engine: AsyncEngine, subject: str
) -> None:
    stored = literal(subject, String())
    async with runtime_engine.connect() as connection:
        beyond = (await connection.execute(select(beyond_ascii(stored)))).scalar_one()
    assert beyond is True
