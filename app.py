"""The hsd lab: pick a target and a drafter, run AR / SD / SLEM / TLI / SLRS, see what was accepted.

``python app.py`` locally, or a Hugging Face Space (``sdk: gradio``, ``app_file: app.py``). This file
only builds widgets and wires them to the library: loading and its planning (:mod:`hsd.loading`,
:mod:`hsd.planning`), form checks (:mod:`hsd.forms`), which algorithms apply (:func:`hsd.availability`),
the report (:mod:`hsd.report`) and the pictures (:mod:`hsd.viz`, :mod:`hsd.figures`); see docs/app.md.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

import hsd  # first: hsd sets the OpenMP wait policy and thread count before torch loads (hsd/threads.py)
import gradio as gr
from hsd import figures, forms, planning, viz
from hsd.bench import run_each
from hsd.loading import GALLERY
from hsd.machine import device_name
from hsd.advise import advise_steps, format_advice
from hsd.report import compatibility_report, explain, format_report

try:  # ZeroGPU: the GPU work runs inside @spaces.GPU; elsewhere the decorator does nothing.
    import spaces
except ImportError:
    spaces = None

log = logging.getLogger("hsd.app")
ZERO_GPU = os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "true")
MAX_NEW_TOKENS = forms.MAX_NEW_TOKENS
STREAM_INTERVAL_S = 0.15
STOP_SETTLE_S = 0.5
PAPER = "https://arxiv.org/abs/2502.05202"
PAIRS = GALLERY
EMBEDDED, BYTES = list(GALLERY)[:2]
ALGOS = list(hsd.ALGORITHMS)  # the registry's order: ar, sd, slem, tli, slrs
COLUMNS_HELP = ("p: the target's probability of the proposed token; q / q′ / ψ: the proposal's probability "
                "(SD / TLI / SLRS; SLEM has none); P(accept) = min(1, p/q), or p for SLEM's exact match.")
#: each handler's output components, by name, in the order build() wires them
NO_RUN = "<i>Run an algorithm to step through its rounds.</i>"
STOPPED = ("⏹ **Stopped.** The output shows what was generated before the stop; a stopped run has no summary, "
           "round view or comparison.")
ADVISE_TOKENS = 64
ADVISE_LOOKAHEADS = (1, 2, 3, 5, 8)
#: projector mode: larger type everywhere, long rounds wrap instead of scrolling sideways
CSS = """
.gradio-container { font-size: 18px !important; }
.gradio-container .prose, .gradio-container label span, .gradio-container button { font-size: 1.05em !important; }
#hsd-round .hsd-round-table, #hsd-round table { white-space: normal; }
"""


class RunOut(NamedTuple):
    """What :func:`run` updates, one field per component (Gradio receives the tuple in this order)."""

    status: object
    output: object
    round: object
    round_view: object
    rounds_plot: object
    state: object


class CompareOut(NamedTuple):
    """What :func:`compare` updates."""

    status: object
    badge: object
    speedup: object
    tokens_time: object
    histogram: object
    positions: object
    time_split: object
    table: object
    csv: object


class CheckOut(NamedTuple):
    """What :func:`check_pair` and :func:`pair_changed` update."""

    report: object
    availability: object
    algorithm: object


def _gpu(duration):
    """``@spaces.GPU(duration=...)`` on ZeroGPU, nothing elsewhere."""
    if spaces is None:
        return lambda fn: fn
    return spaces.GPU(duration=duration)


plan_load, get_pair, _device_lock = planning.plan_named, planning.load_named_pair, planning.device_lock


def _error(exc: BaseException) -> str:
    if isinstance(exc, hsd.HsdError):
        return f"⚠️ **{type(exc).__name__}**: {exc}"
    log.exception("unexpected error in a handler")
    return (f"⚠️ **Unexpected error** ({type(exc).__name__}): {str(exc)[:500]}. The app is still running: change "
            "the settings and try again.")


def _view(state: dict | None, index) -> str:
    if not state:
        return NO_RUN
    rounds = state["result"].rounds
    if not rounds:
        return "<i>No rounds.</i>"
    rnd = rounds[max(0, min(int(index or 0), len(rounds) - 1))]
    return viz.round_html(rnd, algorithm=state["result"].algorithm, special_drafter=state["special_drafter"],
                          special_target=state["special_target"])


def _state(pair: hsd.Pair, result: hsd.Result, prompt: str | None) -> dict:
    return {"result": result, "prompt": prompt, "special_target": dict(pair.target.vocab.special_text),
            "special_drafter": dict(pair.drafter.vocab.special_text) if pair.drafter else {}}


# ----------------------------------------------------------------------------- handlers

def _cleared(cls, **values):
    """A handler's outputs, by component name; what is not named is cleared (a run shows nothing of the last)."""
    blank = {"RunOut": dict(output="", round=gr.update(value=0, maximum=1), round_view=NO_RUN, rounds_plot=None,
                            state=None),
             "CompareOut": dict(badge="", speedup=None, tokens_time=None, histogram=None, positions=None,
                                time_split=None, table=None, csv=None)}[cls.__name__]
    return cls(**{**blank, **values})


def _run_duration(target, drafter, algorithm, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, *a, **k):
    return int(min(300, 30 + 0.15 * int(max_new_tokens)))


@_gpu(_run_duration)
def run(target, drafter, algorithm, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, seed,
        mode="raw", device="auto", dtype="auto", show_rejected=True, progress=gr.Progress(track_tqdm=True)):
    """Stream one generation round by round: status, coloured output, round slider, round view, plot, state."""
    try:
        yield _cleared(RunOut, status="⏳ Checking the settings and the models…")
        kw = forms.generation_kwargs(temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, prompt)
        drafter = drafter if algorithm != "ar" else ""  # AR needs no drafter: don't load one
        plan = plan_load(target, drafter, device, dtype)
        yield _cleared(RunOut, status=f"⏳ Loading (first time only)…\n{plan}")
        pair = get_pair(target, drafter, device, dtype)
        hsd.check_algorithm(pair, algorithm)
        forms.check_room(pair, kw)
        special = pair.target.vocab.special_text
        with _device_lock(str(pair.target.device)):
            rounds, last, result = [], 0.0, None
            for item in hsd.stream(pair, algorithm=algorithm, **kw):
                if isinstance(item, hsd.Result):
                    result = item
                    break
                rounds.append(item)
                if time.perf_counter() - last > STREAM_INTERVAL_S:
                    last = time.perf_counter()
                    html = viz.output_html(rounds, show_rejected=show_rejected, prompt=kw.get("prompt"),
                                           special_text=special)
                    yield _cleared(RunOut, output=html, status=f"▶️ {algorithm}: round {len(rounds)}, "
                                   f"{sum(len(r.emitted) for r in rounds)} tokens… (Stop keeps what is shown)")
        state = _state(pair, result, kw.get("prompt"))
        first = viz.interesting_round(result.rounds)
        yield RunOut(status="✅ " + viz.run_summary(result, device_name(pair.target.device)), state=state,
                     output=viz.output_html(result.rounds, show_rejected=show_rejected, prompt=kw.get("prompt"),
                                            special_text=special),
                     round=gr.update(maximum=max(0, len(result.rounds) - 1), value=first),
                     round_view=_view(state, first),
                     rounds_plot=figures.rounds_figure(result.rounds, f"{algorithm}: time and tokens per round"))
    except Exception as exc:  # every failure ends as a message to this user; the app stays up
        yield _cleared(RunOut, status=_error(exc))


def show_round(state, index):
    """The token-boundary view of one round of the last run."""
    try:
        return _view(state, index)
    except Exception as exc:
        return _error(exc)


def step_round(state, index, delta):
    """The round index after a ◀/▶ click; a malformed index or state warns and leaves the slider as it is."""
    if not state:
        return 0
    try:
        index, delta = forms.number("round", index or 0, int), forms.number("step", delta, int)
        return max(0, min(index + delta, len(state["result"].rounds) - 1))
    except (hsd.HsdError, KeyError, TypeError, AttributeError) as exc:
        gr.Warning(f"Cannot step to another round: {exc if isinstance(exc, hsd.HsdError) else 'no run to step through'}.")
        return gr.update()


def rerender(state, show_rejected):
    """The coloured output again, with or without the rejected drafts; a malformed state warns and changes nothing."""
    if not state:
        return gr.update()
    try:
        return viz.output_html(state["result"].rounds, show_rejected=show_rejected, prompt=state["prompt"],
                               special_text=state["special_target"])
    except (KeyError, TypeError, AttributeError):
        gr.Warning("Cannot redraw the output: this page's run state is malformed. Run an algorithm again.")
        return gr.update()


def _compare_duration(target, drafter, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, *a, **k):
    return int(min(600, 60 + 0.15 * int(max_new_tokens) * len(hsd.ALGORITHMS) * 3))


@_gpu(_compare_duration)
def compare(target, drafter, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode="raw",
            device="auto", dtype="auto", progress=gr.Progress(track_tqdm=True)):
    """AR and every applicable algorithm, same prompt, settings and seed, repeated interleaved; then the figures."""
    try:
        yield _cleared(CompareOut, status="⏳ Checking the settings and the models…")
        kw = forms.generation_kwargs(temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, prompt)
        plan = plan_load(target, drafter, device, dtype)
        yield _cleared(CompareOut, status=f"⏳ Loading (first time only)…\n{plan}")
        pair = get_pair(target, drafter, device, dtype)
        forms.check_room(pair, kw)
        with _device_lock(str(pair.target.device)):
            for progress in run_each(pair, hsd.usable_algorithms(pair), **kw):
                if isinstance(progress, str):
                    yield _cleared(CompareOut, status=progress)
        results = progress.results
        device = f"{device_name(pair.target.device)}, {results['ar'].settings['dtype']}"
        table = viz.summary_table(results, progress)
        csv = Path(tempfile.mkdtemp(prefix="hsd-")) / "hsd-compare.csv"
        table.to_csv(csv, index=False)
        yield CompareOut(status=viz.compare_status(progress, device, kw), badge=viz.lossless_badge(results),
                         speedup=figures.speedup_figure(results, device, progress),
                         tokens_time=figures.tokens_time_figure(results),
                         histogram=figures.acceptance_histogram_figure(results),
                         positions=figures.position_acceptance_figure(results),
                         time_split=figures.time_split_figure(results), table=table, csv=str(csv))
    except Exception as exc:
        yield _cleared(CompareOut, status=_error(exc))


def check_pair(target, drafter, device="auto", dtype="auto", algorithm=None):
    """What will be loaded, which algorithms apply (:func:`hsd.availability`, the one source the radio, the
    examples and the presets follow) and why, what SLRS costs, and the drafter-compatibility report."""
    try:
        plan = plan_load(target, drafter, device, dtype)
        pair = get_pair(target, drafter, device, dtype)
        usable = hsd.usable_algorithms(pair)
        choices = gr.update(choices=usable, value=algorithm if algorithm in usable else forms.default_algorithm(usable))
        if pair.drafter is None:
            return CheckOut(report=f"{plan}\n\nNo drafter: only **ar** runs.", availability="- ✅ **ar**",
                            algorithm=choices)
        report = compatibility_report(pair)
        return CheckOut(report=f"{plan}\n\n```text\n{format_report(report)}\n```\n\n{explain(report)}",
                        availability=viz.availability_markdown(hsd.availability(pair), viz.cost_notes(report)),
                        algorithm=choices)
    except Exception as exc:
        return CheckOut(report=_error(exc), availability=_error(exc), algorithm=gr.update())


def pair_changed(target, drafter, device="auto", dtype="auto", algorithm=None):
    """After a preset or an example: check the pair at once where that downloads nothing (local directories,
    loaded models), so the algorithm choice never offers what the check rejects; otherwise say what would
    be loaded and offer every algorithm until **Check pair**."""
    if planning.loadable_offline(planning.resolve_name(target), planning.resolve_name(drafter), device, dtype):
        return check_pair(target, drafter, device, dtype, algorithm)
    text, choices = describe(target, drafter, device, dtype)
    return CheckOut(report=text, availability="Not checked yet: press **Check pair** to see which algorithms apply.",
                    algorithm=choices)


def advise_pair(target, drafter, prompt, temperature, device="auto", dtype="auto") -> str:
    """:func:`advise_live`'s final text."""
    *_, last = advise_live(target, drafter, prompt, temperature, device, dtype)
    return last


@_gpu(300)
def advise_live(target, drafter, prompt, temperature, device="auto", dtype="auto"):
    """`hsd advise` on this pair and prompt, its progress first: measured acceptance and costs, the predicted
    speedup of every applicable algorithm (SLRS included) at each lookahead it calibrates, and a
    recommendation."""
    try:
        forms.check_prompt(prompt)
        temperature = forms.in_range("temperature", forms.number("temperature", temperature, float),
                                     *forms.TEMPERATURE, " (0 = greedy)")
        pair = get_pair(target, drafter, device, dtype)
        if pair.drafter is None:
            yield "No drafter: only **ar** runs, there is nothing to advise."
            return
        names = [a for a in hsd.usable_algorithms(pair) if a != "ar"]
        lines = []
        with _device_lock(str(pair.target.device)):
            for item in advise_steps(pair, [prompt], temperature=temperature, max_new_tokens=ADVISE_TOKENS,
                                     algorithms=names, lookaheads=ADVISE_LOOKAHEADS):
                if isinstance(item, str):
                    lines.append(item)
                    yield "⏳ Advise: " + "\n\n".join(lines[-3:])
        yield (f"**{item['recommendation']['text']}**\n\nCalibrated on this prompt ({ADVISE_TOKENS} new tokens) "
               f"at temperature {temperature:g}, at each lookahead in the table; a prediction, not a "
               f"measurement: **Compare** measures.\n\n```text\n{format_advice(item)}\n```")
    except Exception as exc:
        yield _error(exc)


class ExampleOut(NamedTuple):
    """What :func:`example_chosen` fills: the form, and the pair check in the same update (so the algorithm
    choice and the verdict never disagree, even for a moment)."""

    preset: object
    target: object
    drafter: object
    prompt: object
    algorithm: object
    temperature: object
    lookahead: object
    max_new_tokens: object
    report: object
    availability: object


def example_chosen(index, device="auto", dtype="auto"):
    """Fill the form with example ``index`` and check its pair as :func:`pair_changed` does."""
    _, preset, text, algorithm, temperature, lookahead, max_new_tokens = EXAMPLES[int(index)]
    target, drafter = PAIRS[preset]
    check = pair_changed(target, drafter, device, dtype, algorithm)
    choice = check.algorithm if "value" in check.algorithm else {**check.algorithm, "value": algorithm}
    return ExampleOut(preset, target, drafter, text, choice, temperature, lookahead, max_new_tokens, check.report,
                      check.availability)


def stopped(status, advice):
    """Stop: a run, comparison or advice in progress says it stopped; a finished one stays as it is. Runs after
    the cancel, a moment later, so an update the cancelled run had already sent cannot overwrite it."""
    time.sleep(STOP_SETTLE_S)
    busy = ("⏳", "▶️")
    return (STOPPED if str(status or "").startswith(busy) else gr.update(),
            "⏹ Advise stopped." if str(advice or "").startswith(busy) else gr.update())


def preset_changed(label):
    target, drafter = PAIRS.get(label, ("", ""))
    return target, drafter


def describe(target, drafter, device="auto", dtype="auto"):
    """What a pair would load (Hub metadata when reachable), before anything is downloaded; every algorithm
    is offered again until **Check pair** narrows the choice."""
    try:
        text = plan_load(target, drafter, device, dtype) + "\n\nPress **Check pair** to load it and see which " \
            "algorithms apply."
    except Exception as exc:
        text = _error(exc)
    return text, gr.update(choices=ALGOS)


def token_room(target, drafter, prompt, mode, device="auto", dtype="auto"):
    """The max-new-tokens box's range for this pair and prompt (the target's context minus the prompt)."""
    try:
        if not planning.loadable_offline(planning.resolve_name(target), planning.resolve_name(drafter), device,
                                         dtype):
            return gr.update(info=f"1..{MAX_NEW_TOKENS}; the pair's context may allow fewer")
        kw = forms.generation_kwargs(0, 0, 1.0, 1, 1, 0, mode, prompt)
        return gr.update(info=f"1..{forms.room(get_pair(target, drafter, device, dtype), kw)} for this pair and prompt")
    except Exception:  # noqa: BLE001 - an empty prompt or a missing model: the run will say why
        return gr.update()


# ----------------------------------------------------------------------------- layout

BAD_DRAFTER = "Llama-3.1-8B-Instruct ← Qwen2.5-0.5B-Instruct (bad drafter)"
#: (label, preset, prompt, algorithm, temperature, lookahead, max new tokens); the label states every setting
EXAMPLES = [  # the label states every setting the example fills, and is short enough to be shown whole
    # prompts end at the end of a line: the target's BPE merges a newline with the next line's indentation, so a
    # prompt ending in a bare newline means "unindented line or end of file" to it (docs/embedded-pair.md)
    ("slem · T=0 · k=5 · 96 tokens: def fibonacci(n):", EMBEDDED, "def fibonacci(n):", "slem", 0, 5, 96),
    ("slem · T=0 · k=5 · 96 tokens: class Stack:", EMBEDDED, "class Stack:\n    def __init__(self):", "slem", 0, 5,
     96),
    # on the embedded pair, sampling does not pay (docs/embedded-pair.md): a classroom should see that too
    ("slower than AR: tli · T=1 · k=5 · 96 tokens", EMBEDDED, "import os\n\n\ndef read_lines(path):",
     "tli", 1.0, 5, 96),
    ("slower than AR: slrs · bytes · T=0 · k=5 · 64 tokens", BYTES, "def fibonacci(n):", "slrs", 0, 5,
     64),
    ("bad drafter (GPU) · slem · T=0 · k=5 · 64 tokens", BAD_DRAFTER,
     "Summarise the plot of Hamlet in three sentences.", "slem", 0, 5, 64),
]


def build() -> gr.Blocks:
    default_target, default_drafter = PAIRS[EMBEDDED]
    with gr.Blocks(title="hsd · speculative decoding across vocabularies") as demo:
        gr.Markdown(f"# hsd · lossless speculative decoding across different vocabularies\nA small drafter "
                    "proposes, a big target verifies, and the output is exactly what the target alone would have "
                    f"produced, even when the two models use different tokenizers. Algorithms from Timor et al., "
                    f"ICML 2025 ([arXiv 2502.05202]({PAPER})). The embedded pair is a pair of small demo models.")
        state = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1, min_width=320):
                preset = gr.Dropdown(list(PAIRS), value=EMBEDDED, label="Model pair (target ← drafter)")
                target = gr.Textbox(default_target, label="Target (Hub id or local directory)")
                drafter = gr.Textbox(default_drafter, label="Drafter (empty: AR only)")
                algorithm = gr.Radio(ALGOS, value="slem", label="Algorithm", elem_id="hsd-algorithm")
                check_btn = gr.Button("Check pair", size="sm")
                availability = gr.Markdown("Checking the pair…", elem_id="hsd-availability")
                with gr.Accordion("Decoding settings", open=True):
                    temperature = gr.Number(0, label="temperature", elem_id="hsd-temperature", info=f"0 = greedy; {forms.TEMPERATURE[0]:g}.."
                                            f"{forms.TEMPERATURE[1]:g}", step=0.1)
                    lookahead = gr.Number(5, label="lookahead k", precision=0, step=1,
                                          info=f"{forms.LOOKAHEAD[0]}..{forms.LOOKAHEAD[1]}. {forms.LOOKAHEAD_INFO}")
                    max_new_tokens = gr.Number(96, label="max new tokens", precision=0, step=8,
                                               info=f"1..{MAX_NEW_TOKENS}", elem_id="hsd-max-new-tokens")
                    with gr.Row():
                        top_k = gr.Number(0, label="top-k (0 = off)", precision=0, minimum=0)
                        top_p = gr.Number(1.0, label="top-p", minimum=0.01, maximum=1.0)
                        seed = gr.Number(0, label="seed", precision=0)
                with gr.Accordion("Prompt format, device, dtype", open=False):
                    mode = gr.Radio(["raw", "chat"], value="raw", label="prompt",
                                    info="chat: each model's own chat template")
                    device = gr.Dropdown(["auto", "cpu", "cuda"], value="auto", label="device")
                    dtype = gr.Dropdown(["auto", "float32", "bfloat16", "float16"], value="auto", label="dtype")
            with gr.Column(scale=3):
                prompt = gr.Textbox("def fibonacci(n):", lines=4, label="Prompt")
                with gr.Row():
                    run_btn = gr.Button("Run", variant="primary")
                    compare_btn = gr.Button("Compare all algorithms")
                    stop_btn = gr.Button("Stop", variant="stop")
                status = gr.Markdown(elem_id="hsd-status")
                with gr.Tabs():
                    with gr.Tab("Output"):
                        show_rejected = gr.Checkbox(False, label="show rejected drafts (struck through)",
                                                    info="on by default for greedy runs only")
                        output = gr.HTML(elem_id="hsd-output")
                        rounds_plot = gr.Plot(label="Rounds", elem_id="hsd-rounds-plot")
                    with gr.Tab("Rounds: token boundaries"):
                        gr.Markdown("Top: the drafter's tokens. Middle: the draft string. Bottom: the target's "
                                    f"proposed tokens and their verification. {COLUMNS_HELP}")
                        with gr.Row():
                            prev_btn = gr.Button("◀ previous round", size="sm")
                            round_idx = gr.Slider(0, 1, value=0, step=1, label="round")
                            next_btn = gr.Button("next round ▶", size="sm")
                        round_view = gr.HTML(NO_RUN, elem_id="hsd-round")
                    with gr.Tab("Compare"), gr.Column(elem_id="hsd-compare"):
                        badge = gr.HTML(elem_id="hsd-badge")
                        with gr.Row():
                            speedup = gr.Plot(label="speedup", elem_id="hsd-speedup")
                            tokens_time = gr.Plot(label="tokens vs time")
                        with gr.Row():
                            histogram = gr.Plot(label="acceptance length")
                            positions = gr.Plot(label="acceptance by position")
                        time_split = gr.Plot(label="time split")
                        table = gr.DataFrame(label="summary", interactive=False)
                        csv = gr.File(label="summary as CSV")
                    with gr.Tab("Compatibility"):
                        report = gr.Markdown("Press **Check pair**.")
                        advise_btn = gr.Button("Advise: predict the best algorithm and lookahead", size="sm")
                        advice = gr.Markdown(elem_id="hsd-advice")
                    with gr.Tab("Algorithms"):
                        gr.Markdown("\n\n".join(hsd.ALGORITHMS[a].about for a in ALGOS if hsd.ALGORITHMS[a].about)
                                    + "\n\nAll are lossless: at temperature 0 the output equals AR's token for "
                                      "token (the Compare tab checks it); when sampling, the output has exactly the "
                                      "target's distribution.")
                examples = gr.Dataset(
                    components=[prompt], samples=[[text] for _, _, text, *_ in EXAMPLES], type="index",
                    sample_labels=[label for label, *_ in EXAMPLES], elem_id="hsd-examples",
                    label="Examples: greedy code completion (where SLEM pays on the embedded pair), sampling and "
                          "SLRS with a byte-level drafter (where it does not), a bad drafter (needs a GPU and a Hub "
                          "token)")
        inputs = [temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, device, dtype]
        pair_in, check_out = [target, drafter, device, dtype, algorithm], [report, availability, algorithm]
        room_in = [target, drafter, prompt, mode, device, dtype]
        gpu = dict(concurrency_id="gpu", concurrency_limit=1)
        preset.input(preset_changed, preset, [target, drafter], api_name="preset").then(
            pair_changed, pair_in, check_out, api_visibility="private", **gpu).then(
            token_room, room_in, max_new_tokens, api_visibility="private")
        examples.click(example_chosen, [examples, device, dtype],
                       [preset, target, drafter, prompt, algorithm, temperature, lookahead, max_new_tokens, report,
                        availability], api_visibility="private", **gpu).then(
            token_room, room_in, max_new_tokens, api_visibility="private")
        for box in (target, drafter):  # a new pair: every algorithm is offered until Check pair narrows them
            box.input(lambda: (gr.update(choices=ALGOS), "Pair changed: press **Check pair** to see which "
                               "algorithms apply."), None, [algorithm, availability], api_visibility="private",
                      queue=False)
        temperature.change(lambda t: gr.update(value=isinstance(t, (int, float)) and t == 0), temperature,
                           show_rejected, api_visibility="private", queue=False)
        demo.load(check_pair, pair_in, check_out, api_visibility="private", **gpu).then(
            token_room, room_in, max_new_tokens, api_visibility="private")
        run_event = run_btn.click(run, [target, drafter, algorithm, prompt, *inputs, show_rejected],
                                  [status, output, round_idx, round_view, rounds_plot, state], api_name="run", **gpu)
        compare_event = compare_btn.click(compare, [target, drafter, prompt, *inputs],
                                          [status, badge, speedup, tokens_time, histogram, positions, time_split,
                                           table, csv], api_name="compare", **gpu)
        check_btn.click(check_pair, pair_in, check_out, api_name="check", **gpu).then(
            token_room, room_in, max_new_tokens, api_visibility="private")
        prompt.blur(token_room, room_in, max_new_tokens, api_visibility="private")
        advise_event = advise_btn.click(advise_live, [target, drafter, prompt, temperature, device, dtype], advice,
                                        api_name="advise", **gpu)
        stop_btn.click(None, cancels=[run_event, compare_event, advise_event], api_visibility="private").then(
            stopped, [status, advice], [status, advice], api_visibility="private", concurrency_limit=None)
        round_idx.change(show_round, [state, round_idx], round_view, api_name="round", concurrency_limit=4)
        prev_btn.click(lambda s, i: step_round(s, i, -1), [state, round_idx], round_idx, api_name="prev_round")
        next_btn.click(lambda s, i: step_round(s, i, 1), [state, round_idx], round_idx, api_name="next_round")
        show_rejected.change(rerender, [state, show_rejected], output, api_name="rerender", concurrency_limit=4)
    demo.queue(default_concurrency_limit=1, max_size=32)
    return demo


demo = build()

if ZERO_GPU:  # ZeroGPU wants models placed on cuda at module level; the embedded pair is tiny
    try:
        get_pair(*PAIRS[EMBEDDED], "cuda", "auto")
    except Exception:  # noqa: BLE001 - the app still starts; the first run reports the problem
        log.exception("could not pre-place the embedded pair")

if __name__ == "__main__":
    demo.launch(theme=gr.themes.Soft(), css=CSS)
