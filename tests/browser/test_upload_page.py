"""The upload view in chromium: only a key with the ingest role sees it; files go up with the caller's groups,
each row follows its document to a final state, refusals are a sentence, and hostile file names stay text."""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import STAFF_KEY, UPLOADER_KEY, Recorded, Service, open_page
from tests.support.oidc_idp import IDP_WARNINGS

pytestmark = IDP_WARNINGS
HOSTILE_NAME = "<img src=x onerror=window.__pwned=1>.txt"  # no quotes: browsers send those as %22


def _sign_in(page: Page, key: str) -> None:
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_label("Question")).to_be_visible()


def test_a_query_key_is_not_offered_the_upload_view(tab: Recorded) -> None:
    _sign_in(tab.page, STAFF_KEY)
    expect(tab.page.get_by_role("button", name="Documents", exact=True)).to_be_visible()
    expect(tab.page.get_by_role("button", name="Upload", exact=True)).to_be_hidden()


def test_upload_and_follow_each_document_to_its_state(tab: Recorded, service: Service) -> None:
    page = tab.page
    _sign_in(page, UPLOADER_KEY)
    page.get_by_role("button", name="Upload", exact=True).click()
    expect(page.get_by_label("Groups that may read them (comma-separated, no spaces)")).to_have_value("staff")
    page.get_by_label("Files (text, Markdown, HTML, PDF, DOCX)").set_input_files(
        [
            {"name": "shuttle.txt", "mimeType": "text/plain", "buffer": b"The staff shuttle leaves at eight.\n"},
            {"name": HOSTILE_NAME, "mimeType": "text/plain", "buffer": b"A note with a hostile file name.\n"},
            {"name": "photo.bin", "mimeType": "application/octet-stream", "buffer": bytes(range(256)) * 4},
        ]
    )
    page.get_by_role("button", name="Upload", exact=True).last.click()
    rows = page.locator("#upload-rows tr")
    expect(rows).to_have_count(3)
    expect(page.get_by_role("status")).to_contain_text("Upload finished", timeout=60_000)
    expect(rows.nth(0)).to_contain_text("indexed")
    expect(rows.nth(1)).to_contain_text(HOSTILE_NAME)  # the name as text, not markup
    expect(rows.nth(2)).to_contain_text("skipped")
    assert page.locator("#upload-rows img").count() == 0
    page.wait_for_timeout(300)  # an onerror would have fired by now
    # What was uploaded is answerable at once.
    page.get_by_role("button", name="Documents", exact=True).click()
    expect(page.locator("#docs-rows")).to_contain_text("shuttle.txt")


@pytest.mark.parametrize(("groups", "says"), [("security", "not one you may grant"), ("staff, hr", "group 2")])
def test_a_refused_upload_is_one_sentence(tab: Recorded, groups: str, says: str) -> None:
    page = tab.page
    _sign_in(page, UPLOADER_KEY)
    page.get_by_role("button", name="Upload", exact=True).click()
    page.get_by_label("Groups that may read them (comma-separated, no spaces)").fill(groups)
    page.get_by_label("Files (text, Markdown, HTML, PDF, DOCX)").set_input_files(
        [{"name": "refused.txt", "mimeType": "text/plain", "buffer": b"Refused.\n"}]
    )
    page.get_by_role("button", name="Upload", exact=True).last.click()
    expect(page.get_by_role("status")).to_contain_text("The upload was refused")
    expect(page.get_by_role("status")).to_contain_text(says)
    expect(page.locator("#upload-rows tr")).to_have_count(0)


def test_axe_finds_no_serious_violation_on_the_upload_view(browser: Browser, service: Service) -> None:
    tab = open_page(browser, service, bypass_csp=True)  # axe's own script
    try:
        page = tab.page
        _sign_in(page, UPLOADER_KEY)
        page.get_by_role("button", name="Upload", exact=True).click()
        page.get_by_label("Files (text, Markdown, HTML, PDF, DOCX)").set_input_files(
            [{"name": "axe.txt", "mimeType": "text/plain", "buffer": b"Checked by axe.\n"}]
        )
        page.get_by_role("button", name="Upload", exact=True).last.click()
        expect(page.get_by_role("status")).to_contain_text("Upload finished", timeout=60_000)
        found = {}
        for media in ("dark", "light"):
            page.emulate_media(color_scheme=media)
            result = Axe().run(page)
            found[media] = [v["id"] for v in result.response["violations"] if v["impact"] in ("serious", "critical")]
        assert found == {"dark": [], "light": []}
    finally:
        tab.context.close()
