"""A listing of one owner's memories (`MemoryRepository.list_page`) reads them newest first from
the index of each user's memories in time order and stops when the page is full, and a listing of
one kind from the index of the user's memories of each kind in time order, and a listing of the
proposed (or superseded) memories from the index of those alone, and the organization's from
the index of its memories: the cost of a page is the page's, not the owner's (a sort of every
matching memory took 161 ms a page at 100,000 memories; the memories of one kind, read from all
of them newest first, 48.6 ms; the proposed ones, 42 ms; the organization's 5,000, 14 ms)."""

from __future__ import annotations

from typing import Any, NamedTuple

from httpx import AsyncClient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from service.auth.owner import Owner
from service.config import Settings
from service.db import create_sessionmaker, tenant_transaction
from service.memories.filters import MemoryFilter
from service.memories.models import Memory
from service.memories.repository import MemoryRepository
from service.memories.schemas import BATCH_MAX
from tests.conftest import bearer
from tests.fixtures.factories import remember_all, remember_texts
from tests.plans import statements_sent, tenant_plan

NO_SORTS = "SET LOCAL enable_sort = off"


class Listing(NamedTuple):
    page: list[Memory]
    sent: tuple[str, Any]
    """The listing statement, with its parameters as the driver received them."""
    in_index_order: bool
    """Whether sorts were turned off for it (an index's order taken whatever the estimates)."""


async def listed(engine: AsyncEngine, tenant: str, memory_filter: MemoryFilter) -> Listing:
    """The first page of 20 `list_page` gives for the filter, and how it was asked for."""
    with statements_sent(engine) as sent:
        async with tenant_transaction(create_sessionmaker(engine), tenant) as session:
            page = await MemoryRepository(session, tenant).list_page(
                memory_filter, after=None, limit=20
            )
            # Whatever the listing turned off is on again for the rest of the transaction.
            assert (await session.execute(text("SHOW enable_sort"))).scalar_one() == "on"
    [at] = [n for n, (statement, _) in enumerate(sent) if "ORDER BY m.created_at" in statement]
    return Listing(page, sent[at], any(NO_SORTS in statement for statement, _ in sent[:at]))


async def written_before_many_turns(
    client: AsyncClient, headers: dict[str, str], texts: list[str], **fields: Any
) -> None:
    """The caller's memories of `texts` (with `fields`), then 120 turns after them: newest first
    over all of the owner's memories, a page of those would be found only past every turn."""
    await remember_texts(client, headers, texts, **fields)
    turns = [f"User said line {n}." for n in range(120)]
    await remember_texts(client, headers, turns, kind="episodic")


async def ordered_scan(
    engine: AsyncEngine, tenant: str, listing: tuple[str, Any], index: str
) -> dict[str, Any]:
    """The scan of `index` in the listing's plan with sorts off (as `list_page` plans a page
    that fills from its first entries), which must then sort nothing."""
    nodes = await tenant_plan(engine, tenant, listing, NO_SORTS)
    assert not [node for node in nodes if node["Node Type"] == "Sort"], nodes
    [scan] = [node for node in nodes if node.get("Index Name") == index]
    return scan


async def test_a_page_of_one_owners_memories_is_read_in_time_order(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
) -> None:
    headers = bearer(settings, tenant, "alice")
    for kind in ("semantic", "episodic"):
        texts = [f"User noted {kind} item {n}." for n in range(150)]
        await remember_texts(client, headers, texts, kind=kind)
    live = MemoryFilter.build([Owner.user("alice")]).live_unless_asked()
    page, listing, in_index_order = await listed(runtime_engine, tenant, live)
    # The newest: all of the last batch written (one transaction, one time).
    last_batch = range(150 - (150 % BATCH_MAX or BATCH_MAX), 150)
    newest = {f"User noted episodic item {n}." for n in last_batch}
    assert len(page) == 20 and {memory.text for memory in page} <= newest
    assert in_index_order
    # Whether an ordered read is cheaper than a sort depends on the owner's size and the
    # table's statistics (other tests' memories); whether one exists does not.
    scan = await ordered_scan(runtime_engine, tenant, listing, "ix_memory_user_newest")
    assert "user_id = 'alice'" in scan["Index Cond"], scan


async def test_a_page_of_one_kind_is_read_in_time_order_from_that_kinds_memories(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
) -> None:
    headers = bearer(settings, tenant, "alice")
    await written_before_many_turns(client, headers, [f"User likes item {n}." for n in range(30)])
    facts = MemoryFilter.build([Owner.user("alice")], kinds=["semantic"]).live_unless_asked()
    page, (statement, parameters), _ = await listed(runtime_engine, tenant, facts)
    assert len(page) == 20 and {memory.kind for memory in page} == {"semantic"}
    # The kind stated as an equality: with the owner's, the leading keys of the index of each
    # kind's memories in time order (which of the two ordered reads a plan takes is the
    # planner's choice by the table's statistics: for a small owner either is cheap).
    assert "m.kind = $" in statement and "semantic" in parameters
    async with runtime_engine.connect() as connection:
        definition = (
            await connection.execute(text("SELECT pg_get_indexdef('ix_memory_owner'::regclass)"))
        ).scalar_one()
    assert "(tenant_id, user_id, kind, created_at DESC, id DESC) INCLUDE (lifecycle)" in definition


async def test_a_page_of_proposed_memories_is_read_in_time_order_from_those_alone(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
) -> None:
    headers = bearer(settings, tenant, "alice")
    # The turns are confirmed: only the proposed facts are in the index of the unconfirmed.
    proposed = [f"User may like item {n}." for n in range(30)]
    await written_before_many_turns(client, headers, proposed, lifecycle="proposed")
    review = MemoryFilter.build([Owner.user("alice")], lifecycles=["proposed"])
    page, listing, in_index_order = await listed(runtime_engine, tenant, review)
    assert len(page) == 20 and {memory.text for memory in page} <= set(proposed)
    # The lifecycle stated as an equality: the index of the unconfirmed memories (partial:
    # `lifecycle <> 'confirmed'`, which a plan can use only when the statement names one of
    # them) then gives the page in order, reading no confirmed memory.
    statement, parameters = listing
    assert "m.lifecycle = $" in statement and "proposed" in parameters and in_index_order
    scan = await ordered_scan(runtime_engine, tenant, listing, "ix_memory_unconfirmed")
    assert "lifecycle = 'proposed'" in scan["Index Cond"], scan


async def test_a_page_of_the_organizations_memories_is_read_in_time_order_from_those_alone(
    client: AsyncClient,
    settings: Settings,
    tenant: str,
    runtime_engine: AsyncEngine,
) -> None:
    admin = bearer(settings, tenant, "root", admin=True)
    shared = [{"text": f"The team ships release {n}.", "category": "policy"} for n in range(30)]
    for start in range(0, len(shared), BATCH_MAX):
        await remember_all(client, admin, *shared[start : start + BATCH_MAX], org=True)
    await remember_texts(
        client, bearer(settings, tenant, "alice"), [f"User said line {n}." for n in range(60)]
    )
    org = MemoryFilter.build([Owner.org()]).live_unless_asked()
    page, listing, in_index_order = await listed(runtime_engine, tenant, org)
    assert len(page) == 20 and {memory.user_id for memory in page} == {None}
    # The organization's memories are named by `user_id IS NULL`, which gives no index of
    # users' memories its time order: the index of those rows alone does, and the page is read
    # from it rather than sorted (the planner estimates an organization's memories from the
    # whole table, and with few a sort looks as cheap).
    assert in_index_order
    scan = await ordered_scan(runtime_engine, tenant, listing, "ix_memory_org_newest")
    assert "tenant_id" in scan["Index Cond"], scan
    # A category may pass a few of many memories: sorting those few is the cheaper read, so
    # the planner keeps its choice.
    policies = MemoryFilter.build([Owner.org()], categories=["policy"]).live_unless_asked()
    assert not (await listed(runtime_engine, tenant, policies)).in_index_order
    # Nor is a kind or a lifecycle of the organization's: no index keyed by user gives those in
    # time order, and its own index would be read through all of them.
    for narrower in (
        MemoryFilter.build([Owner.org()], kinds=["procedural"]).live_unless_asked(),
        MemoryFilter.build([Owner.org()], lifecycles=["proposed"]),
    ):
        assert not (await listed(runtime_engine, tenant, narrower)).in_index_order
