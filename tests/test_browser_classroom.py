"""The app in headless Chromium, for what a classroom meets first: the form's empty boxes stay empty, and plots
whose results arrive on a hidden tab fit their cards when the tab is shown.

Slow (a minute or two on 2 CPUs): ``python -m pytest -m slow tests/test_browser_classroom.py``; needs Debian's
``chromium`` and ``pip install playwright`` (tests/browser.py says how), skipped without them.
"""

from __future__ import annotations


import pytest

from browser import app_page, fill, unfold_settings

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def page():
    with app_page() as pg:
        pg.wait_for_selector("#hsd-availability .hsd-mark")  # the page's own pair check has answered
        yield pg


def _value(page, elem_id: str) -> str:
    return page.locator(f"#{elem_id} textarea, #{elem_id} input").first.input_value()


def test_a_fresh_page_leaves_the_drafters_temperature_and_threshold_empty(page):
    unfold_settings(page)
    assert _value(page, "hsd-drafter-temperature") == ""  # empty: the drafter samples at the target's temperature
    assert _value(page, "hsd-draft-threshold") == ""


def test_compare_plots_fit_their_cards_when_the_results_arrived_on_a_hidden_tab(page):
    fill(page, "hsd-max-new-tokens", 16)
    page.get_by_role("tab", name="Compare").click()  # its plots exist now (a tab never opened is drawn on opening)
    page.wait_for_timeout(500)
    page.get_by_role("tab", name="Output").click()
    page.get_by_role("button", name="Compare all algorithms").click()
    page.wait_for_function("() => (document.getElementById('hsd-status')?.innerText || '').includes('Speedups')")
    page.wait_for_timeout(1000)  # plotly draws the hidden plots after the status arrives
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_timeout(1500)
    sizes = page.locator("#hsd-compare .js-plotly-plot").evaluate_all(  # the svg against its Gradio card
        "els => els.map(e => [e.querySelector('.main-svg')?.getBoundingClientRect().width || 0,"
        " e.closest('.block')?.getBoundingClientRect().width || 0])")
    drawn = [(svg, card) for svg, card in sizes if card > 0]
    assert drawn, sizes
    assert all(svg <= card + 2 for svg, card in drawn), sizes


@pytest.mark.parametrize("tab", ["Compare", "Output"])
def test_stop_during_compare_says_the_comparison_stopped_on_either_tab(page, tab):
    page.get_by_role("tab", name=tab).click()
    page.get_by_role("button", name="Compare all algorithms").click()
    page.wait_for_function("() => (document.getElementById('hsd-status')?.innerText || '').includes('Compare ·')")
    page.get_by_role("button", name="Stop", exact=True).click()
    page.wait_for_function("() => (document.getElementById('hsd-status')?.innerText || '').includes('stopped')")
    page.wait_for_timeout(1500)  # an update the cancelled comparison had sent must not overwrite the stop
    status = page.locator("#hsd-status").inner_text()
    assert "Comparison stopped" in status and "The Output tab still shows the last Run" in status, status
    page.get_by_role("tab", name="Compare").click()
    header = page.locator("#hsd-compare table thead").first.inner_text()
    assert "algorithm" in header and "speedup" in header, header  # never columns "1 2 3"
    assert page.locator("#hsd-compare .error").count() == 0  # no red "Error" boxes: Stop is cooperative


@pytest.mark.parametrize("delay_s", [1, 3, 6, 10])
def test_a_stop_anywhere_in_a_comparison_leaves_no_error_box_and_says_it_stopped(page, delay_s):
    """Gradio's own cancellation marked all of Compare's outputs failed when it landed late (a stop 6 s in)."""
    fill(page, "hsd-max-new-tokens", 96)  # long enough to still be running after 10 s
    page.get_by_role("tab", name="Compare").click()
    page.get_by_role("tab", name="Output").click()
    page.get_by_role("button", name="Compare all algorithms").click()
    page.wait_for_timeout(delay_s * 1000)
    page.get_by_role("button", name="Stop", exact=True).click()
    page.wait_for_function("() => (document.getElementById('hsd-status')?.innerText || '').includes('stopped')")
    page.wait_for_timeout(1500)
    assert "Comparison stopped" in page.locator("#hsd-status").inner_text()
    page.get_by_role("tab", name="Compare").click()
    assert page.locator("#hsd-compare .error").count() == 0
