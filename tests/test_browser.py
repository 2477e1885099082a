"""The app in headless Chromium, as a user walks it: load, each example, a run per applicable algorithm, Stop
mid-run, an error after a success, Compare, Check pair, Advise; the page must be coherent after each
(status, output and plot agree; no algorithm offered that the check rejects).

Slow (a few minutes on 2 CPUs): ``python -m pytest -m slow tests/test_browser.py``. Needs Debian's
``chromium`` (``apt-get install chromium``) and ``pip install playwright`` (never ``playwright install``);
skipped without them. Screenshots go to ``$HSD_SCREENSHOTS`` (default: the test's temporary folder).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from browser import app_page, fill

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def page():
    with app_page() as pg:
        yield pg


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    out = Path(os.environ.get("HSD_SCREENSHOTS") or tmp_path_factory.mktemp("screenshots"))
    out.mkdir(parents=True, exist_ok=True)
    return out


def _status(page) -> str:
    return page.locator("#hsd-status").inner_text()


def _offered(page) -> list[str]:
    return [v for v in page.locator("#hsd-algorithm input[type=radio]").evaluate_all("els => els.map(e => e.value)")]


def _rejected(page) -> set[str]:
    return set(re.findall(r"not available\s*(\w+)", page.locator("#hsd-availability").inner_text()))


def _assert_offers_only_what_the_check_accepts(page, settle_s: float = 30):
    for _ in range(int(settle_s * 4)):  # the check after an example or preset follows its filling the form
        if not set(_offered(page)) & _rejected(page):
            break
        page.wait_for_timeout(250)
    offered = _offered(page)
    assert offered and not set(offered) & _rejected(page), (offered, _rejected(page))
    checked = page.locator("#hsd-algorithm input[type=radio]:checked")
    assert checked.count() == 1 and checked.get_attribute("value") in offered


def _set(page, elem_id: str, value) -> None:
    fill(page, elem_id, value)


def _wait_done(page, prefixes=("done", "error"), elem_id: str = "hsd-status"):
    """Wait until the status line ``elem_id`` starts with one of ``prefixes``; return its text."""
    page.wait_for_function("([id, ps]) => { const t = document.getElementById(id)?.innerText || '';"
                           " return ps.some(p => t.trim().startsWith(p)); }", arg=[elem_id, list(prefixes)])
    return page.locator(f"#{elem_id}").inner_text().strip()


def _plot_title(page, elem_id: str, wait: bool = False) -> str:
    if wait:  # plotly draws after the status arrives
        page.wait_for_selector(f"#{elem_id} .gtitle", timeout=30_000)
    title = page.locator(f"#{elem_id} .gtitle")
    return title.first.text_content() if title.count() else ""


def _select(page, algorithm: str) -> None:
    page.locator(f"#hsd-algorithm input[value='{algorithm}']").check()


def test_walk_the_app_and_stay_coherent(page, shots):
    import app

    page.wait_for_selector("#hsd-availability:has-text('runs')")  # opening the page checks the default pair
    _assert_offers_only_what_the_check_accepts(page)
    page.screenshot(path=str(shots / "01-load.png"))

    for i, (label, preset, *_rest) in enumerate(app.EXAMPLES):
        page.get_by_text(label).first.click()
        if preset in (app.EMBEDDED, app.BYTES, app.SHARED, app.SAMPLING):
            page.wait_for_function("(a) => document.querySelector('#hsd-algorithm input:checked')?.value === a",
                                   arg=_rest[1])
            page.wait_for_selector("#hsd-availability:has-text('runs')")
            _assert_offers_only_what_the_check_accepts(page)
            assert page.locator("#hsd-algorithm input[type=radio]:checked").get_attribute("value") == _rest[1]
        else:  # a Hub pair nothing has loaded: not checked, every algorithm offered until Check pair
            page.wait_for_selector("#hsd-availability:has-text('Not checked yet')")
        page.screenshot(path=str(shots / f"02-example-{i}.png"))

    page.get_by_text(app.EXAMPLES[0][0]).first.click()  # back to the embedded pair
    page.wait_for_selector("#hsd-availability:has-text('runs')")
    _set(page, "hsd-max-new-tokens", 24)
    for algorithm in _offered(page):
        _select(page, algorithm)
        page.get_by_role("button", name="Run", exact=True).click()
        status = _wait_done(page)
        assert status.startswith(f"done {algorithm.upper()} wrote"), status
        assert page.locator("#hsd-output .hsd-tok").count() > 0
        assert _plot_title(page, "hsd-rounds-plot", wait=True).startswith(f"{algorithm}:")
        page.screenshot(path=str(shots / f"03-run-{algorithm}.png"))

    _select(page, "slem")
    _set(page, "hsd-max-new-tokens", 900)
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_selector("#hsd-status:has-text('Stop keeps what is shown')")
    page.get_by_role("button", name="Stop", exact=True).click()
    page.wait_for_selector("#hsd-status .hsd-mark-stopped")
    page.wait_for_timeout(1500)  # nothing of the cancelled run comes back after Stop
    assert _status(page).startswith("stopped The output shows what was generated before the stop"), _status(page)
    assert _plot_title(page, "hsd-rounds-plot") == ""
    page.screenshot(path=str(shots / "04-stopped.png"))

    _set(page, "hsd-max-new-tokens", 24)
    page.get_by_role("button", name="Run", exact=True).click()
    assert _wait_done(page).startswith("done")
    _set(page, "hsd-temperature", -1)
    page.get_by_role("button", name="Run", exact=True).click()
    status = _wait_done(page, ("error",))
    assert "temperature must be in 0..2" in status
    assert page.locator("#hsd-output .hsd-tok").count() == 0 and _plot_title(page, "hsd-rounds-plot") == ""
    page.screenshot(path=str(shots / "05-error-after-success.png"))
    _set(page, "hsd-temperature", 0)

    page.get_by_role("button", name="Compare all algorithms").click()
    page.get_by_role("tab", name="Compare").click()
    status = _wait_done(page)
    assert status.startswith("done Compared") and "interleaved repeats" in status
    title = _plot_title(page, "hsd-speedup", wait=True)
    assert "median of" in title or "too noisy" in title or "machine was busy" in title
    if "machine was busy" in title:  # the load, then the spread: the plot names the first reason, the status both
        assert "The machine was busy" in status
    else:
        assert ("too noisy" in title) == ("Too noisy" in status)
    page.screenshot(path=str(shots / "06-compare.png"), full_page=True)

    page.get_by_role("button", name="Check pair").click()
    page.get_by_role("tab", name="Pair check").click()
    page.wait_for_selector("#hsd-availability:has-text('slrs')")
    _assert_offers_only_what_the_check_accepts(page)
    page.get_by_role("button", name=re.compile("^Advise")).click()
    page.wait_for_selector("#hsd-advice:has-text('working Advise')")
    page.wait_for_selector("#hsd-advice:has-text('calibrated at')")
    advice = page.locator("#hsd-advice").inner_text()
    assert "slrs" in advice and "k=12" not in advice
    page.screenshot(path=str(shots / "07-advise.png"), full_page=True)

    page.get_by_role("tab", name="Drafters").click()
    _set(page, "hsd-drafters-prompts", 1)
    page.get_by_role("button", name="Compare drafters").click()
    n = len(app.lab.drafter_lines(app.lab.default_drafters()))  # the embedded target's drafters
    assert _wait_done(page, ("done Compared", "error"), "hsd-drafters-status").startswith(f"done Compared {n} drafter(s)")
    assert _plot_title(page, "hsd-drafters-plot", wait=True).startswith("Drafters for")
    page.screenshot(path=str(shots / "08-drafters.png"), full_page=True)
    page.get_by_role("tab", name="Pair check").click()
    page.get_by_role("button", name=re.compile("^Production")).click()
    page.wait_for_selector("#hsd-production:has-text('vLLM')")


def test_teaching_views_picture_lossless_check_download_and_reload(page, shots, tmp_path):
    """Record a run and open a position's picture; run the losslessness check; download the run and show a saved
    one again without models."""
    import app
    import hsd
    from hsd import share

    page.get_by_text(app.EXAMPLES[0][0]).first.click()
    page.wait_for_selector("#hsd-availability:has-text('runs')")
    _select(page, "tli")
    _set(page, "hsd-temperature", 1)
    _set(page, "hsd-max-new-tokens", 24)
    page.get_by_label("record distributions (for the position picture)").check()
    page.get_by_role("button", name="Run", exact=True).click()
    assert _wait_done(page).startswith("done")
    page.get_by_role("tab", name="Rounds").click()
    assert _plot_title(page, "hsd-picture", wait=True)
    assert page.locator("#hsd-picture-text").inner_text().strip()
    page.screenshot(path=str(shots / "09-picture.png"), full_page=True)

    page.get_by_role("tab", name="Lossless?").click()
    _set(page, "hsd-draws", 300)
    page.get_by_role("button", name="Check losslessness").click()
    assert _wait_done(page, ("done", "failed", "error"), "hsd-lossless-status").startswith("done")
    assert _plot_title(page, "hsd-lossless-plot", wait=True)
    page.screenshot(path=str(shots / "10-lossless.png"), full_page=True)

    page.get_by_role("tab", name="Output").click()
    page.get_by_role("button", name="Download this run (JSON and HTML)").click()
    page.wait_for_selector("#hsd-run-files a[href*='hsd-run.json'], #hsd-run-files :text('hsd-run.json')")
    pair = hsd.load_pair(*app.PAIRS[app.EMBEDDED], device="cpu")
    saved = hsd.generate(pair, "class Stack:", algorithm="slem", max_new_tokens=16)
    path = tmp_path / "saved.json"
    path.write_text(share.result_to_json(saved, prompt="class Stack:", pair=pair), encoding="utf-8")
    page.locator("#hsd-load-run input[type=file]").set_input_files(str(path))
    page.wait_for_selector("#hsd-status:has-text('Shown from a file')")
    assert "SLEM wrote" in _status(page) and page.locator("#hsd-output .hsd-tok").count() > 0
    # the form still says TLI at T = 1 (set above); the status says what the saved run was made with
    assert "That run: SLEM on " in _status(page) and "greedy" in _status(page).split("That run:")[1]
    assert "The form keeps its own settings" in _status(page)
    page.screenshot(path=str(shots / "11-loaded-run.png"))
