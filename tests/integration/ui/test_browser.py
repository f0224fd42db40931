"""The memory browser in headless Chromium against the real API on the embedded stack:
log in, see a session's segments, open one, ask and see the evidence highlighted, forget a
range after confirming and see it gone; another user's key sees none of it; a bad key gets
a clear error."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import httpx
import pytest

from tests.fixtures.browser_login import SESSION_COOKIE, ui_login
from tests.fixtures.wearers import DAY, seed_segment, seed_wearer

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium (`make setup` installs it; `playwright install` cannot download).
    Playwright gives each launch a fresh profile dir; each test opens its own context."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: run `make setup` (apt chromium)"
    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


def _login(page, url: str, key: str) -> None:
    page.goto(f"{url}/ui/")
    assert page.url.endswith("/ui/login")  # no session yet: the login form
    page.fill("#key", key)
    page.click("button[type=submit]")


def test_browse_ask_and_forget(served, browser):
    alice = seed_wearer(served.deps, "ui-alice")
    context = browser.new_context()
    page = context.new_page()
    _login(page, served.url, alice.key)

    # the latest day with memory opens, the session's four 30 s segments in the 30 s lane
    page.wait_for_selector("#day")
    assert page.inner_text("#day").startswith(DAY.date().isoformat())
    lane = page.locator("#lane-30 .seg")
    assert lane.count() == 4
    assert "blue bowl" in page.inner_text("#lane-30")
    assert page.locator("#lane-180 .seg").count() == 1
    assert alice.key not in page.url
    cookie = next(c for c in context.cookies() if c["name"] == SESSION_COOKIE)
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/ui"
    # an opaque session id, never the key; not Secure only because this is http on loopback
    assert alice.key not in {c["value"] for c in context.cookies()}
    assert not cookie["secure"]

    # a segment's detail: caption, triples, its parent, its frame
    page.click(f"#seg-{alice.segments[0]}")
    detail = page.locator("#detail .segment")
    detail.wait_for()
    text = detail.inner_text()
    assert "car keys" in text and "blue bowl" in text and "parent: 3 min" in text
    frame = page.locator("#detail .frames img")
    assert frame.count() == 1
    frame.scroll_into_view_if_needed()
    page.wait_for_function(
        "() => document.querySelector('#detail .frames img').complete", timeout=10_000
    )
    assert frame.evaluate("img => img.naturalWidth") == 64  # the stored JPEG, decoded

    # ask: the answer, and its evidence marked on the timeline
    page.fill("#question", "Where did I put my car keys?")
    page.click("#ask button")
    page.wait_for_selector("#answer .answer")
    evidence = page.get_attribute("#answer .answer", "data-evidence")
    ids = {int(i) for i in evidence.split(",") if i}
    assert alice.segments[0] in ids
    marked = {
        int(i)
        for i in page.locator(".seg.evidence").evaluate_all("els => els.map(e => e.dataset.id)")
    }
    assert alice.segments[0] in marked and marked <= ids

    # forget the second 30 s window: confirm first, then it is gone from the lanes at once
    page.click(".forget summary")
    second = DAY.replace(second=30).strftime("%Y-%m-%dT%H:%M:%S")
    end = DAY.replace(second=59).strftime("%Y-%m-%dT%H:%M:%S")
    page.fill("#forget-start", second)
    page.fill("#forget-end", end)
    page.click("#forget button")
    page.wait_for_selector("#forget-count")
    assert page.inner_text("#forget-count") == "2"  # the 30 s window and its 3 min parent
    assert page.locator(f"#seg-{alice.segments[1]}").count() == 1  # nothing gone yet
    page.click("#forget-yes button")
    page.wait_for_selector("#forget-done")
    page.wait_for_function(f"() => !document.querySelector('#seg-{alice.segments[1]}')")
    assert page.locator("#lane-30 .seg").count() == 3
    assert "Maria called" not in page.inner_text("#lane-30")
    context.close()

    # and through the API too: the window is gone for good
    r = httpx.get(
        f"{served.url}/v1/users/{alice.user_id}/segments/{alice.segments[1]}",
        headers={"Authorization": f"Bearer {alice.key}"},
    )
    assert r.status_code == 404


def test_another_users_key_sees_nothing_and_a_bad_key_is_refused(served, browser):
    alice = seed_wearer(served.deps, "ui-owner")
    bob = seed_wearer(
        served.deps,
        "ui-other",
        scenes=[("Bob fed the cat in the garden.", [("Bob", "fed", "cat")])],
        start=DAY.replace(day=18),
    )
    context = browser.new_context()
    page = context.new_page()

    _login(page, served.url, "wmm_not-a-key")
    assert page.inner_text("#login-error") == "Invalid API key."
    assert page.url.endswith("/ui/login")
    assert not [c for c in context.cookies() if c["name"] == SESSION_COOKIE]

    page.fill("#key", bob.key)
    page.click("button[type=submit]")
    page.wait_for_selector("#day")
    assert page.inner_text("#who") == bob.user_id
    assert "fed the cat" in page.inner_text(".timeline")

    # alice's day is empty for bob, and her segment, thumbnail and frame are not his to see
    page.goto(f"{served.url}/ui/?day={DAY.date().isoformat()}")
    assert page.locator(".seg").count() == 0
    assert "blue bowl" not in page.content()
    for path, code in (
        (f"/ui/segments/{alice.segments[0]}", 404),
        (f"/ui/thumb/{alice.segments[0]}", 204),
        (f"/ui/frames/{alice.frame_key}", 404),
    ):
        assert page.request.get(served.url + path).status == code, path
    facts = page.goto(f"{served.url}/ui/facts")
    assert facts.status == 200 and "car keys" not in page.content()

    # the admin key logs nobody in: the browser shows one wearer
    context.clear_cookies()
    _login(page, served.url, served.settings.admin_api_key.get_secret_value())
    assert re.search("log in with that user's key", page.inner_text("#login-error"))
    context.close()


def test_writes_need_the_ui_header(served):
    """A form posted from another site carries the cookie (not with SameSite=Strict, but
    older browsers) yet cannot add X-WorldMM-UI: refused."""
    alice = seed_wearer(served.deps, "ui-csrf")
    with httpx.Client(base_url=served.url) as http:
        login = ui_login(http, alice.key)
        assert login.status_code == 303
        r = http.post(
            "/ui/forget",
            data={"start": "2026-11-20T10:00", "end": "2026-11-21T00:00", "confirm": "yes"},
        )
        assert r.status_code == 403 and "X-WorldMM-UI" in r.text
        assert http.get(f"/ui/segments/{alice.segments[0]}").status_code == 200


def test_a_day_reads_only_its_own_range_a_page_at_a_time(served):
    """121 windows of 30 s on one day, one the day before: the day shows a page of 120 and a
    'more' link; the next page holds the last one; the other day's segment is never shown."""
    from query_api.ui.views import LANE_PAGE
    from worldmm.store.users import create_user

    user_id = f"ui-week-{DAY:%H%M%S}-{id(served) % 10_000}"
    with served.deps.db.transaction() as conn:
        key = create_user(conn, user_id)
    starts = [DAY + timedelta(seconds=30 * i) for i in range(LANE_PAGE + 1)]
    starts.append(DAY - timedelta(days=1))
    for t in starts:
        seed_segment(served.deps, user_id, t, f"window at {t:%Y-%m-%d %H:%M:%S}")
    with httpx.Client(base_url=served.url) as http:
        assert ui_login(http, key).status_code == 303
        page = http.get("/ui/", params={"day": DAY.date().isoformat()}).text
        assert page.count('class="seg s30') == LANE_PAGE
        assert "window at 2026-11-19" not in page  # the day before is not read
        more = re.search(r'data-get="(/ui/lane\?[^"]+)"', page)
        assert more, "no 'more' link"
        rest = http.get(more.group(1).replace("&amp;", "&"), headers={"X-WorldMM-UI": "1"})
        assert rest.status_code == 200
        assert rest.text.count('class="seg s30') == 1
        assert f"window at {starts[LANE_PAGE]:%Y-%m-%d %H:%M:%S}" in rest.text
        assert 'data-get="/ui/lane' not in rest.text  # the last page


def test_facts_page_shows_each_fact_with_its_history_and_evidence(served):
    """A fact replaced by a newer one: the chain shows the current version and the
    superseded one, each with the segments it rests on."""
    import numpy as np

    from worldmm.store import entities as entity_store
    from worldmm.store import triples as triple_store
    from worldmm.store.models import TripleWrite

    w = seed_wearer(served.deps, "ui-facts")
    dim = served.settings.text_embed_dim
    with served.deps.db.transaction() as conn:
        anna = entity_store.insert_canonical_entity(conn, w.user_id, "Anna", np.ones(dim)).id

        def fact(segment: int, city: str, days: int) -> int:
            row = TripleWrite(
                subject_entity_id=anna,
                predicate="lives in",
                object_literal=city,
                embedding=np.ones(dim),
                valid_from=DAY + timedelta(days=days),
            )
            return triple_store.insert_triples(conn, w.user_id, segment, "semantic", [row])[0]

        old = fact(w.segments[0], "Porto", 0)
        new = fact(w.segments[3], "Lisbon", 1)
        triple_store.invalidate_triples(conn, w.user_id, [old], DAY + timedelta(days=1), new)
    with httpx.Client(base_url=served.url) as http:
        assert ui_login(http, w.key).status_code == 303
        page = http.get("/ui/facts")
    assert page.status_code == 200
    chain = re.search(r'<li class="fact">(.*?)</li>', page.text, re.S)
    assert chain, page.text[:2000]
    body = chain.group(1)
    assert body.index("Lisbon") < body.index("Porto")  # the current version first
    assert re.search(r'class="version current">\s*<span>Anna <i>lives in</i> Lisbon', body)
    assert re.search(r'class="version superseded">\s*<span>Anna <i>lives in</i> Porto', body)
    assert f"/ui/segments/{w.segments[3]}" in body and f"/ui/segments/{w.segments[0]}" in body


def test_a_segment_shows_its_importance_and_recalls(served):
    from worldmm.store.importance_recall import reinforce

    w = seed_wearer(served.deps, "ui-weight")
    with served.deps.db.transaction() as conn:
        conn.execute(
            "UPDATE segments SET importance = 0.8, importance_source = 'estimate'"
            " WHERE user_id = %s AND id = %s",
            (w.user_id, w.segments[0]),
        )
        reinforce(conn, w.user_id, {w.segments[0]: 2}, {}, DAY + timedelta(days=1))
    with httpx.Client(base_url=served.url) as http:
        assert ui_login(http, w.key).status_code == 303
        detail = http.get(f"/ui/segments/{w.segments[0]}").text
        other = http.get(f"/ui/segments/{w.segments[1]}").text
        day = http.get("/ui/", params={"day": DAY.date().isoformat()}).text
    assert "importance 0.80 (estimate)" in detail
    assert "recalled 2×, last 2026-11-21 10:00:00" in detail  # on the wearer's clock (UTC)
    assert "importance not estimated" in other and "recalled 0×" in other
    assert re.search(rf'id="seg-{w.segments[0]}".*?class="weight"[^>]*>0\.80<', day, re.S)


def test_a_tokyo_wearers_day_runs_from_their_midnight(served, browser):
    """A wearer in Asia/Tokyo (UTC+9): the day view holds their 00:00-24:00, labelled in their
    zone, its clock times on their clock; UTC's day would cut it nine hours earlier."""
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from worldmm.store.users import update_profile

    tokyo = ZoneInfo("Asia/Tokyo")
    w = seed_wearer(
        served.deps, "ui-tokyo", scenes=[("I made miso soup for breakfast.", [])],
        start=datetime(2026, 11, 20, 0, 10, tzinfo=tokyo).astimezone(UTC),  # 19 Nov in UTC
    )  # fmt: skip
    with served.deps.db.transaction() as conn:
        update_profile(conn, w.user_id, {"timezone": "Asia/Tokyo"})
    late = seed_segment(  # 23:50 on the 20th in Tokyo (14:50 UTC)
        served.deps, w.user_id, datetime(2026, 11, 20, 23, 50, tzinfo=tokyo).astimezone(UTC),
        "I set the alarm clock before bed.",
    )  # fmt: skip
    after = seed_segment(  # 00:20 on the 21st in Tokyo (15:20 UTC on the 20th)
        served.deps, w.user_id, datetime(2026, 11, 21, 0, 20, tzinfo=tokyo).astimezone(UTC),
        "I could not sleep and read a novel.",
    )  # fmt: skip
    context = browser.new_context()
    page = context.new_page()
    _login(page, served.url, w.key)
    page.wait_for_selector("#day")
    page.goto(f"{served.url}/ui/?day=2026-11-20")
    assert page.inner_text("#day") == "2026-11-20 (Asia/Tokyo)"
    shown = {
        int(i)
        for i in page.locator("#lane-30 .seg").evaluate_all("els => els.map(e => e.dataset.id)")
    }
    assert {w.segments[0], late} <= shown and after not in shown
    assert page.inner_text(f"#seg-{w.segments[0]} .time") == "00:10:00"  # the wearer's clock
    assert page.inner_text(f"#seg-{late} .time") == "23:50:00"
    page.goto(f"{served.url}/ui/?day=2026-11-21")
    assert page.locator(f"#seg-{after}").count() == 1
    assert page.locator(f"#seg-{late}").count() == 0
    context.close()


def test_a_frame_past_retention_shows_a_placeholder(served):
    """The API answers 410 for a frame past the wearer's media retention; the browser gets
    a placeholder image in its place (the card's thumbnail and the frame view alike)."""
    from worldmm.store.users import update_profile

    alice = seed_wearer(served.deps, "ui-expired")
    with served.deps.db.transaction() as conn:
        update_profile(conn, alice.user_id, {"retention_days": 1})  # the seeded day is older
    with httpx.Client(base_url=served.url) as http:
        api = http.get(
            f"/v1/users/{alice.user_id}/frames/{alice.frame_key}",
            headers={"Authorization": f"Bearer {alice.key}"},
        )
        assert api.status_code == 410 and "retention" in api.json()["detail"]
        assert ui_login(http, alice.key).status_code == 303
        for path in (f"/ui/frames/{alice.frame_key}", f"/ui/thumb/{alice.segments[0]}"):
            r = http.get(path)
            assert r.status_code == 200, path
            assert r.headers["content-type"].startswith("image/svg+xml")
            assert (
                r.headers["x-worldmm-media"] == "expired" and b"past media retention" in r.content
            )


def test_a_forwarded_https_from_an_untrusted_peer_is_not_believed(served):
    """This module's API trusts no proxy: a client claiming X-Forwarded-Proto gets the
    loopback cookie (no Secure), as any other plain-http client of loopback."""
    w = seed_wearer(served.deps, "ui-untrusted")
    with httpx.Client(base_url=served.url) as http:
        r = ui_login(http, w.key, **{"X-Forwarded-Proto": "https"})
        assert r.status_code == 303
        cookie = next(
            v for k, v in r.headers.multi_items() if k == "set-cookie" and SESSION_COOKIE in v
        )
        assert "secure" not in cookie.lower()
