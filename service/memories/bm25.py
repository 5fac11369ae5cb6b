"""BM25, the lexical side's score, defined once: its two parameters and its term weight as SQL.

Three things must agree on it. The fusion statement scores every lexical candidate with it;
the postings store each lexeme's weight in its memory at a fixed mean length (its impact); and
the bounded search prunes the candidates whose score, bounded from their impacts, cannot reach
a pool. A bound derived with other parameters than the scores would prune memories that belong
in the pool, with no error anywhere: so every one of them is rendered from here.
"""

from __future__ import annotations

K1 = 1.2
"""How fast a lexeme's weight saturates as it occurs more often in one memory."""

B = 0.75
"""How far a memory's length normalises its lexemes' weights (0: not at all, 1: in full)."""


def number(value: float) -> str:
    """`value` as a SQL literal of a fractional type, without the last-bit noise of float
    arithmetic (1.2 * 0.25 is 0.30000000000000004 as a float; its literal is 0.3). Never an
    integer literal: an integer column divided by one would be divided as integers."""
    literal = format(value, ".12g")
    return literal if any(mark in literal for mark in ".e") else f"{literal}.0"


SATURATION = number(K1 + 1)
"""The most a lexeme can weigh in a memory (before its inverse document frequency):
k1 + 1, approached as it occurs more and more often."""

SHORTEST_SHARE = number(K1 * (1 - B))
"""k1 (1 - b): the part of a weight's denominator that no length normalises (the weight of a
lexeme in a memory of length 0 is k1 + 1 over its frequency plus this)."""


def inverse_document_frequency(documents: str, containing: str) -> str:
    """BM25's inverse document frequency (Lucene's, never negative) of a lexeme in
    `containing` of `documents` memories: each a SQL expression of integers, the result a
    float8 one (PostgreSQL would compute `ln` of a fractional literal over integers as numeric,
    and every weight multiplied by it after)."""
    half = "float8 '0.5'"
    return f"ln(1 + ({documents} - {containing} + {half}) / ({containing} + {half}))"


def term_weight(frequency: str, length: str, mean_length: str) -> str:
    """The BM25 weight (without the inverse document frequency) of a lexeme that occurs
    `frequency` times in a memory of `length` distinct lexemes, in memories of `mean_length`
    on average: each argument a SQL expression, the result a float8 one. Computed in float8
    whatever the arguments' types (an integer frequency times a fractional literal would be
    numeric, whose arithmetic costs several times float8's for every candidate scored)."""
    frequency, length, mean_length = (
        f"CAST({value} AS float8)" for value in (frequency, length, mean_length)
    )
    return (
        f"({frequency} * {SATURATION} / ({frequency} + {number(K1)} * "
        f"({number(1 - B)} + {number(B)} * {length} / {mean_length})))"
    )


def score_for_ties(score: str) -> str:
    """`score` (a float8 SQL expression) rounded to 1e-9, still a float8: a sum's last bits
    depend on the order a plan adds its terms in, and two memories of equal score must tie
    (and rank by id) whatever the plan. In float8 arithmetic: a round through numeric cost
    ~10 % of a search that scores a thousand candidates."""
    return f"round({score} * float8 '1e9') / float8 '1e9'"
