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
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import hsd  # first: hsd sets the OpenMP wait policy and thread count before torch loads (hsd/threads.py)
import gradio as gr
from hsd import figures, forms, planning, viz
from hsd.bench import run_each
from hsd.loading import GALLERY
from hsd.machine import device_name
from hsd.report import compatibility_report, explain, format_report

try:  # ZeroGPU: the GPU work runs inside @spaces.GPU; elsewhere the decorator does nothing.
    import spaces
except ImportError:
    spaces = None

log = logging.getLogger("hsd.app")
ZERO_GPU = os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "true")
MAX_NEW_TOKENS = forms.MAX_NEW_TOKENS
STREAM_INTERVAL_S = 0.15
LOCK_TIMEOUT_S = 600
PAPER = "https://arxiv.org/abs/2502.05202"
PAIRS = GALLERY
EMBEDDED, BYTES = list(GALLERY)[:2]
ALGOS = list(hsd.ALGORITHMS)  # the registry's order: ar, sd, slem, tli, slrs
COLUMNS_HELP = ("p: the target's probability of the proposed token; q / q′ / ψ: the proposal's probability "
                "(SD / TLI / SLRS; SLEM has none); P(accept) = min(1, p/q), or p for SLEM's exact match.")
#: each handler's output components, by name, in the order build() wires them
RUN_OUT = ("status", "output", "round", "round_view", "rounds_plot", "state")
COMPARE_OUT = ("status", "badge", "speedup", "tokens_time", "histogram", "positions", "time_split", "table", "csv")
CHECK_OUT = ("report", "availability", "algorithm")


def _outputs(names: tuple[str, ...], **values) -> tuple:
    """A handler's update, given by component name; components not named are left as they are."""
    return tuple(values[n] if n in values else gr.update() for n in names)


def _gpu(duration):
    """``@spaces.GPU(duration=...)`` on ZeroGPU, nothing elsewhere."""
    if spaces is None:
        return lambda fn: fn
    return spaces.GPU(duration=duration)


_LOAD_LOCK = threading.Lock()
_DEVICE_LOCKS: dict[str, threading.Lock] = {}


@contextmanager
def _device_lock(device: str):
    """One run per device at a time: two users never share a model object mid-run, and timings stay clean."""
    with _LOAD_LOCK:
        lock = _DEVICE_LOCKS.setdefault(device, threading.Lock())
    if not lock.acquire(timeout=LOCK_TIMEOUT_S):
        raise hsd.ResourceLimitError(f"The {device} device has been busy for {LOCK_TIMEOUT_S} s: try again shortly.")
    try:
        yield
    finally:
        lock.release()


def plan_load(target: str, drafter: str, device: str = "auto", dtype: str = "auto") -> str:
    return planning.plan_load(planning.resolve_name(target), planning.resolve_name(drafter), device, dtype)


def get_pair(target: str, drafter: str, device: str, dtype: str) -> hsd.Pair:
    """``hsd.load_pair`` (its cache keeps one Pair per loaded models) for the names typed in the form."""
    target, drafter = planning.resolve_name(target), planning.resolve_name(drafter)
    if not target:
        raise hsd.ModelNotFoundError("No target model: choose a preset or type a Hub id or a local directory.")
    with _LOAD_LOCK:
        return hsd.load_pair(target, drafter or None, device=device, dtype=dtype)


def _error(exc: BaseException) -> str:
    if isinstance(exc, hsd.HsdError):
        return f"⚠️ **{type(exc).__name__}**: {exc}"
    log.exception("unexpected error in a handler")
    return (f"⚠️ **Unexpected error** ({type(exc).__name__}): {str(exc)[:500]}. The app is still running: change "
            "the settings and try again.")


def _view(state: dict | None, index) -> str:
    if not state:
        return "<i>Run an algorithm to step through its rounds.</i>"
    rounds = state["result"].rounds
    if not rounds:
        return "<i>No rounds.</i>"
    rnd = rounds[max(0, min(int(index or 0), len(rounds) - 1))]
    return viz.round_html(rnd, algorithm=state["result"].algorithm, special_drafter=state["special_drafter"],
                          special_target=state["special_target"])


def _state(pair: hsd.Pair, result: hsd.Result, prompt: str | None) -> dict:
    return {"result": result, "prompt": prompt, "special_target": dict(pair.target.vocab.special_text),
            "special_drafter": dict(pair.drafter.vocab.special_text) if pair.drafter else {}}


def _availability(pair: hsd.Pair) -> str:
    return "\n".join(f"- ✅ **{name}**" if why is None else f"- ⛔ **{name}**: {why}"
                     for name, why in hsd.availability(pair).items())


# ----------------------------------------------------------------------------- handlers

def _run_duration(target, drafter, algorithm, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, *a, **k):
    return int(min(300, 30 + 0.15 * int(max_new_tokens)))


@_gpu(_run_duration)
def run(target, drafter, algorithm, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, seed,
        mode="raw", device="auto", dtype="auto", show_rejected=True, progress=gr.Progress(track_tqdm=True)):
    """Stream one generation round by round: status, coloured output, round slider, round view, plot, state."""
    try:
        kw = forms.generation_kwargs(temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, prompt)
        yield _outputs(RUN_OUT, status="⏳ Checking the models…", state=None)
        drafter = drafter if algorithm != "ar" else ""  # AR needs no drafter: don't load one
        plan = plan_load(target, drafter, device, dtype)
        yield _outputs(RUN_OUT, status=f"⏳ Loading (first time only)…\n{plan}", state=None)
        pair = get_pair(target, drafter, device, dtype)
        hsd.check_algorithm(pair, algorithm)
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
                    n = sum(len(r.emitted) for r in rounds)
                    html = viz.output_html(rounds, show_rejected=show_rejected, prompt=kw.get("prompt"),
                                           special_text=special)
                    yield _outputs(RUN_OUT, status=f"▶️ {algorithm}: round {len(rounds)}, {n} tokens…", output=html,
                                   state=None)
        status = "✅ " + viz.run_summary(result, device_name(pair.target.device))
        state = _state(pair, result, kw.get("prompt"))
        first = viz.interesting_round(result.rounds)
        yield _outputs(RUN_OUT, status=status, state=state, round_view=_view(state, first),
                       output=viz.output_html(result.rounds, show_rejected=show_rejected, prompt=kw.get("prompt"),
                                              special_text=special),
                       round=gr.update(maximum=max(0, len(result.rounds) - 1), value=first),
                       rounds_plot=figures.rounds_figure(result.rounds, f"{algorithm}: time and tokens per round"))
    except Exception as exc:  # every failure ends as a message to this user; the app stays up
        yield _outputs(RUN_OUT, status=_error(exc), state=None)


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
    return int(min(600, 40 + 0.15 * int(max_new_tokens) * len(hsd.ALGORITHMS)))


@_gpu(_compare_duration)
def compare(target, drafter, prompt, temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode="raw",
            device="auto", dtype="auto", progress=gr.Progress(track_tqdm=True)):
    """AR and every applicable algorithm, same prompt, settings and seed, after a warm-up; then the figures."""
    try:
        kw = forms.generation_kwargs(temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, prompt)
        yield _outputs(COMPARE_OUT, status="⏳ Checking the models…")
        plan = plan_load(target, drafter, device, dtype)
        yield _outputs(COMPARE_OUT, status=f"⏳ Loading (first time only)…\n{plan}")
        pair = get_pair(target, drafter, device, dtype)
        names = hsd.usable_algorithms(pair)
        with _device_lock(str(pair.target.device)):
            for progress in run_each(pair, names, **kw):
                if isinstance(progress, str):
                    yield _outputs(COMPARE_OUT, status=progress)
        results, failed = progress.results, progress.failed
        device = f"{device_name(pair.target.device)}, {results['ar'].settings['dtype']}"
        table = viz.summary_table(results, progress)
        csv = Path(tempfile.mkdtemp(prefix="hsd-")) / "hsd-compare.csv"
        table.to_csv(csv, index=False)
        skipped = [a for a in hsd.ALGORITHMS if a not in results and a not in failed]
        status = (f"✅ Compared {', '.join(results)} on {device}, temperature {kw['temperature']}, seed "
                  f"{kw['seed']}" + (f" · not applicable here: {', '.join(skipped)}" if skipped else "")
                  + f"\n\n{viz.timing_note(progress)}"
                  + "".join(f"\n\n⚠️ {name} stopped: {msg}" for name, msg in failed.items()))
        yield _outputs(COMPARE_OUT, status=status, badge=viz.lossless_badge(results),
                       speedup=figures.speedup_figure(results, device, progress),
                       tokens_time=figures.tokens_time_figure(results),
                       histogram=figures.acceptance_histogram_figure(results),
                       positions=figures.position_acceptance_figure(results),
                       time_split=figures.time_split_figure(results), table=table, csv=str(csv))
    except Exception as exc:
        yield _outputs(COMPARE_OUT, status=_error(exc))


def check_pair(target, drafter, device="auto", dtype="auto", algorithm=None):
    """What will be loaded, which algorithms apply and why, and the drafter-compatibility report.

    Also returns the algorithm choices narrowed to those that apply (the others are listed with the reason).
    """
    try:
        plan = plan_load(target, drafter, device, dtype)
        pair = get_pair(target, drafter, device, dtype)
        usable = hsd.usable_algorithms(pair)
        choices = gr.update(choices=usable, value=algorithm if algorithm in usable else _default_algorithm(usable))
        if pair.drafter is None:
            return _outputs(CHECK_OUT, report=f"{plan}\n\nNo drafter: only **ar** runs.", availability="- ✅ **ar**",
                            algorithm=choices)
        report = compatibility_report(pair)
        return _outputs(CHECK_OUT, report=f"{plan}\n\n```text\n{format_report(report)}\n```\n\n{explain(report)}",
                        availability=_availability(pair), algorithm=choices)
    except Exception as exc:
        return _outputs(CHECK_OUT, report=_error(exc), availability=_error(exc))


@_gpu(120)
def advise_pair(target, drafter, prompt, temperature, device="auto", dtype="auto"):
    """`hsd advise` on this pair and prompt: measured acceptance and costs, predicted speedup per algorithm
    and lookahead 1..12, and a recommendation (or the plain statement that nothing beats AR)."""
    from hsd.advise import advise, format_advice

    try:
        forms.check_prompt(prompt)
        temperature = forms.number("temperature", temperature, float)
        pair = get_pair(target, drafter, device, dtype)
        if pair.drafter is None:
            return "No drafter: only **ar** runs, there is nothing to advise."
        with _device_lock(str(pair.target.device)):
            advice = advise(pair, [prompt], temperature=temperature, max_new_tokens=64, log=lambda *_: None)
        return (f"**{advice['recommendation']['text']}**\n\nCalibrated on this prompt (64 new tokens) at "
                f"temperature {temperature:g}; a prediction, not a measurement: **Compare** measures.\n\n"
                f"```text\n{format_advice(advice)}\n```")
    except Exception as exc:
        return _error(exc)


def _default_algorithm(choices: list[str]) -> str:
    return next((a for a in ("slem", "sd", "ar") if a in choices), choices[0])


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


# ----------------------------------------------------------------------------- layout

def build() -> gr.Blocks:
    default_target, default_drafter = PAIRS[EMBEDDED]
    with gr.Blocks(title="hsd · speculative decoding across vocabularies") as demo:
        gr.Markdown(f"# hsd · lossless speculative decoding across different vocabularies\nA small drafter "
                    "proposes, a big target verifies, and the output is exactly what the target alone would have "
                    f"produced, even when the two models use different tokenizers. Algorithms from Timor et al., "
                    f"ICML 2025 ([arXiv 2502.05202]({PAPER})).")
        state = gr.State(None)
        with gr.Row():
            with gr.Column(scale=1, min_width=320):
                preset = gr.Dropdown(list(PAIRS), value=EMBEDDED, label="Model pair (target ← drafter)")
                target = gr.Textbox(default_target, label="Target (Hub id or local directory)")
                drafter = gr.Textbox(default_drafter, label="Drafter (empty: AR only)")
                algorithm = gr.Radio(ALGOS, value="slem" if "slem" in ALGOS else ALGOS[0], label="Algorithm")
                with gr.Accordion("Decoding settings", open=True):
                    temperature = gr.Slider(0, 2, value=0, step=0.05, label="temperature (0 = greedy)")
                    lookahead = gr.Slider(1, 16, value=5, step=1, label="lookahead k (drafted tokens per round)")
                    max_new_tokens = gr.Slider(1, MAX_NEW_TOKENS, value=96, step=1, label="max new tokens")
                    with gr.Row():
                        top_k = gr.Number(0, label="top-k (0 = off)", precision=0, minimum=0)
                        top_p = gr.Number(1.0, label="top-p", minimum=0.01, maximum=1.0)
                        seed = gr.Number(0, label="seed", precision=0)
                with gr.Accordion("Prompt format, device, dtype", open=False):
                    mode = gr.Radio(["raw", "chat"], value="raw", label="prompt",
                                    info="chat: each model's own chat template")
                    device = gr.Dropdown(["auto", "cpu", "cuda"], value="auto", label="device")
                    dtype = gr.Dropdown(["auto", "float32", "bfloat16", "float16"], value="auto", label="dtype")
                check_btn = gr.Button("Check pair")
                availability = gr.Markdown("Press **Check pair** to see which algorithms apply.")
            with gr.Column(scale=3):
                prompt = gr.Textbox("def fibonacci(n):\n", lines=4, label="Prompt")
                with gr.Row():
                    run_btn = gr.Button("Run", variant="primary")
                    compare_btn = gr.Button("Compare all algorithms")
                    stop_btn = gr.Button("Stop", variant="stop")
                status = gr.Markdown(elem_id="hsd-status")
                with gr.Tabs():
                    with gr.Tab("Output"):
                        show_rejected = gr.Checkbox(True, label="show rejected drafts (struck through)")
                        output = gr.HTML(elem_id="hsd-output")
                        rounds_plot = gr.Plot(label="Rounds")
                    with gr.Tab("Rounds: token boundaries"):
                        gr.Markdown("Top: the drafter's tokens. Middle: the draft string. Bottom: the target's "
                                    f"proposed tokens and their verification. {COLUMNS_HELP}")
                        with gr.Row():
                            prev_btn = gr.Button("◀ previous round", size="sm")
                            round_idx = gr.Slider(0, 1, value=0, step=1, label="round")
                            next_btn = gr.Button("next round ▶", size="sm")
                        round_view = gr.HTML(elem_id="hsd-round")
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
                        advice = gr.Markdown()
                    with gr.Tab("Algorithms"):
                        gr.Markdown("\n\n".join(hsd.ALGORITHMS[a].about for a in ALGOS if hsd.ALGORITHMS[a].about)
                                    + "\n\nAll are lossless: at temperature 0 the output equals AR's token for "
                                      "token (the Compare tab checks it); when sampling, the output has exactly the "
                                      "target's distribution.")
                gr.Examples(
                    examples=[
                        [EMBEDDED, *PAIRS[EMBEDDED], "def fibonacci(n):\n", "slem", 0, 5, 96],
                        [EMBEDDED, *PAIRS[EMBEDDED], "import os\n\n\ndef read_lines(path):\n", "tli", 1.0, 5, 96],
                        [EMBEDDED, *PAIRS[EMBEDDED], "class Stack:\n    def __init__(self):\n", "slem", 0.8, 8, 96],
                        [BYTES, *PAIRS[BYTES], "def fibonacci(n):\n", "slrs" if "slrs" in ALGOS else "slem", 1.0, 5, 64],
                        ["Llama-3.1-8B-Instruct ← Qwen2.5-0.5B-Instruct (bad drafter)",
                         *PAIRS["Llama-3.1-8B-Instruct ← Qwen2.5-0.5B-Instruct (bad drafter)"],
                         "Summarise the plot of Hamlet in three sentences.", "slem", 0, 5, 64],
                    ],
                    inputs=[preset, target, drafter, prompt, algorithm, temperature, lookahead, max_new_tokens],
                    label="Examples: greedy code completion (SLEM), sampling where TLI accepts more than SLEM, "
                          "a long lookahead, SLRS with a byte-level drafter, and a bad drafter (needs a GPU and a "
                          "Hub token)",
                )
        inputs = [temperature, top_k, top_p, lookahead, max_new_tokens, seed, mode, device, dtype]
        preset.change(preset_changed, preset, [target, drafter], api_name="preset").then(
            describe, [target, drafter, device, dtype], [availability, algorithm], api_name="describe")
        for box in (target, drafter):  # a new pair: offer every algorithm until Check pair narrows them again
            box.input(lambda: gr.update(choices=ALGOS), None, algorithm, api_visibility="private", queue=False)
        demo.load(check_pair, [target, drafter, device, dtype, algorithm], [report, availability, algorithm],
                  api_visibility="private",
                  concurrency_id="gpu", concurrency_limit=1)
        run_event = run_btn.click(run, [target, drafter, algorithm, prompt, *inputs, show_rejected],
                                  [status, output, round_idx, round_view, rounds_plot, state], api_name="run",
                                  concurrency_id="gpu", concurrency_limit=1)
        compare_event = compare_btn.click(compare, [target, drafter, prompt, *inputs],
                                          [status, badge, speedup, tokens_time, histogram, positions, time_split,
                                           table, csv], api_name="compare", concurrency_id="gpu",
                                          concurrency_limit=1)
        stop_btn.click(None, cancels=[run_event, compare_event], api_visibility="private")
        check_btn.click(check_pair, [target, drafter, device, dtype, algorithm], [report, availability, algorithm],
                        api_name="check",
                        concurrency_id="gpu", concurrency_limit=1)
        advise_btn.click(advise_pair, [target, drafter, prompt, temperature, device, dtype], advice, api_name="advise",
                         concurrency_id="gpu", concurrency_limit=1)
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
    demo.launch(theme=gr.themes.Soft())
