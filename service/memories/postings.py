"""The search's lexical index, kept beside the memories: impact-ordered postings and the owner's
term statistics.

A memory's postings (`memory_posting`) are one row per lexeme of its text, with the lexeme's
BM25 term-frequency weight in that memory at a fixed mean length (its impact). They are written
in the memory's own transaction whenever its text is written (no trigger: Citus does not run
triggers on distributed tables) and deleted with it (foreign key). The fusion statement reads
the highest-impact postings of each question lexeme for a large owner instead of testing every
memory the owner has (`service/memories/fusion/`).

The owner's statistics (`memory_owner_stats`, `memory_lexeme_stats`) are what BM25 needs beyond
one memory: how many memories the owner has, their mean length, and the document count of each
lexeme too common to count at search time. They are refreshed in the background
(`refresh_statistics`, the `memories.refresh_search_statistics` job); until an owner has them,
its searches take the exact path. A recount is asked for by the searches that find them missing
or old, and by the writes that grew the owner by a good share since its last count
(`OwnerGrowth`): an owner filled in bulk is searched through its postings, and gets vector
graphs of its own (`service.memories.owner_indexes`), minutes sooner than its next search
would find the count old.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from service.accounts.repository import AccountRepository
from service.auth.owner import Owner
from service.db import tenant_transaction
from service.jobs.kinds import enqueue_search_statistics
from service.kit.expiring import ExpiringKeys, ExpiringValues
from service.kit.post_commit import PostCommitTasks
from service.kit.repository import TenantRepository
from service.memories.bm25 import number, term_weight

logger = logging.getLogger("mneme.memories.postings")

IMPACT_MEAN_LENGTH = 10.0
"""The document length (distinct lexemes) an impact is computed at: about the mean of the
write path's facts, episodes and turns. Impacts only order a lexeme's postings; every candidate
is scored afterwards with the owner's own mean length."""

COMMON_LEXEME_DOCUMENTS = 200
"""A lexeme in at least this many of an owner's memories has its document count kept in
`memory_lexeme_stats`; a rarer one is counted from its postings at search time (at most
`fusion.LIVE_COUNT_CAP` index entries)."""

INSERT_POSTINGS_SQL = f"""
INSERT INTO memory_posting (tenant_id, memory_id, owner_key, lexeme, kind, frequency, length,
                            impact)
SELECT m.tenant_id, m.id, coalesce('user:' || m.user_id, 'org:'), term.lexeme, m.kind,
       cardinality(term.positions), m.tsv_length,
       {term_weight("cardinality(term.positions)", "m.tsv_length", number(IMPACT_MEAN_LENGTH))}
  FROM memory m CROSS JOIN LATERAL unnest(m.tsv) AS term
"""  # noqa: S608 - module constants
"""The postings of the memories `m` the caller's WHERE selects, from their stored tsvector (the
BM25 term weight of `service.memories.bm25` at `IMPACT_MEAN_LENGTH`), with what scores it at
any mean length (the lexeme's frequency in the memory, the memory's length); the owner key is
`Owner.key` of the memory's owner, the kind the memory's (which never changes)."""

WRITE_POSTINGS_SQL = text(
    INSERT_POSTINGS_SQL + " WHERE m.tenant_id = :tenant_id AND m.id = ANY(:memory_ids)"
)
"""The postings of the given memories."""

CLEAR_POSTINGS_SQL = text(
    "DELETE FROM memory_posting WHERE tenant_id = :tenant_id AND memory_id = ANY(:memory_ids)"
)

CLEAR_STATISTICS_SQL = (
    text("DELETE FROM memory_owner_stats WHERE tenant_id = :tenant_id AND owner_key = :owner_key"),
    text("DELETE FROM memory_lexeme_stats WHERE tenant_id = :tenant_id AND owner_key = :owner_key"),
)

COUNT_OWNER_SQL = text(
    """
INSERT INTO memory_owner_stats (tenant_id, user_id, documents, total_length, refreshed_at)
SELECT m.tenant_id, :user_id, count(*), coalesce(sum(m.tsv_length), 0), now()
  FROM memory m
 WHERE m.tenant_id = :tenant_id AND m.scope = :scope
   AND (m.user_id = :user_id OR (m.user_id IS NULL AND CAST(:user_id AS text) IS NULL))
   AND m.lifecycle <> 'superseded' AND (m.expires_at IS NULL OR m.expires_at > now())
 GROUP BY m.tenant_id
"""
)
"""The owner's live memories and their total length (what a default search ranks over); no
row for an owner with none (a purged user keeps no statistics). The tenant written is the rows'
own (grouped by it), so on Citus the statement runs on the tenant's shard as a whole: a value
that only equals it would make Citus move the rows through the coordinator with COPY, which
row-level security refuses."""

COUNT_COMMON_LEXEMES_SQL = text(
    """
INSERT INTO memory_lexeme_stats (tenant_id, user_id, lexeme, documents)
SELECT p.tenant_id, :user_id, p.lexeme, count(*)
  FROM memory_posting p
 WHERE p.tenant_id = :tenant_id AND p.owner_key = :owner_key
 GROUP BY p.tenant_id, p.lexeme
HAVING count(*) >= :common
"""
)

OWNER_DOCUMENTS_SQL = text(
    "SELECT documents FROM memory_owner_stats "
    "WHERE tenant_id = :tenant_id AND owner_key = :owner_key"
)
"""The owner's live memories as its statistics last counted them (no row: none). A recount reads
its count back with it: Citus 14 deparses `COUNT_OWNER_SQL … RETURNING documents` for the shard
without its target table ("missing FROM-clause entry for table memory_owner_stats")."""


class PostingsRepository(TenantRepository):
    """Writes the postings of memories and refreshes owners' statistics, in the request's (or
    the job's) tenant-scoped transaction."""

    async def write(self, memory_ids: Sequence[uuid.UUID], *, replacing: bool = False) -> None:
        """The postings of `memory_ids` as their stored text has it now; `replacing` clears
        the ones an earlier text left first (an edit)."""
        if not memory_ids:
            return
        values = {"tenant_id": self._tenant_id, "memory_ids": list(memory_ids)}
        if replacing:
            await self._session.execute(CLEAR_POSTINGS_SQL, values)
        await self._session.execute(WRITE_POSTINGS_SQL, values)

    async def refresh_statistics(self, owner: Owner) -> int:
        """Recount the owner's statistics from its memories and postings (one transaction:
        a search sees the old set or the new one, never a mix); the live memories counted."""
        values = {
            "tenant_id": self._tenant_id,
            "scope": owner.scope,
            "user_id": owner.user_id,
            "owner_key": owner.key,
            "common": COMMON_LEXEME_DOCUMENTS,
        }
        for statement in (*CLEAR_STATISTICS_SQL, COUNT_OWNER_SQL, COUNT_COMMON_LEXEMES_SQL):
            await self._session.execute(statement, values)
        documents = await self._session.scalar(OWNER_DOCUMENTS_SQL, values)
        return int(documents or 0)


class StatisticsRequests:
    """Where a search asks for its owners' statistics to be recounted: a job queued after the
    request's transaction committed, in a short transaction of its own. A search is a read:
    its transaction writes nothing, and on Citus it may not touch the coordinator's job table
    after the statement that ran on the tenant's shard."""

    def __init__(
        self,
        sessionmaker: async_sessionmaker[AsyncSession],
        post_commit: PostCommitTasks,
        tenant_id: str,
    ) -> None:
        self._sessionmaker = sessionmaker
        self._post_commit = post_commit
        self._tenant_id = tenant_id
        self._asked: set[Owner] = set()

    def ask(self, owners: set[Owner]) -> None:
        """Queue one recount per owner not asked for lately in this process (concurrent
        searches of one owner would each queue one before any is in the queue to deduplicate
        against)."""
        new = {owner for owner in owners - self._asked if recounts.ask(self._tenant_id, owner)}
        if not new:
            return
        self._asked |= new
        ordered = sorted(new, key=lambda owner: owner.key)

        async def enqueue() -> None:
            async with tenant_transaction(self._sessionmaker, self._tenant_id) as session:
                # A job on the owners' data, dropped by their purge: queued after their write
                # locks, so a purge never drops the queued jobs while this queues another.
                accounts = AccountRepository(session, self._tenant_id)
                await accounts.hold_owner_writes(*ordered)
                for owner in ordered:
                    # Asked for before a purge of the owner (or of its tenant) that committed
                    # while this waited for the locks: nothing is left to count, and a job
                    # queued now would name what the purge removed, after it.
                    if not await accounts.owner_exists(owner):
                        logger.info(
                            "recount of %s in tenant %s not queued: the owner was purged",
                            owner.key,
                            self._tenant_id,
                        )
                        continue
                    await enqueue_search_statistics(session, self._tenant_id, owner)

        self._post_commit.add(enqueue)

    def wrote(self, owner: Owner, added: int, bounded_from: int) -> None:
        """Count `added` new memories of `owner` toward its growth (`OwnerGrowth`), and queue
        a recount of its statistics when it has grown enough since the last."""
        if added > 0 and growth.wrote(self._tenant_id, owner, added, bounded_from):
            self.ask({owner})


class RecentRecounts:
    """The owners whose recount this process asked for within `window`, until the recount ran
    (`done`): one request per owner at a time, however many searches find it due."""

    def __init__(self, window: timedelta, kept: int) -> None:
        self._asked: ExpiringKeys[tuple[str, str]] = ExpiringKeys(window, kept)

    def ask(self, tenant_id: str, owner: Owner) -> bool:
        """True (and remembered) unless the owner's recount was asked for within the window."""
        key = (tenant_id, owner.key)
        if key in self._asked:
            return False
        self._asked.add(key)
        return True

    def done(self, tenant_id: str, owner: Owner) -> None:
        self._asked.discard((tenant_id, owner.key))


recounts = RecentRecounts(timedelta(minutes=1), kept=10_000)
"""This process's outstanding recount requests (see `StatisticsRequests`)."""


GROWTH_SHARE = 0.25
"""How much an owner grows, as a share of its memories at the last count, before its statistics
are recounted: a quarter more memories move a common lexeme's weight and the mean length
little, and an owner filled in bulk from nothing is counted about twenty times on its way to
100,000 memories (each count costs about what the owner holds)."""


class OwnerGrowth:
    """The memories this process wrote to each owner since its statistics were counted (as this
    process last learnt the count): the writes' reason to ask for a recount.

    A recount is due once the memories written reach `GROWTH_SHARE` of the count, and the owner
    then holds at least `bounded_from` (below that its searches are exact, and need none). An
    owner whose count this process does not know is taken as counted at nothing, so it asks once
    `bounded_from` memories were written here. Asking takes the recount as done with what was
    written; the job's own count corrects it where it runs in this process (`counted`). Another
    replica's writes are its own to count: each process asks for what it wrote."""

    def __init__(self, ttl: timedelta, kept: int) -> None:
        self._owners: ExpiringValues[tuple[str, str], tuple[int, int]] = ExpiringValues(ttl, kept)

    def counted(self, tenant_id: str, owner: Owner, documents: int) -> None:
        """The owner's statistics were counted at `documents` live memories."""
        self._owners.put((tenant_id, owner.key), (documents, 0))

    def wrote(self, tenant_id: str, owner: Owner, added: int, bounded_from: int) -> bool:
        """Count `added` memories written to the owner; True when its recount is due."""
        key = (tenant_id, owner.key)
        documents, written = self._owners.get(key) or (0, 0)
        written += added
        due = written >= max(documents * GROWTH_SHARE, bounded_from - documents)
        self._owners.put(key, (documents + written, 0) if due else (documents, written))
        return due


growth = OwnerGrowth(timedelta(days=1), kept=100_000)
"""This process's writes per owner since its statistics were counted (see `OwnerGrowth`)."""
