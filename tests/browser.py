"""The app launched here and opened in headless Chromium, for the browser tests (tests/test_browser*.py).

Needs Debian's ``chromium`` (``apt-get install chromium``, or ``HSD_CHROMIUM``) and ``pip install playwright``
(never ``playwright install``); a test that asks for it is skipped without them.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("HSD_CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-sync"]
WAIT = 240_000


@contextmanager
def app_page(width: int = 1400, height: int = 1000):
    """A fresh app (``app.build()``) on a local port, and a Chromium page open on it."""
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}")
    import app

    demo = app.build()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, **app.launch_options())  # as app.py
    try:
        with playwright.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
            page = browser.new_page(viewport={"width": width, "height": height})
            page.set_default_timeout(WAIT)
            page.goto(url)
            yield page
            browser.close()
    finally:
        demo.close()


def unfold_settings(page) -> None:
    """Open the decoding settings (they start folded; Gradio draws an accordion's boxes when it first opens)."""
    button = page.locator("#hsd-settings button.label-wrap")
    if "open" not in (button.get_attribute("class") or "").split():
        button.click()
    page.wait_for_selector("#hsd-temperature input", state="visible")


def fill(page, elem_id: str, value) -> None:
    """Type ``value`` into the box ``elem_id`` and leave it; a box in the folded decoding settings unfolds them."""
    box = page.locator(f"#{elem_id} input").first
    if not box.is_visible():
        unfold_settings(page)
        box.wait_for(state="visible")
    box.fill(str(value))
    box.blur()
