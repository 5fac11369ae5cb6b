"""A stored subject's key in SQL (`subject_key_sql`, by which the facts of a category a new fact
is about are found) is the write path's own (`normalise_subject`) for every subject in ASCII,
and '' (always read, the keys compared by the reader) for a subject beyond ASCII, whose
case-folding SQL cannot follow."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.extraction.prompt import normalise_subject
from service.memories.repository import subject_key_sql

KEY_SQL = text("SELECT " + subject_key_sql("CAST(:subject AS text)"))

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
    "homeCity",
    "HomeCity",
    "HTTPServer",
    "userID",
    "address2Line",
    "ABcDEf",
]
BEYOND_ASCII = ["Straße", "Ünïcode topic", "ﬁle_format", "café"]


@pytest.mark.parametrize("subject", ASCII_SUBJECTS)
async def test_the_sql_key_of_an_ascii_subject_is_the_write_paths(
    runtime_engine: AsyncEngine, subject: str
) -> None:
    async with runtime_engine.connect() as connection:
        key = (await connection.execute(KEY_SQL, {"subject": subject})).scalar_one()
    assert key == (normalise_subject(subject) or "")


@pytest.mark.parametrize("subject", BEYOND_ASCII)
async def test_a_subject_beyond_ascii_has_the_key_every_reader_reads(
    runtime_engine: AsyncEngine, subject: str
) -> None:
    async with runtime_engine.connect() as connection:
        key = (await connection.execute(KEY_SQL, {"subject": subject})).scalar_one()
    assert key == ""


@pytest.mark.parametrize("subject", ["home_city", "homeCity", "HomeCity", "home-city", "Home City"])
def test_the_spellings_of_one_subject_meet_in_one_key(subject: str) -> None:
    assert normalise_subject(subject) == "home_city"
