"""The app in headless Chromium at 1024x768, a classroom projector: what a newcomer sees in the first minute.

Every tab is reachable without an overflow menu; the decoding settings are folded behind a summary of what is
set; the examples sit by the prompt; a first visit opens a one-minute explanation that later visits fold; after
Run the status and the output are in view; state is shown by word badges, never by emoji (a browser without an
emoji font draws those as boxes); Compare's plots keep whole titles and type of 12 px or more.

Slow (a minute or two on 2 CPUs): ``python -m pytest -m slow tests/test_browser_projector.py``; needs Debian's
``chromium`` and ``pip install playwright`` (tests/browser.py says how), skipped without them.
"""

from __future__ import annotations

import re

import pytest

from browser import app_page, fill

pytestmark = pytest.mark.slow
WIDTH, HEIGHT = 1024, 768
EMOJI = re.compile("[\u2600-\u27bf\u2b00-\u2bff\u23e9-\u23ff\U0001f300-\U0001faff]")


@pytest.fixture(scope="module")
def page():
    with app_page(WIDTH, HEIGHT) as pg:
        pg.wait_for_selector("#hsd-availability .hsd-mark")  # the page's own pair check has answered
        yield pg


def _open(page, elem_id: str) -> bool:
    return page.locator(f"#{elem_id} button.label-wrap").first.evaluate("b => b.classList.contains('open')")


def test_a_first_visit_opens_the_one_minute_explanation_and_a_later_one_folds_it(page):
    assert _open(page, "hsd-intro")
    intro = page.locator("#hsd-intro").inner_text()
    assert "The colours" in intro and "A round" in intro and "About" in intro
    page.reload()
    page.wait_for_selector("#hsd-availability .hsd-mark")
    page.wait_for_timeout(500)
    assert not _open(page, "hsd-intro")
    page.locator("#hsd-intro button.label-wrap").click()  # still one click away
    page.wait_for_timeout(300)
    assert _open(page, "hsd-intro") and page.locator("#hsd-intro").get_by_text("The colours").is_visible()
    page.locator("#hsd-intro button.label-wrap").click()


def test_every_tab_is_in_view_without_an_overflow_menu(page):
    tabs = page.locator("#hsd-tabs [role=tab]")
    names = [t.strip() for t in tabs.all_inner_texts() if t.strip()]
    assert names == ["Output", "Rounds", "Compare", "Lossless?", "Drafters", "Pair check", "About"], names
    for i in range(tabs.count()):
        box = tabs.nth(i).bounding_box()
        assert box and box["width"] > 0 and box["x"] + box["width"] <= WIDTH, (names, i, box)
    menu = page.locator("#hsd-tabs .overflow-menu")
    assert menu.count() == 0 or not menu.first.is_visible()


def test_the_settings_are_folded_behind_a_summary_of_what_is_set(page):
    label = page.locator("#hsd-settings button.label-wrap").inner_text()
    assert not _open(page, "hsd-settings") and "greedy" in label and "lookahead 5" in label, label
    assert not page.locator("#hsd-temperature input").is_visible()
    fill(page, "hsd-temperature", 0.7)
    page.wait_for_function("() => document.querySelector('#hsd-settings button.label-wrap').innerText"
                           ".includes('sampling at T 0.7')")
    fill(page, "hsd-temperature", 0)
    page.wait_for_function("() => document.querySelector('#hsd-settings button.label-wrap').innerText"
                           ".includes('greedy')")
    page.locator("#hsd-settings button.label-wrap").click()  # fold them again


def test_the_examples_sit_by_the_prompt_with_one_line_labels(page):
    import app

    prompt = page.locator("#hsd-prompt textarea").bounding_box()
    examples = page.locator("#hsd-examples").bounding_box()
    assert 0 <= examples["y"] - (prompt["y"] + prompt["height"]) < 120, (prompt, examples)
    label = page.locator("#hsd-examples").inner_text().splitlines()[0]
    assert len(label) < 80, label
    for text, *_ in app.EXAMPLES:  # each shown whole, on one line
        cell = page.locator("#hsd-examples").get_by_text(text, exact=True).first
        assert cell.is_visible(), text
        assert cell.bounding_box()["height"] < 40, text


def test_after_run_the_status_and_the_output_are_in_view_in_plain_words(page):
    fill(page, "hsd-max-new-tokens", 24)
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_selector("#hsd-status .hsd-mark-ok, #hsd-status .hsd-mark-error")
    page.wait_for_selector("#hsd-output .hsd-tok")
    page.wait_for_timeout(500)
    status = page.locator("#hsd-status")
    assert status.locator(".hsd-mark-ok").inner_text() == "done"
    text = status.inner_text()
    assert "wrote 24 tokens" in text and "τ" not in text and "OpenMP" not in text, text  # jargon: in tooltips
    assert "τ =" in status.locator("abbr").first.get_attribute("title")
    out = page.locator("#hsd-output .hsd-tok").first.bounding_box()
    assert status.bounding_box()["y"] >= -1 and out["y"] + out["height"] <= HEIGHT, out  # above the fold
    assert page.locator("#hsd-tabs [role=tab]", has_text="Rounds").first.bounding_box()["y"] < HEIGHT


def test_state_is_shown_by_word_badges_never_by_emoji(page):
    for elem_id in ("hsd-status", "hsd-availability"):
        text = page.locator(f"#{elem_id}").inner_text()
        assert not EMOJI.search(text), (elem_id, text)
        assert page.locator(f"#{elem_id} .hsd-mark").count() > 0
    badge = page.locator("#hsd-availability .hsd-mark").first
    assert badge.inner_text() in ("runs", "not available")
    style = badge.evaluate("b => { const s = getComputedStyle(b); return [s.borderTopStyle, s.backgroundColor]; }")
    assert style[0] == "solid" and style[1] not in ("rgba(0, 0, 0, 0)", "transparent"), style


def test_compare_plots_keep_whole_titles_and_type_of_12_px_or_more(page):
    page.get_by_role("button", name="Compare all algorithms").click()
    page.wait_for_function("() => (document.getElementById('hsd-status')?.innerText || '').includes('Speedups')")
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_timeout(2000)
    plots = page.locator("#hsd-compare .js-plotly-plot").evaluate_all("""els => els.map(p => {
        const svg = p.querySelector('.main-svg').getBoundingClientRect();
        const texts = [...p.querySelectorAll('text')].filter(t => t.textContent.trim());
        const overflow = texts.map(t => t.getBoundingClientRect())
            .filter(r => r.width > 0 && (r.left < svg.left - 1 || r.right > svg.right + 1)).length;
        const sizes = texts.map(t => parseFloat(getComputedStyle(t).fontSize) *
            (t.closest('tspan[style*="font-size"]') ? 1 : 1));
        const small = [...p.querySelectorAll('text, tspan')].filter(t => t.textContent.trim())
            .map(t => t.getBoundingClientRect().height).filter(h => h > 0 && h < 12).length;
        return {width: svg.width, overflow, min: Math.min(...sizes), small,
                title: p.querySelector('.gtitle')?.textContent || ''};
    })""")
    assert len(plots) == 5, plots
    for plot in plots:
        assert plot["width"] >= 440 and plot["overflow"] == 0 and plot["min"] >= 12, plot
        assert plot["small"] == 0, plot  # no line of text drawn under 12 px tall, subtitles and bar labels included
