"""The fusion statement: one SQL statement that answers a search with every component score.

Everything about it lives in this package, one concern a module, read in this order:

- `sql`: its text, `HYBRID_SEARCH_SQL`, and the fragments rendered into it (nothing but SQL
  and what each part returns);
- `parameters`: what a search binds (`SearchParams`, each ranking parameter declared once with
  its SQL type);
- `statement`: the text rendered for a search's filter shape (`render` fails on a placeholder
  left unfilled), its values bound, and its compilation to driver SQL, once per filter shape;
- `repository`: what a search asks about its owners before it (`OwnersFound`), the planner
  setting it runs under, and `FusionRepository`, which runs it on the transaction's driver
  connection. A search overlaps that question and the planner setting with the embedding of its
  question: `FusionRepository.planned()` asks and makes the setting, and the caller awaits the
  question's vector inside it.

The names other modules use are importable from the package itself.
"""

from service.memories.fusion.parameters import (
    FIRST_VECTOR_COLUMN,
    RANKING_PARAMETERS,
    SearchParams,
)
from service.memories.fusion.repository import (
    GENERIC_SEARCH_PLAN_SQL,
    FusionRepository,
    OwnersFound,
    PlannedSearch,
    SearchRow,
    runs_generic_plans,
)
from service.memories.fusion.sql import COLLECTION_SQL, HYBRID_SEARCH_SQL, LEXICAL_MATCHES_SQL
from service.memories.fusion.statement import (
    hybrid_search_statement,
    render,
    sectioned_search_statement,
)

__all__ = [
    "COLLECTION_SQL",
    "FIRST_VECTOR_COLUMN",
    "GENERIC_SEARCH_PLAN_SQL",
    "HYBRID_SEARCH_SQL",
    "LEXICAL_MATCHES_SQL",
    "RANKING_PARAMETERS",
    "FusionRepository",
    "OwnersFound",
    "PlannedSearch",
    "SearchParams",
    "SearchRow",
    "hybrid_search_statement",
    "render",
    "runs_generic_plans",
    "sectioned_search_statement",
]
