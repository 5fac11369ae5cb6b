"""The Memory page in a real browser: Debian's Chromium driven by Playwright.

Run with `pytest -m browser` (the default `pytest` deselects these). The service runs in a
thread on a loopback port with the test database; the page talks to it over HTTP exactly as a
person's browser would. `MNEME_WRITE_SCREENSHOTS=1` writes the screenshots into
docs/screenshots/ (the committed set); otherwise they go to a temporary directory.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Dialog, Page, ViewportSize, expect

from service.config import Settings
from service.main import create_app
from tests.conftest import bearer, new_tenant
from tests.fixtures.loopback import free_port, serving

pytestmark = pytest.mark.browser

DESKTOP: ViewportSize = {"width": 1100, "height": 820}
PHONE: ViewportSize = {"width": 390, "height": 844}
COMMITTED_SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


@pytest.fixture(scope="module")
def live_server(settings: Settings) -> Iterator[str]:
    with serving(create_app(settings), free_port()) as url:
        yield url


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context(viewport=DESKTOP)
    opened = await context.new_page()
    yield opened
    await context.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("MNEME_WRITE_SCREENSHOTS") == "1":
        COMMITTED_SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        return COMMITTED_SCREENSHOTS
    return tmp_path_factory.mktemp("screenshots")


async def snap(page: Page, directory: Path, name: str) -> None:
    path = directory / f"{name}.png"
    await page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 5_000


class Api:
    """The public API over HTTP, as a client other than the page."""

    def __init__(self, base_url: str, settings: Settings, tenant: str) -> None:
        self.base_url = base_url
        self.settings = settings
        self.tenant = tenant

    def call(
        self, method: str, path: str, user: str, *, admin: bool = False, **kwargs: Any
    ) -> httpx.Response:
        headers = bearer(self.settings, self.tenant, user, admin=admin, **kwargs.pop("claims", {}))
        headers.update(kwargs.pop("headers", {}))
        return httpx.request(method, self.base_url + path, headers=headers, timeout=30, **kwargs)

    def remember(self, user: str, text: str, **fields: Any) -> str:
        response = self.call(
            "POST", f"/v1/users/{user}/memories", user, json={"text": text, **fields}
        )
        assert response.status_code in (200, 201), response.text
        return str(response.json()["id"])


@pytest.fixture
def api(live_server: str, settings: Settings) -> Api:
    return Api(live_server, settings, new_tenant())


async def sign_in(
    page: Page, base_url: str, tenant: str, user: str, *, admin: bool = False
) -> None:
    await page.goto(f"{base_url}/memory/")
    form = page.locator("#dev-mint")
    await form.get_by_label("Tenant").fill(tenant)
    await form.get_by_label("User").fill(user)
    if admin:
        await form.get_by_label("Admin").check()
    await form.get_by_role("button", name="Mint a dev token and sign in").click()
    await expect(page.locator("#whoami")).to_contain_text(user)


def accept_dialogs(page: Page) -> None:
    async def accept(dialog: Dialog) -> None:
        await dialog.accept()

    page.on("dialog", accept)


async def test_sign_in_with_a_dev_token_lists_memories_and_search_shows_scores(
    page: Page, api: Api, live_server: str, screenshots: Path
) -> None:
    api.remember("ada", "Ada drinks her coffee black, no sugar", category="preference")
    api.remember("ada", "Ada is learning to play the cello", category="hobby")
    api.remember("ada", "Met Grace at the conference in Lisbon", kind="episodic")
    api.remember("ada", "Ada might move to Porto next year", lifecycle="proposed")

    refused: list[str] = []
    page.on(
        "console",
        lambda message: (
            refused.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    await sign_in(page, live_server, api.tenant, "ada")
    cards = page.locator("#memory-list .memory")
    await expect(cards).to_have_count(4)
    await expect(page.get_by_role("button", name="Confirm")).to_have_count(1)
    await snap(page, screenshots, "memories")

    await page.get_by_label("Search memories").fill("coffee")
    await page.get_by_role("button", name="Search", exact=True).click()
    await expect(page.locator("#status")).to_contain_text("results")
    first = page.locator("#memory-list .memory").first
    await expect(first.locator(".memory-text")).to_have_text(
        "Ada drinks her coffee black, no sugar"
    )
    meters = first.get_by_role("meter")
    await expect(meters).to_have_count(6)
    for name in ("lexical", "vector", "fused", "recency", "confidence"):
        value = await first.get_by_role("meter", name=f"{name} score").get_attribute(
            "aria-valuenow"
        )
        assert value is not None
    lexical = await first.get_by_role("meter", name="lexical score").get_attribute("aria-valuenow")
    assert float(lexical or 0) > 0  # "coffee" is in the text: a full-text match
    # The bar is drawn: its width is set through the CSSOM, which the page's
    # Content-Security-Policy allows (a style attribute would be refused and draw nothing).
    bar = first.get_by_role("meter", name="lexical score").locator("span")
    assert await bar.evaluate("el => el.getBoundingClientRect().width") > 0
    await snap(page, screenshots, "search-scores")
    assert refused == []

    # A prior that counted is shown as its own meter: here the speaker the question names.
    api.remember("grace", "The tidal energy talk was the best one", speaker="Grace")
    await page.get_by_role("button", name="Sign out").click()
    await sign_in(page, live_server, api.tenant, "grace")
    await page.get_by_label("Search memories").fill("What did Grace think of the talks?")
    await page.get_by_role("button", name="Search", exact=True).click()
    hit = page.locator("#memory-list .memory").first
    await expect(hit.get_by_role("meter", name="speaker score")).to_have_count(1)
    assert await hit.get_by_role("meter", name="neighbours score").count() == 0
    await page.get_by_role("button", name="Sign out").click()
    await sign_in(page, live_server, api.tenant, "ada")

    await page.set_viewport_size(PHONE)
    await page.get_by_role("link", name="Memories").click()
    await expect(page.locator("#memory-list .memory")).to_have_count(4)
    await expect(page.get_by_role("meter")).to_have_count(0)  # the list again, not the hits
    await snap(page, screenshots, "memories-phone")


async def test_delete_one_memory_and_the_api_no_longer_has_it(
    page: Page, api: Api, live_server: str
) -> None:
    doomed = api.remember("ada", "Ada's locker code is the year Babbage was born")
    kept = api.remember("ada", "Ada prefers trains to planes")
    accept_dialogs(page)
    await sign_in(page, live_server, api.tenant, "ada")
    card = page.locator(f'[data-memory-id="{doomed}"]')
    await card.get_by_role("button", name="Delete memory").click()
    await expect(page.locator("#status")).to_have_text("Memory deleted.")
    await expect(card).to_have_count(0)
    assert api.call("GET", f"/v1/users/ada/memories/{doomed}", "ada").status_code == 404
    assert api.call("GET", f"/v1/users/ada/memories/{kept}", "ada").status_code == 200


async def test_a_memory_deleted_from_its_own_page_leaves_for_the_list(
    page: Page, api: Api, live_server: str
) -> None:
    doomed = api.remember("ada", "Ada's spare key is under the blue pot")
    kept = api.remember("ada", "Ada cycles to work")
    accept_dialogs(page)
    await sign_in(page, live_server, api.tenant, "ada")
    await (
        page.locator(f'[data-memory-id="{doomed}"]')
        .get_by_role("link", name="History and edit")
        .click()
    )
    await expect(page).to_have_url(re.compile(f"/memory/{doomed}$"))
    await (
        page.locator(f'[data-memory-id="{doomed}"]')
        .get_by_role("button", name="Delete memory")
        .click()
    )
    # Not the deleted memory's page drawn again ("Cannot show this page"): the list, without it.
    await expect(page.locator("#status")).to_have_text("Memory deleted.")
    await expect(page).to_have_url(re.compile("#/memories$"))
    await expect(page.locator(f'[data-memory-id="{kept}"]')).to_have_count(1)
    await expect(page.locator(f'[data-memory-id="{doomed}"]')).to_have_count(0)
    await expect(page.locator("#page-error")).to_have_count(0)
    assert api.call("GET", f"/v1/users/ada/memories/{doomed}", "ada").status_code == 404


async def test_delete_a_filtered_set_shows_the_count_first(
    page: Page, api: Api, live_server: str, screenshots: Path
) -> None:
    api.remember("ada", "Walked along the river on Sunday", kind="episodic")
    api.remember("ada", "Had ramen with Charles on Friday", kind="episodic")
    kept = api.remember("ada", "Ada's favourite colour is green")
    await sign_in(page, live_server, api.tenant, "ada")
    await page.get_by_label("Kind").select_option("episodic")
    await page.get_by_role("button", name="Delete matching…").click()
    await expect(page.locator("#delete-count")).to_have_text("2 memories match these filters.")
    await snap(page, screenshots, "delete-dry-run")
    # The count came from a dry run: nothing is gone yet.
    listed = api.call("GET", "/v1/users/ada/memories?kind=episodic", "ada").json()
    assert len(listed["items"]) == 2

    await page.get_by_role("button", name="Delete 2 memories").click()
    await expect(page.locator("#status")).to_have_text("Deleted 2 memories.")
    assert api.call("GET", "/v1/users/ada/memories?kind=episodic", "ada").json()["items"] == []
    assert api.call("GET", f"/v1/users/ada/memories/{kept}", "ada").status_code == 200


async def test_edit_confirm_and_history_timeline(
    page: Page, api: Api, live_server: str, screenshots: Path
) -> None:
    memory = api.remember("ada", "Ada lives in Londn", lifecycle="proposed")
    await sign_in(page, live_server, api.tenant, "ada")
    await page.locator(f'[data-memory-id="{memory}"]').get_by_role("button", name="Confirm").click()
    await expect(page.locator("#status")).to_have_text("Confirmed.")
    assert api.call("GET", f"/v1/users/ada/memories/{memory}", "ada").json()["lifecycle"] == (
        "confirmed"
    )

    await (
        page.locator(f'[data-memory-id="{memory}"]')
        .get_by_role("link", name="History and edit")
        .click()
    )
    await page.get_by_label("Text").fill("Ada lives in London")
    await page.get_by_role("button", name="Save text").click()
    await expect(page.locator("#status")).to_have_text("Saved.")
    timeline = page.get_by_role("list", name="History")
    await expect(timeline.get_by_label("after")).to_contain_text(["Ada lives in London"])
    await expect(timeline.get_by_label("before")).to_contain_text(["Ada lives in Londn"])
    await snap(page, screenshots, "memory-history")
    stored = api.call("GET", f"/v1/users/ada/memories/{memory}", "ada").json()
    assert stored["text"] == "Ada lives in London"


async def test_organization_memories_offer_only_what_the_caller_may_do(
    page: Page, api: Api, live_server: str
) -> None:
    def remember_for_the_org(text: str) -> str:
        response = api.call("POST", "/v1/org/memories", "root", admin=True, json={"text": text})
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    office = remember_for_the_org("Acme's office closes at 6pm on Fridays")
    parking = remember_for_the_org("Acme's parking is behind the office")
    own = api.remember("ada", "Ada leaves the office early on Fridays")
    accept_dialogs(page)

    # An end user reads the organization's memories and is offered nothing that would fail.
    await sign_in(page, live_server, api.tenant, "ada")
    await page.get_by_label("Search memories").fill("office Fridays")
    await page.get_by_role("button", name="Search", exact=True).click()
    shared = page.locator(f'[data-memory-id="{office}"]')
    await expect(shared).to_contain_text("only an admin can change or delete it")
    await expect(shared.get_by_role("button")).to_have_count(0)
    await expect(shared.get_by_role("link", name="History and edit")).to_have_count(0)
    mine = page.locator(f'[data-memory-id="{own}"]')
    await expect(mine.get_by_role("button", name="Delete memory")).to_have_count(1)
    await shared.get_by_role("link", name="History", exact=True).click()
    await expect(page.get_by_role("heading", name="Organization memory")).to_be_visible()
    await expect(page.get_by_role("list", name="History")).to_contain_text("add")
    await expect(page.locator("#edit-memory")).to_have_count(0)
    await expect(page.locator("#page-error")).to_have_count(0)
    await page.get_by_role("link", name="← Memories").click()
    await page.get_by_label("Scope").select_option("org")
    await expect(page.get_by_role("button", name="Delete matching…")).to_be_hidden()
    await expect(page.locator("#org-read-only")).to_be_visible()
    await page.get_by_role("button", name="Apply filters").click()
    await expect(page.locator("#memory-list .memory")).to_have_count(2)
    await page.get_by_role("button", name="Sign out").click()

    # An admin changes and deletes them through the organization's routes.
    await sign_in(page, live_server, api.tenant, "root", admin=True)
    await page.get_by_label("Search memories").fill("office Fridays")
    await page.get_by_role("button", name="Search", exact=True).click()
    shared = page.locator(f'[data-memory-id="{office}"]')
    await shared.get_by_role("link", name="History and edit").click()
    await page.get_by_label("Text").fill("Acme's office closes at 5pm on Fridays")
    await page.get_by_role("button", name="Save text").click()
    await expect(page.locator("#status")).to_have_text("Saved.")
    stored = api.call("GET", f"/v1/org/memories/{office}", "ada").json()
    assert stored["text"] == "Acme's office closes at 5pm on Fridays"
    await page.get_by_role("link", name="← Memories").click()
    await page.get_by_label("Scope").select_option("org")
    await page.get_by_role("button", name="Apply filters").click()
    listed = page.locator(f'#memory-list [data-memory-id="{office}"]')
    await listed.get_by_role("button", name="Delete memory").click()
    await expect(page.locator("#status")).to_have_text("Memory deleted.")
    assert api.call("GET", f"/v1/org/memories/{office}", "ada").status_code == 404

    await page.get_by_role("link", name="Memories").click()
    await page.get_by_label("Scope").select_option("org")
    await expect(page.locator("#org-read-only")).to_be_hidden()
    await page.get_by_role("button", name="Delete matching…").click()
    await expect(page.locator("#delete-count")).to_have_text(
        "1 organization memory matches (no filter: every organization memory)."
    )
    await page.get_by_role("button", name="Delete 1 organization memories").click()
    await expect(page.locator("#status")).to_have_text("Deleted 1 organization memories.")
    assert api.call("GET", f"/v1/org/memories/{parking}", "ada").status_code == 404
    assert api.call("GET", f"/v1/users/ada/memories/{own}", "ada").status_code == 200


async def test_profile_shows_sources_patches_and_explains_errors(
    page: Page, api: Api, live_server: str, screenshots: Path
) -> None:
    # A request carrying the identity provider's name claim records the account overlay.
    assert api.call("GET", "/v1/users/me", "ada", claims={"name": "Ada Lovelace"}).is_success
    await sign_in(page, live_server, api.tenant, "ada")
    await page.get_by_role("link", name="Profile").click()
    name_row = page.locator('#profile-table tr[data-key="name"]')
    await expect(name_row).to_contain_text("identity provider")
    await expect(name_row.get_by_role("button", name="Save")).to_have_count(0)

    await page.get_by_label("Field").fill("city")
    await page.get_by_label("Value (JSON or text)").fill("Lisbon")
    await page.get_by_role("button", name="Add field").click()
    await expect(page.locator("#status")).to_have_text("Profile saved.")
    city_row = page.locator('#profile-table tr[data-key="city"]')
    await expect(city_row).to_contain_text("you / memory")
    profile = api.call("GET", "/v1/users/ada/profile", "ada").json()
    assert profile["profile"]["city"] == "Lisbon"
    assert profile["sources"]["city"] == "memory"
    await snap(page, screenshots, "profile")

    # Too large for the profile: the API refuses, and the page says why in the API's words.
    huge = "x" * 9000
    await page.get_by_label("Field").fill("notes")
    await page.get_by_label("Value (JSON or text)").fill(huge)
    await page.get_by_role("button", name="Add field").click()
    refused = api.call(
        "PATCH",
        "/v1/users/ada/profile",
        "ada",
        json=[{"op": "add", "path": "/notes", "value": huge}],
    )
    assert refused.status_code >= 400
    await expect(page.locator("#alert")).to_have_text(refused.json()["detail"])
    assert "notes" not in api.call("GET", "/v1/users/ada/profile", "ada").json()["profile"]

    # A field name the profile cannot hold: a 422, whose `detail` only counts the refused
    # inputs; the page says what each one was refused for.
    await page.get_by_label("Field").fill("my field")
    await page.get_by_label("Value (JSON or text)").fill("x")
    await page.get_by_role("button", name="Add field").click()
    invalid = api.call(
        "PATCH",
        "/v1/users/ada/profile",
        "ada",
        json=[{"op": "add", "path": "/my field", "value": "x"}],
    ).json()
    assert invalid["code"] == "VALIDATION_FAILED"
    await expect(page.locator("#alert")).to_contain_text("String should match pattern")
    await expect(page.locator("#alert")).not_to_contain_text("see `errors`")


async def test_threads_show_labelled_messages(
    page: Page, api: Api, live_server: str, screenshots: Path
) -> None:
    thread = api.call("POST", "/v1/users/ada/threads", "ada", json={"title": "Trip planning"})
    assert thread.status_code in (200, 201), thread.text
    thread_id = thread.json()["id"]
    appended = api.call(
        "POST",
        f"/v1/users/ada/threads/{thread_id}/messages",
        "ada",
        json={
            "messages": [
                {"role": "user", "content": "I want to visit Porto in May."},
                {"role": "assistant", "content": "Porto in May is lovely."},
                {"role": "user", "content": "Book trains, not planes."},
            ]
        },
    )
    assert appended.status_code in (200, 201), appended.text
    await sign_in(page, live_server, api.tenant, "ada")
    await page.get_by_role("link", name="Threads").click()
    await page.get_by_role("link", name="Trip planning").click()
    messages = page.locator("#messages .card")
    await expect(messages).to_have_count(3)
    await expect(messages.nth(0).locator(".badge")).to_have_text("#1")
    await expect(messages.nth(2).locator(".badge")).to_have_text("#2")
    await snap(page, screenshots, "thread")


async def test_admin_purges_a_user_and_sees_the_verification(
    page: Page, api: Api, live_server: str, screenshots: Path
) -> None:
    api.remember("bob", "Bob keeps bees")
    api.remember("bob", "Bob visited Oslo", kind="episodic")
    api.remember("carol", "Carol writes Haskell")
    thread = api.call("POST", "/v1/users/bob/threads", "bob", json={"title": "Bees"}).json()
    api.call(
        "POST",
        f"/v1/users/bob/threads/{thread['id']}/messages",
        "bob",
        json={"messages": [{"role": "user", "content": "My hive swarmed."}]},
    )
    await sign_in(page, live_server, api.tenant, "root", admin=True)
    await page.get_by_role("link", name="Admin").click()
    bob_row = page.locator('#users tr[data-user="bob"]')
    await expect(bob_row).to_contain_text("1/1/0")
    await expect(page.get_by_role("heading", name="Jobs")).to_be_visible()
    await expect(page.get_by_role("heading", name="Audit trail")).to_be_visible()
    await snap(page, screenshots, "admin-users")

    await bob_row.get_by_role("link", name="bob").click()
    await page.get_by_role("button", name="Purge…").click()
    preview = page.locator("#purge-preview")
    await expect(preview).to_contain_text("1 semantic, 1 episodic and 0 procedural memories")
    await expect(preview).to_contain_text("1 threads with 1 messages")
    await page.get_by_role("button", name="Purge bob for good").click()
    report = page.locator("#purge-report")
    await expect(report).to_contain_text("Purged and verified: nothing remains.")
    await expect(report.locator('tr[data-table="memory"]').first).to_contain_text("2")
    remaining = report.locator("table").nth(1)
    for cell in await remaining.locator("td").all_text_contents():
        assert cell == "0"
    await snap(page, screenshots, "admin-purge")

    assert api.call("GET", "/v1/admin/users/bob", "root", admin=True).status_code == 404
    assert api.call("GET", "/v1/admin/users/carol", "root", admin=True).status_code == 200
    await page.get_by_role("link", name="← Users").click()
    await expect(page.locator('#users tr[data-user="bob"]')).to_have_count(0)
    await expect(page.locator("#audit")).to_contain_text("admin.user_purge")


async def test_a_user_cannot_open_another_users_data(
    page: Page, api: Api, live_server: str
) -> None:
    api.remember("bob", "Bob's bank is the one on the corner")
    api.remember("ada", "Ada likes tea")
    await sign_in(page, live_server, api.tenant, "ada")
    for route in ("#/u/bob/memories", "#/u/bob/profile", "#/u/bob/threads", "#/admin"):
        await page.goto(f"{live_server}/memory/{route}")
        refusal = page.locator(f'#page-error[data-route="{route}"]')
        await expect(refusal).to_be_visible()
        assert (await refusal.text_content() or "").strip()
        await expect(page.locator("main")).not_to_contain_text("Bob's bank")
    await expect(page.get_by_role("link", name="Admin")).to_be_hidden()
    await page.goto(f"{live_server}/memory/#/admin/users/bob")
    await expect(page.locator('#page-error[data-route="#/admin/users/bob"]')).to_be_visible()
    refused = api.call("GET", "/v1/users/bob/memories", "ada")
    assert refused.status_code in (403, 404)
    # Her own data is still there.
    await page.goto(f"{live_server}/memory/#/memories")
    await expect(page.locator("#memory-list .memory")).to_have_count(1)


async def test_download_my_data_saves_the_export(page: Page, api: Api, live_server: str) -> None:
    api.remember("ada", "Ada collects fountain pens")
    await sign_in(page, live_server, api.tenant, "ada")
    async with page.expect_download() as started:
        await page.get_by_role("button", name="Download my data").click()
    download = await started.value
    assert download.suggested_filename == "mneme-me.ndjson"
    path = await download.path()
    text = await asyncio.to_thread(Path(path).read_text)
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["type"] == "header"
    assert lines[0]["user_id"] == "ada"
    memories = [line["data"]["text"] for line in lines if line["type"] == "memory"]
    assert memories == ["Ada collects fountain pens"]
