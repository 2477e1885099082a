"""Open the app in headless Chromium, run the default example, and save screenshots to docs/img/.

    apt-get install -y chromium && pip install playwright      # never `playwright install`
    python scripts/screenshot_app.py                             # the embedded pair
    python scripts/screenshot_app.py --target DIR --drafter DIR  # other models (typed into the form)

Waits for the coloured output, the token-boundary view and the speedup plot; fails if one never
appears. Screenshots: app-run.png, app-rounds.png, app-compare.png (and app-full.png, the whole page), then
app-picture.png (a recorded TLI run at T=1, one position's picture), app-lossless.png, app-drafters.png,
app-shared-noise.png (the shared-noise example compared: SLEM at T=0.7 writes AR's text; ``--only shared-noise``
takes just that one), and at 1024x768, a projector: app-first-visit.png and app-projector.png (after a Run;
``--only projector``).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def run_views(page, app, args, out: Path, wait: int) -> None:
    """The default example (optionally with another target or drafter typed in): its output, rounds and Compare."""
    page.get_by_text(app.EXAMPLES[0][0]).first.click()  # the first (default) example
    for label, value in (("Target (Hub id or local directory)", args.target),
                         ("Drafter (empty: AR only)", args.drafter)):
        if value:
            page.get_by_label(label).fill(value)
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_selector("#hsd-status .hsd-mark-ok, #hsd-status .hsd-mark-error", timeout=wait)
    status = page.locator("#hsd-status").inner_text()
    if page.locator("#hsd-status .hsd-mark-error").count():
        raise SystemExit(f"the run failed: {status}")
    page.wait_for_selector("#hsd-output .hsd-tok", timeout=wait)
    page.evaluate("window.scrollTo(0, 0)")
    page.screenshot(path=str(out / "app-run.png"), full_page=False)
    page.get_by_role("tab", name="Rounds").click()
    page.wait_for_selector("#hsd-round .hsd-boundaries", timeout=wait)
    page.locator("#hsd-round").screenshot(path=str(out / "app-rounds.png"))
    page.get_by_role("button", name="Compare all algorithms").click()
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_selector("#hsd-status:has-text('Compared'), #hsd-status .hsd-mark-error", timeout=wait)
    page.wait_for_selector("#hsd-speedup .js-plotly-plot", timeout=wait)
    page.wait_for_timeout(1500)  # let plotly finish drawing
    page.locator("#hsd-compare").screenshot(path=str(out / "app-compare.png"))
    page.screenshot(path=str(out / "app-full.png"), full_page=True)


def teaching_views(page, out: Path, wait: int) -> None:
    """A recorded sampled run's position picture, the losslessness check and the drafters' comparison."""
    page.locator("#hsd-algorithm input[value='tli']").check()
    page.locator("#hsd-settings button.label-wrap").click()  # the decoding settings start folded
    page.locator("#hsd-temperature input").fill("1")
    page.locator("#hsd-max-new-tokens input").fill("32")
    page.get_by_label("record distributions (for the position picture)").check()
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_selector("#hsd-status:has-text('TLI wrote'), #hsd-status .hsd-mark-error", timeout=wait)
    page.get_by_role("tab", name="Rounds").click()
    page.wait_for_selector("#hsd-picture .gtitle", timeout=wait)
    page.wait_for_timeout(1000)
    page.locator("#hsd-picture").screenshot(path=str(out / "app-picture.png"))
    page.get_by_role("tab", name="Lossless?").click()
    page.get_by_role("button", name="Check losslessness").click()
    page.wait_for_selector("#hsd-lossless-plot .gtitle", timeout=wait)
    page.wait_for_timeout(1000)
    page.locator("#hsd-lossless").screenshot(path=str(out / "app-lossless.png"))
    page.get_by_role("tab", name="Drafters").click()
    page.locator("#hsd-temperature input").fill("0")
    page.locator("#hsd-drafters-prompts input").fill("1")
    page.get_by_role("button", name="Compare drafters").click()
    page.wait_for_selector("#hsd-drafters-plot .gtitle", timeout=wait * 2)
    page.wait_for_timeout(1000)
    page.locator("#hsd-drafters").screenshot(path=str(out / "app-drafters.png"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", help="type this target into the form after choosing the example")
    ap.add_argument("--drafter", help="type this drafter into the form after choosing the example")
    ap.add_argument("--out", default=str(ROOT / "docs" / "img"))
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--timeout", type=float, default=240, help="seconds to wait for each result")
    ap.add_argument("--only", choices=["shared-noise", "projector"], help="take only this screenshot")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(ROOT))
    from playwright.sync_api import sync_playwright

    import app

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    demo = app.build()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True, **app.launch_options())  # as app.py
    wait = int(args.timeout * 1000)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=args.chromium, args=FLAGS)
            page = browser.new_page(viewport={"width": 1500, "height": 1000}, device_scale_factor=1)
            page.goto(url)
            page.wait_for_selector("#hsd-availability .hsd-mark", timeout=wait)
            page.evaluate("() => localStorage.setItem('hsd-visited', '1')")  # a returning visitor: the
            page.reload()                                                     # explanation folded (app-first-visit.png has it)
            page.wait_for_selector("#hsd-availability .hsd-mark", timeout=wait)
            if args.only == "shared-noise":
                shared_noise_view(page, app, out, wait)
                browser.close()
                return 0
            if args.only == "projector":
                projector_view(browser, url, out, wait)
                browser.close()
                return 0
            run_views(page, app, args, out, wait)
            teaching_views(page, out, wait)
            shared_noise_view(page, app, out, wait)
            projector_view(browser, url, out, wait)
            browser.close()
    finally:
        demo.close()
    for name in ("app-run.png", "app-rounds.png", "app-compare.png", "app-full.png", "app-picture.png",
                 "app-lossless.png", "app-drafters.png", "app-shared-noise.png", "app-first-visit.png",
                 "app-projector.png"):
        print(out / name)
    return 0


def projector_view(browser, url: str, out: Path, wait: int) -> None:
    """The page at 1024x768 as a first visit sees it (the one-minute explanation open), then after a Run (the
    status and the output in view)."""
    page = browser.new_page(viewport={"width": 1024, "height": 768}, device_scale_factor=1)
    page.goto(url)
    page.wait_for_selector("#hsd-availability .hsd-mark", timeout=wait)
    page.screenshot(path=str(out / "app-first-visit.png"))
    page.locator("#hsd-intro button.label-wrap").click()
    page.get_by_role("button", name="Run", exact=True).click()
    page.wait_for_selector("#hsd-status .hsd-mark-ok, #hsd-status .hsd-mark-error", timeout=wait)
    page.wait_for_selector("#hsd-output .hsd-tok", timeout=wait)
    page.wait_for_timeout(1000)
    page.screenshot(path=str(out / "app-projector.png"))
    page.close()


def shared_noise_view(page, app, out: Path, wait: int) -> None:
    """The shared-noise example (its box ticked), compared: the badge says SLEM's sampled text is AR's."""
    label = next(e[0] for e in app.EXAMPLES if len(e) > 9 and e[9])
    page.get_by_text(label).first.click()
    page.wait_for_function("document.querySelector('#hsd-shared-noise input').checked", timeout=wait)
    page.get_by_role("button", name="Compare all algorithms").click()
    page.get_by_role("tab", name="Compare").click()
    page.wait_for_selector("#hsd-status:has-text('Compared'), #hsd-status .hsd-mark-error", timeout=wait)
    page.wait_for_selector("#hsd-speedup .js-plotly-plot", timeout=wait)
    page.wait_for_timeout(1500)
    page.locator("#hsd-compare").screenshot(path=str(out / "app-shared-noise.png"))
    page.locator("#hsd-shared-noise").scroll_into_view_if_needed()
    page.locator("#hsd-shared-noise").screenshot(path=str(out / "app-shared-noise-box.png"))


if __name__ == "__main__":
    raise SystemExit(main())
