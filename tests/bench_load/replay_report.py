"""Reading the tables the replay scripts print (`statement_replay`, `http_replay`)."""

from __future__ import annotations

import re


def table_rows(printed: str, columns: int) -> dict[tuple[str, str], list[str]]:
    """The rows of a printed report of `columns` columns by (size, version): the cells after
    those two, in the report's order."""
    rows = {}
    for line in printed.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == columns and re.fullmatch(r"\d+", cells[0]):
            rows[(cells[0], cells[1])] = cells[2:]
    return rows
