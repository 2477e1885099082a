"""The lab's actions without widgets: what each of the app's buttons does, as plain values.

``app.py`` builds the page and turns these values into widget updates; everything it shows is decided
here, so the same actions can be driven from a test, a notebook or another front end. Each action returns
(or, for the long ones, yields) a dict keyed by the name of the thing it fills ("status", "output",
"round", ...); a key that is absent means "clear it" for :func:`run_steps` and :func:`compare_steps`, whose
every update replaces the whole previous run. No gradio import (tests/test_layers.py).
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
import time
from pathlib import Path
from typing import Iterator

import hsd
from . import catalogue, durations, figures, forms, marks, picture, planning, share, viz, zerogpu
from .advise import DYNAMIC_LOOKAHEAD, advise_steps, format_advice
from .bench import run_each
from .catalogue import GALLERY
from .machine import device_words
from .report import compatibility_report, explain, format_report

log = logging.getLogger("hsd.lab")
STREAM_INTERVAL_S = 0.15
#: the settings a drafter comparison, a production configuration and the losslessness check take from the form
DECODING = ("temperature", "top_k", "top_p", "lookahead", "max_new_tokens", "seed", "drafter_temperature",
            "draft_threshold")
PAIRS = GALLERY
EMBEDDED, BYTES, SHARED, SAMPLING = list(GALLERY)[:4]  # the embedded pairs, offline
ALGOS = list(hsd.ALGORITHMS)  # the registry's order: ar, sd, slem, tli, slrs
NO_RUN = "<i>Run an algorithm to step through its rounds.</i>"
STOPPED = (f"{marks.STOPPED} The output shows what was generated before the stop; a stopped run has no "
           "summary, round view or comparison.")
STOPPED_COMPARE = (f"{marks.STOPPED} **Comparison stopped** before its last repeat: a comparison shows its results "
                   "only when it finishes. The Output tab still shows the last Run.")
COMPARING = "Compare · "  # follows the busy badge in a comparison's status, so Stop can say what it stopped


def busy(text) -> bool:
    """Whether a status line says its work is still in progress."""
    return marks.starts(text, "busy")


def comparing(status):
    """A comparison's status in progress, marked as the comparison's (:data:`COMPARING`)."""
    text = str(status or "")
    if busy(text) and COMPARING not in text:
        return f"{marks.BUSY} {COMPARING}{text.lstrip()[len(marks.BUSY):].lstrip()}"
    return status
# the app's Advise calibrates these, as its duration assumes (hsd/durations.py)
ADVISE_TOKENS, ADVISE_LOOKAHEADS, ADVISE_DRAFT_THRESHOLDS = (durations.ADVISE_TOKENS, durations.ADVISE_LOOKAHEADS,
                                                             durations.ADVISE_DRAFT_THRESHOLDS)
COLUMNS_HELP = ("p: the target's probability of the proposed token; q / q′ / ψ: the proposal's probability "
                "(SD / TLI / SLRS; SLEM has none); P(accept) = min(1, p/q), or p for SLEM's exact match.")
BAD_DRAFTER = "Llama-3.1-8B-Instruct ← Qwen2.5-0.5B-Instruct (bad drafter)"
#: (label, preset, prompt, algorithm, temperature, lookahead, max new tokens[, drafter temperature[, draft
#: threshold[, shared noise]]]); the label says what the example shows in a few words and its speed against AR on
#: code the pair never saw (the form, and the folded settings' summary, show every setting it fills). The figures
#: are `benchmarks/app_examples.py --held-out 12`: each example's settings on twelve functions of packages the
#: corpus holds out whole, on the app's thread choice (docs/benchmarks/app-examples-held-out.md); on its own prompt
#: an example may run faster or slower. Prompts end at the end of a line: the target's BPE merges a newline with the
#: next line's indentation, so a prompt ending in a bare newline means "unindented line or end of file" to it
#: (docs/embedded-pair.md). The examples show a classroom that the drafter decides: sampling with the greedy drafter
#: does not pay (TLI at T=1, k=5) and the drafter trained on the target's distribution (tiny-code-sampling) does
#: better; SLEM at T=0.7 with shared noise (k=3) writes AR's text for the same seed. The first example (and the
#: app's default prompt) is one whose greedy SLEM speedup is about the pair's average, not the best prompt found.
#: A label longer than :data:`EXAMPLE_LABEL_MAX` characters is cut by Gradio 6's example cell (its Example
#: components end a longer string with "...").
EXAMPLE_LABEL_MAX = 60
EXAMPLES = [
    ("SLEM, greedy, k ≤ 12: 1.2x AR on unseen code", EMBEDDED, "import os\n\n\ndef read_lines(path):", "slem", 0,
     12, 96, None, 0.5),
    ("SLEM, greedy, k = 5: 1.0x AR on unseen code", EMBEDDED, "class Stack:\n    def __init__(self):", "slem", 0,
     5, 96),
    ("SD, the target's own tokenizer: 1.3x AR", SHARED, "def fibonacci(n):", "sd", 0, 5, 96),
    ("TLI sampling, greedy drafter: 0.8x AR (slower)", EMBEDDED, "def fibonacci(n):", "tli", 1.0, 5, 96),
    ("TLI sampling, drafter for sampling: 1.0x AR", SAMPLING, "def fibonacci(n):", "tli", 1.0, 2, 96),
    ("SLEM sampling, shared noise: AR's very text", SAMPLING, "class Stack:\n    def __init__(self):", "slem", 0.7, 3,
     96, None, 0.0, True),
    ("SLRS, a byte-level drafter: 0.9x AR", BYTES, "def fibonacci(n):", "slrs", 0, 1, 64),
    ("A bad drafter for an 8B target (GPU)", BAD_DRAFTER, "Summarise the plot of Hamlet in three sentences.", "slem",
     0, 5, 64),
]


#: the library's words for a setting, as the page names its control (the CLI does the same with its flags)
PAGE_WORDS = (("Use noise='independent' (the default) with them.", "Untick shared noise for them."),
              ("noise='shared'", "shared noise"), ("noise='independent'", "shared noise off"))


def page_words(message: str) -> str:
    for api, page in PAGE_WORDS:
        message = message.replace(api, page)
    return message


def error_text(exc: BaseException) -> str:
    """A failure as the status line shows it: hsd's own errors say what to do; anything else is logged."""
    if isinstance(exc, hsd.HsdError):
        return f"{marks.ERROR} **{type(exc).__name__}**: {page_words(str(exc))}"
    log.exception("unexpected error in a handler")
    return (f"{marks.ERROR} **Unexpected error** ({type(exc).__name__}): {str(exc)[:500]}. The app is still running: change "
            "the settings and try again.")


def new_state(pair: hsd.Pair, result: hsd.Result, prompt: str | None, prompt_special=()) -> dict:
    """What a page keeps of a finished run: enough to redraw every view without the models (``prompt_special``:
    the prompt's spans that became special tokens, :func:`hsd.forms.prompt_special`)."""
    return {"result": result, "prompt": prompt, "special_target": dict(pair.target.vocab.special_text),
            "special_drafter": dict(pair.drafter.vocab.special_text) if pair.drafter else {},
            "prompt_special": list(prompt_special)}


def round_view(state: dict | None, index) -> str:
    """The token-boundary view of round ``index`` of the run in ``state`` (clamped to the rounds it has)."""
    if not state:
        return NO_RUN
    rounds = state["result"].rounds
    if not rounds:
        return "<i>No rounds.</i>"
    rnd = rounds[max(0, min(int(index or 0), len(rounds) - 1))]
    return viz.round_html(rnd, algorithm=state["result"].algorithm, special_drafter=state["special_drafter"],
                          shared_noise=state["result"].settings.get("noise") == "shared",
                          special_target=state["special_target"])


def step(state: dict, index, delta) -> int:
    """The round after a ◀/▶ click, clamped; raises HsdError/KeyError/TypeError on a malformed index or state."""
    index, delta = forms.number("round", index or 0, int), forms.number("step", delta, int)
    return max(0, min(index + delta, len(state["result"].rounds) - 1))


def output(state: dict, show_rejected: bool) -> str:
    """The coloured output of the run in ``state`` again, with or without the rejected drafts."""
    return viz.output_html(state["result"].rounds, show_rejected=show_rejected, prompt=state["prompt"],
                           special_text=state["special_target"], prompt_special=state.get("prompt_special"))


def check_form(form: forms.Form) -> None:
    """Refuse a form that cannot run (bad numbers, an empty prompt) before anything is loaded for it."""
    form.read()


def load_steps(target, drafter, device="auto", dtype="auto", check=None) -> Iterator[dict]:
    """Before a handler's GPU part: ``check()`` the form, then load the pair in this process (on ZeroGPU, the main
    one: a download never holds the GPU; :func:`hsd.zerogpu.load_steps`), its status lines as they come. A
    failure ends with its status and ``failed``."""
    try:
        if check is not None:
            check()
        for item in zerogpu.load_steps(target, drafter, device, dtype):
            if isinstance(item, str):
                yield {"status": item}
    except Exception as exc:
        yield {"status": error_text(exc), "failed": True}


def drafter_lines(text) -> list[str]:
    """The Drafters tab's box, one drafter per line (a preset's name stands for its drafter), blank lines dropped."""
    from .drafters import resolve_drafter

    return [resolve_drafter(line.strip()) for line in str(text or "").splitlines() if line.strip()]


def run_steps(target, drafter, algorithm, form: forms.Form, device="auto", dtype="auto",
              show_rejected=True) -> Iterator[dict]:
    """One generation, streamed: status while checking and loading, the coloured output every
    :data:`STREAM_INTERVAL_S`, then the summary, the round to open first (``round``: index, ``rounds``: how
    many), its view, the per-round plot and the state. The form's ``record`` keeps what the rejection-sampling
    picture of each verified position needs (:mod:`hsd.picture`; a little slower). A failure ends as a status
    only."""
    try:
        yield {"status": f"{marks.BUSY} Checking the settings and the models…"}
        settings, text = form.read()
        drafter = drafter if algorithm != "ar" else ""  # AR needs no drafter: don't load one
        yield {"status": f"{marks.BUSY} Loading (first time only)…\n{planning.plan_named(target, drafter, device, dtype)}"}
        pair = planning.load_named_pair(target, drafter, device, dtype)
        hsd.check_algorithm(pair, algorithm)
        forms.check_room(pair, settings, text)
        special, spans = pair.target.vocab.special_text, forms.prompt_special(pair, settings, text)
        prompt = text.get("prompt")
        with planning.device_lock(str(pair.target.device)):
            rounds, last, result = [], 0.0, None
            for item in hsd.stream(pair, algorithm=algorithm, settings=settings, **text):
                if isinstance(item, hsd.Result):
                    result = item
                    break
                rounds.append(item)
                if time.perf_counter() - last > STREAM_INTERVAL_S:
                    last = time.perf_counter()
                    yield {"output": viz.output_html(rounds, show_rejected=show_rejected, prompt=prompt,
                                                     special_text=special, prompt_special=spans),
                           "status": f"{marks.BUSY} {algorithm.upper()}: round {len(rounds)}, "
                                     f"{sum(len(r.emitted) for r in rounds)} tokens… (Stop keeps what is shown)"}
        state = new_state(pair, result, prompt, spans)
        state["meta"] = share.run_meta(result, prompt=prompt, pair=pair)  # what a download records
        first = viz.interesting_round(result.rounds)
        yield {"status": f"{marks.OK} " + viz.run_summary(result, viz.tip(*device_words(pair.target.device))), "state": state,
               "output": output(state, show_rejected), "round": first, "rounds": len(result.rounds),
               "round_view": round_view(state, first),
               "rounds_plot": figures.rounds_figure(result.rounds, f"{algorithm}: time and tokens per round")}
    except Exception as exc:  # every failure ends as a message to this user; the app stays up
        yield {"status": error_text(exc)}


def compare_steps(target, drafter, form: forms.Form, device="auto", dtype="auto") -> Iterator[dict]:
    """AR and every applicable algorithm, same prompt, settings and seed, repeated interleaved
    (:func:`hsd.bench.run_each`); then the badge, the five figures, the table and its CSV file. With shared noise
    AR and SLEM draw from one noise field (the others cannot, and draw independently)."""
    try:
        yield {"status": f"{marks.BUSY} Checking the settings and the models…"}
        settings, text = form.read()
        yield {"status": f"{marks.BUSY} Loading (first time only)…\n{planning.plan_named(target, drafter, device, dtype)}"}
        pair = planning.load_named_pair(target, drafter, device, dtype)
        forms.check_room(pair, settings, text)
        with planning.device_lock(str(pair.target.device)):
            for progress in run_each(pair, hsd.usable_algorithms(pair), **durations.compare_settings(),
                                     **settings.replace(record_distributions=0).to_dict(), **text):
                if isinstance(progress, str):
                    yield {"status": f"{marks.BUSY} {progress}"}
            badge = viz.lossless_badge(progress.results, pair)  # a difference costs one target forward: on the device
        results = progress.results
        machine = f"{device_words(pair.target.device)[0]}, {results['ar'].settings['dtype']}"
        table = viz.summary_table(results, progress)
        csv = Path(tempfile.mkdtemp(prefix="hsd-")) / "hsd-compare.csv"
        table.to_csv(csv, index=False)
        yield {"status": viz.compare_status(progress, machine, settings), "badge": badge,
               "speedup": figures.speedup_figure(results, machine, progress),
               "tokens_time": figures.tokens_time_figure(results),
               "histogram": figures.acceptance_histogram_figure(results),
               "positions": figures.position_acceptance_figure(results),
               "time_split": figures.time_split_figure(results), "table": table, "csv": str(csv)}
    except Exception as exc:
        yield {"status": error_text(exc)}


def check(target, drafter, device="auto", dtype="auto", algorithm=None) -> dict:
    """What will be loaded, which algorithms apply (:func:`hsd.availability`, the one source the choices, the
    examples and the presets follow) and why, what SLRS costs, and the drafter-compatibility report.
    ``choices``/``algorithm``: the algorithms to offer and the one to select; on a failure, ``choices`` is absent
    (leave the choice as it is)."""
    try:
        plan = planning.plan_named(target, drafter, device, dtype)
        pair = planning.load_named_pair(target, drafter, device, dtype)
        usable = hsd.usable_algorithms(pair)
        choice = {"choices": usable, "algorithm": algorithm if algorithm in usable else forms.default_algorithm(usable)}
        if pair.drafter is None:
            return {"report": f"{plan}\n\nNo drafter: only **ar** runs.", "availability": f"- {marks.YES} **ar**", **choice}
        report = compatibility_report(pair)
        return {"report": f"{plan}\n\n```text\n{format_report(report)}\n```\n\n{explain(report)}",
                "availability": viz.availability_markdown(hsd.availability(pair), viz.cost_notes(report)), **choice}
    except Exception as exc:
        return {"report": error_text(exc), "availability": error_text(exc)}


def describe(target, drafter, device="auto", dtype="auto") -> dict:
    """What a pair would load (Hub metadata when reachable), before anything is downloaded; every algorithm is
    offered again until **Check pair** narrows the choice."""
    try:
        text = planning.plan_named(target, drafter, device, dtype) + "\n\nPress **Check pair** to load it and see " \
            "which algorithms apply."
    except Exception as exc:
        text = error_text(exc)
    return {"report": text, "choices": ALGOS}


def pair_changed(target, drafter, device="auto", dtype="auto", algorithm=None) -> dict:
    """After a preset or an example: :func:`check` at once where that downloads nothing (local directories,
    loaded models), so the choice never offers what the check rejects; otherwise :func:`describe`."""
    if planning.loadable_named(target, drafter, device, dtype):
        return check(target, drafter, device, dtype, algorithm)
    return {**describe(target, drafter, device, dtype),
            "availability": "Not checked yet: press **Check pair** to see which algorithms apply."}


def pair_note(label: str, device="auto", dtype="auto") -> str:
    """The note under the pair choice (:func:`hsd.catalogue.pair_note`) and, for a Hub pair on a CPU, whether it
    fits this machine (:func:`hsd.planning.memory_note`)."""
    pair = catalogue.hub_pair(label)
    fits = planning.memory_note(pair.target, pair.drafter, device, dtype) if pair is not None else ""
    return " ".join(part for part in (catalogue.pair_note(label), fits) if part)


def example(index, device="auto", dtype="auto") -> dict:
    """The form filled with example ``index``, and its pair checked as :func:`pair_changed` does, in one update
    (so the algorithm choice and the verdict never disagree, even for a moment)."""
    _, preset, text, algorithm, temperature, lookahead, max_new_tokens, *rest = EXAMPLES[int(index)]
    # optional eighth to tenth fields; None empties their boxes, shared noise is off unless the example says so
    drafter_temperature, draft_threshold, shared_noise = (list(rest) + [None, None, False])[:3]
    target, drafter = PAIRS[preset]
    checked = pair_changed(target, drafter, device, dtype, algorithm)
    return {**checked, "algorithm": checked.get("algorithm", algorithm), "preset": preset, "target": target,
            "drafter": drafter, "prompt": text, "temperature": temperature, "lookahead": lookahead,
            "max_new_tokens": max_new_tokens, "drafter_temperature": drafter_temperature,
            "draft_threshold": draft_threshold, "shared_noise": bool(shared_noise)}


def advise_text(target, drafter, form: forms.Form, device="auto", dtype="auto") -> Iterator[str]:
    """`hsd advise` on this pair and prompt, its progress first: measured acceptance and costs, the predicted
    speedup of every applicable algorithm (SLRS included) at each lookahead it calibrates and, where a draft
    threshold applies, at the dynamic lookahead with each of :data:`ADVISE_DRAFT_THRESHOLDS`; a recommendation."""
    try:
        forms.check_prompt(form.prompt)
        prompt, temperature = form.prompt, forms.Form(temperature=form.temperature).settings().temperature
        pair = planning.load_named_pair(target, drafter, device, dtype)
        if pair.drafter is None:
            yield "No drafter: only **ar** runs, there is nothing to advise."
            return
        names = [a for a in hsd.usable_algorithms(pair) if a != "ar"]
        lines = []
        with planning.device_lock(str(pair.target.device)):
            for item in advise_steps(pair, [prompt], temperature=temperature, max_new_tokens=ADVISE_TOKENS,
                                     algorithms=names, lookaheads=ADVISE_LOOKAHEADS,
                                     draft_thresholds=ADVISE_DRAFT_THRESHOLDS):
                if isinstance(item, str):
                    lines.append(item)
                    yield f"{marks.BUSY} Advise: " + "\n\n".join(lines[-3:])
        note = (f" (a row \"{DYNAMIC_LOOKAHEAD}, stop < θ\" is the dynamic lookahead: lookahead {DYNAMIC_LOOKAHEAD} "
                "and draft threshold θ in the form)" if any(p["draft_threshold"] for p in item["predictions"]) else "")
        yield (f"**{item['recommendation']['text']}**\n\nCalibrated on this prompt ({ADVISE_TOKENS} new tokens) "
               f"at temperature {temperature:g}, at each setting in the table{note}; a prediction, not a "
               f"measurement: **Compare** measures.\n\n```text\n{format_advice(item)}\n```")
    except Exception as exc:
        yield error_text(exc)


def after_stop(status, advice, *others) -> tuple[str | None, ...]:
    """Stop: a run, comparison, advice or drafter comparison (``others``) in progress says it stopped (the new
    text); a finished one stays as it is (None)."""
    stopped = (STOPPED_COMPARE if COMPARING in str(status) else STOPPED) if busy(status) else None
    return (stopped, f"{marks.STOPPED} Advise stopped." if busy(advice) else None,
            *(f"{marks.STOPPED} No comparison: it stopped before the end." if busy(text) else None for text in others))


def token_room(target, drafter, form: forms.Form, device="auto", dtype="auto") -> str | None:
    """The max-new-tokens box's hint for this pair and prompt (the target's context minus the prompt), or None
    to leave it (an empty prompt or a missing model: the run will say why)."""
    try:
        if not planning.loadable_named(target, drafter, device, dtype):
            return f"1..{forms.MAX_NEW_TOKENS}; the pair's context may allow fewer"
        text = form.text()
        settings = forms.Form(mode=form.mode, parse_special=form.parse_special, max_new_tokens=1).settings()
        pair = planning.load_named_pair(target, drafter, device, dtype)
        return f"1..{forms.room(pair, settings, text)} for this pair and prompt"
    except Exception:  # noqa: BLE001 - the hint is optional
        return None


def first_minute() -> str:
    """The page in one minute, for a first visit: what happens, what the colours and the round view say, and where
    the algorithms are explained (the About tab)."""
    return (
        "**What happens.** A small *drafter* model guesses the next few tokens; the big *target* model checks all "
        "the guesses in one step and keeps the ones it would have written itself. The text is always exactly the "
        "target's own, only written in fewer target steps. Here the two models may cut text into tokens "
        "differently, which classic speculative decoding cannot handle.\n\n"
        "**The colours** in the output: green text came from the drafter and was kept; orange is where the "
        "target disagreed and wrote its own token instead; blue is the extra token a round ends with when every "
        "guess was kept; struck-through grey is a guess the target rejected.\n\n"
        f"{viz.legend_html()}\n\n"
        "**A round** is one check by the target. The *Rounds* tab steps through them: the drafter's tokens on "
        "top, the text they spell in the middle, the target's tokens of that text below, each marked kept or "
        "rejected. Where the two rows cut the text in different places, the two vocabularies differ.\n\n"
        "**Try it:** pick an example under the prompt, press **Run**, then **Compare** to time every algorithm "
        "against the target alone. The *About* tab explains the algorithms (SLEM, TLI, SLRS) and why the "
        "output never changes.")


def settings_words(temperature, lookahead, max_new_tokens, top_k=0, top_p=1.0, seed=0, drafter_temperature="",
                   draft_threshold="", shared_noise=False, record=False) -> str:
    """Decoding settings in a few words ("greedy · lookahead 5 · 96 tokens"); what is off is left out."""
    def num(value, default=None):
        try:
            return float(value) if value not in (None, "") else default
        except (TypeError, ValueError):
            return default

    t = num(temperature, 0.0)
    parts = ["greedy" if t == 0 else f"sampling at T {t:g}"]
    k, n = num(lookahead), num(max_new_tokens)
    parts += [f"lookahead {k:g}" if k is not None else "lookahead ?", f"{n:g} tokens" if n is not None else "tokens ?"]
    if t and num(top_k, 0):
        parts.append(f"top-k {num(top_k):g}")
    if t and num(top_p, 1.0) < 1:
        parts.append(f"top-p {num(top_p):g}")
    if t:
        parts.append(f"seed {num(seed, 0):g}")
    if num(drafter_temperature) is not None:
        parts.append(f"drafter T {num(drafter_temperature):g}")
    if num(draft_threshold, 0):
        parts.append(f"stop drafting below {num(draft_threshold):g}")
    if shared_noise:
        parts.append("shared noise")
    if record:
        parts.append("recording")
    return " · ".join(parts)


def settings_summary(*form_values) -> str:
    """The folded decoding settings' label: what is set (:func:`settings_words` of the form's boxes)."""
    return "Decoding settings: " + settings_words(*form_values)


def run_words(result: hsd.Result) -> str:
    """A finished run's algorithm, pair and settings in a few words, as the form would show them."""
    s = result.settings
    pair = f"{s.get('target') or '?'} ← {s.get('drafter') or 'no drafter'}"
    return (f"{result.algorithm.upper()} on {pair}, " + settings_words(
        s.get("temperature", 0), s.get("lookahead"), s.get("max_new_tokens"), s.get("top_k", 0), s.get("top_p", 1.0),
        s.get("seed", 0), s.get("drafter_temperature"), s.get("draft_threshold"), s.get("noise") == "shared"))


def output_is_from(state: dict | None) -> str | None:
    """The status after the pair changed under a run still on screen: which run the output is from; None without
    one."""
    if not state or "result" not in state:
        return None
    return (f"The output below is from the last run ({run_words(state['result'])}). Press **Run** for the pair "
            "chosen now.")


def about_algorithms() -> str:
    """The Algorithms tab: each registered algorithm's own description, and what lossless means."""
    return ("\n\n".join(hsd.ALGORITHMS[a].about for a in ALGOS if hsd.ALGORITHMS[a].about)
            + "\n\nAll are lossless: at temperature 0 the output equals AR's token for token (the Compare tab checks "
              "it); when sampling, the output has exactly the target's distribution.")


# ----------------------------------------------------------------------------- drafters and production

def default_drafters() -> str:
    """The drafters the Drafters tab offers first, one per line: every embedded drafter of the embedded target."""
    from .loading import EMBEDDED

    target = EMBEDDED["tiny-code"][0]
    return "\n".join(dict.fromkeys(d for t, d in EMBEDDED.values() if t == target))


def drafters_steps(target, drafters_text, algorithm, num_prompts, form: forms.Form, device="auto",
                   dtype="auto") -> Iterator[dict]:
    """Several drafters for one target (:func:`hsd.drafters.compare_drafters`) on the first ``num_prompts`` code
    prompts, at the form's settings (its drafter temperature and draft threshold included; not its prompt):
    progress as the status, then the table, the figure and the CSV of every (drafter, algorithm)."""
    from .bench import load_prompts
    from .drafters import compare_drafters, decoding_text, drafters_figure, drafters_table

    try:
        n = forms.in_range("prompts", forms.number("prompts", num_prompts, int), 1, 16)
        kw = form.settings().only(*DECODING)
        # each name as the app's loader takes it (a public app's allow-list applies: hsd/planning.py)
        names = [planning.resolve_name(name) for name in drafter_lines(drafters_text)]
        target = planning.resolve_name(target)
        yield {"status": f"{marks.BUSY} Comparing {len(names)} drafter(s) on {n} prompt(s), one after another: "
                         "each is calibrated, then measured against AR; the time left shows once the first is done."}
        with planning.device_lock(str(hsd.loading.resolve_device(device))):
            for item in compare_drafters(target, names, load_prompts("code", n), algorithm, device=device,
                                         dtype=dtype, **kw):
                if isinstance(item, str):
                    yield {"status": f"{marks.BUSY} {item}"}
        csv = Path(tempfile.mkdtemp(prefix="hsd-")) / "hsd-drafters.csv"
        drafters_table(item, all_rows=True).to_csv(csv, index=False)
        yield {"status": f"{marks.OK} Compared {len(names)} drafter(s) for `{target}` in {item.seconds:.0f} s at "
                         f"{decoding_text(item.settings)}, each against AR in the same run (repeated interleaved). "
                         "Filled bars: measured; hatched: advise's prediction.",
               "table": drafters_table(item), "figure": drafters_figure(item), "csv": str(csv)}
    except Exception as exc:
        yield {"status": error_text(exc)}


def production(target, drafter, algorithm, form: forms.Form, device="auto", dtype="auto") -> str:
    """The vLLM and Transformers configuration that reproduces this pair and settings (the form's drafter
    temperature and draft threshold included), with where each engine differs from what hsd measures
    (:mod:`hsd.production`)."""
    from .production import format_production, production_for_pair

    try:
        kw = form.settings().only(*DECODING)
        pair = planning.load_named_pair(target, drafter, device, dtype)
        return format_production(production_for_pair(pair, algorithm, **kw), markdown=True)
    except Exception as exc:
        return error_text(exc)


# ----------------------------------------------------------------------------- teaching: pictures, checks, sharing

def picture_choices(state: dict | None) -> list[str]:
    """The verified positions of the run in ``state`` that have a rejection-sampling picture, as labels."""
    if not state:
        return []
    return [f"round {r} · position {i + 1}" for r, i in picture.recorded_positions(state["result"])]


def _position(label: str) -> tuple[int, int]:
    parts = str(label).replace("·", " ").split()
    try:
        return int(parts[1]), int(parts[3]) - 1
    except (IndexError, ValueError):
        raise hsd.InvalidSettingError(f"{label!r} is not a position: choose one from the list "
                                      "(round R · position P).") from None


def picture_view(state: dict | None, label) -> tuple[object, str]:
    """The picture of the chosen position and its line of explanation; without a recording, what to do."""
    if not state or not label:
        return None, ("Tick **record distributions** and run again to see, for any verified position, the target's "
                      "p, the proposal, the accepted mass min(p, proposal) and the residual a rejection samples from.")
    try:
        where = _position(label)
        return picture.rejection_figure(state["result"], where), picture.rejection_explanation(state["result"], where)
    except Exception as exc:  # a malformed label or state, a position without a recording
        return None, error_text(exc)


def lossless_steps(target, drafter, algorithm, n, form: forms.Form, device="auto", dtype="auto") -> Iterator[dict]:
    """The live losslessness check (:mod:`hsd.lossless`): the next token drawn ``n`` times with AR and with the
    algorithm, against the target's exact distribution, at the form's settings (one new token); progress, then
    the figure and its one sentence."""
    from . import lossless

    try:
        settings, text = dataclasses.replace(form, max_new_tokens=1).read()
        n = forms.number("draws", n, int) if n not in (None, "") else 0  # 0 or empty: the algorithm's default
        n = forms.in_range("draws", n, 1, lossless.MAX_N) if n else lossless.default_n(algorithm)
        pair = planning.load_named_pair(target, drafter, device, dtype)
        hsd.check_algorithm(pair, algorithm)
        with planning.device_lock(str(pair.target.device)):
            for item in lossless.iter_check(pair, algorithm, n=n, **text, **settings.only(
                    "temperature", "top_k", "top_p", "lookahead", "seed", "drafter_temperature", "draft_threshold",
                    "noise")):
                if isinstance(item, str):
                    yield {"status": f"{marks.BUSY} {item}"}
        yield {"status": f"{marks.OK if item.passed else marks.FAIL} " + lossless.describe(item),
               "figure": lossless.lossless_figure(item)}
    except Exception as exc:
        yield {"status": error_text(exc)}


def export(state: dict | None) -> tuple[str, str]:
    """The run in ``state`` as two files to download: its JSON (reload it here, no models needed) and a
    self-contained HTML page of the coloured output and every round."""
    if not state:
        raise hsd.InvalidSettingError("No run to download yet: run an algorithm first.")
    result = state["result"]
    meta = state.get("meta") or share.run_meta(result, prompt=state.get("prompt"))
    folder = Path(tempfile.mkdtemp(prefix="hsd-run-"))
    (folder / "hsd-run.json").write_text(share.result_to_json(result, meta=meta), encoding="utf-8")
    (folder / "hsd-run.html").write_text(share.result_to_html(result, meta), encoding="utf-8")
    return str(folder / "hsd-run.json"), str(folder / "hsd-run.html")


def load_run(path) -> dict:
    """A run downloaded as JSON, shown again without running models: the same values as :func:`run_steps`'
    last update; a file that is not an hsd run ends as a status only."""
    try:
        if not path:
            raise hsd.InvalidSettingError("Choose a .json file that hsd saved (Download this run).")
        result, meta = share.result_from_json(Path(path).read_bytes())
        state = {"result": result, "prompt": meta.get("prompt"), "special_target": share.specials(meta, "target"),
                 "special_drafter": share.specials(meta, "drafter"), "prompt_special": [], "meta": meta}
        first = viz.interesting_round(result.rounds)
        saved = meta.get("machine") or {}
        where = saved.get("device") or saved.get("cpu") or "the machine it ran on"
        return {"status": f"{marks.SAVED} Shown from a file (no models ran): {viz.run_summary(result, str(where))}"
                          f"\n\nThat run: {run_words(result)}. The form keeps its own settings, and **Run** uses "
                          "them, not these.",
                "state": state, "output": output(state, False), "round": first, "rounds": len(result.rounds),
                "round_view": round_view(state, first),
                "rounds_plot": figures.rounds_figure(result.rounds, f"{result.algorithm}: time and tokens per round")}
    except Exception as exc:
        return {"status": error_text(exc)}
