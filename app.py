"""The hsd lab: pick a target and a drafter, run AR / SD / SLEM / TLI / SLRS, see what was accepted.

``python app.py`` locally, or a Hugging Face Space (``sdk: gradio``, ``app_file: app.py``). This file only builds
widgets and wires them to the library: what each button does is :mod:`hsd.lab` (plain values, no widgets), which
rests on loading and its planning (:mod:`hsd.planning`), form checks (:mod:`hsd.forms`), the report
(:mod:`hsd.report`) and the pictures (:mod:`hsd.viz`, :mod:`hsd.figures`); see docs/app.md.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from types import SimpleNamespace
from typing import NamedTuple

import hsd  # first: hsd sets the OpenMP wait policy and thread count before torch loads (hsd/threads.py)
import gradio as gr
from hsd import durations, forms, lab, marks, planning, policy, turns, viz, zerogpu
from hsd.lab import ALGOS, BAD_DRAFTER, BYTES, EMBEDDED, EXAMPLES, NO_RUN, PAIRS, SAMPLING, SHARED, STOPPED  # noqa: F401 - the app's API

log = logging.getLogger("hsd.app")
MAX_NEW_TOKENS = forms.MAX_NEW_TOKENS
STOP_SETTLE_S = 0.5
PAPER = "https://arxiv.org/abs/2502.05202"
#: projector mode: larger type everywhere, long rounds wrap instead of scrolling sideways; state as word badges
CSS = """
.gradio-container { font-size: 18px !important; }
.gradio-container .prose, .gradio-container label span, .gradio-container button { font-size: 1.05em !important; }
#hsd-round .hsd-round-table, #hsd-round table { white-space: normal; }
#hsd-title h1 { font-size: 1.55em; margin: 0 0 0.2em 0; }
#hsd-title p { margin: 0; }
#hsd-tabs .tab-container button { padding: 0.35em 0.5em !important; font-size: 16px !important; }
#hsd-production h2, #hsd-advice h2 { font-size: 1.25em; } #hsd-production h3 { font-size: 1.1em; }
#hsd-report pre, #hsd-production pre { white-space: pre-wrap; overflow-wrap: anywhere; }
#hsd-round { overflow-x: auto; scrollbar-width: auto; scrollbar-color: #9ca3af #f3f4f6; }
#hsd-round ::-webkit-scrollbar, #hsd-round::-webkit-scrollbar { height: 12px; }
#hsd-round ::-webkit-scrollbar-thumb, #hsd-round::-webkit-scrollbar-thumb { background: #9ca3af; border-radius: 6px; }
""" + marks.CSS


def launch_options() -> dict:
    """How the page is launched, here and wherever the app is opened (the browser tests, the screenshots): its
    theme and style sheet change what fits on a screen."""
    return {"theme": gr.themes.Soft(), "css": CSS}


get_pair = planning.load_named_pair
hsd.threads.choose("auto")  # each run on the intra-op threads that suit its pair's size (hsd/threads.py)


class RunOut(NamedTuple):
    """What :func:`run` updates, one field per component (Gradio receives the tuple in this order)."""

    status: object
    output: object = ""
    round: object = None
    round_view: object = NO_RUN
    rounds_plot: object = None
    state: object = None


class CompareOut(NamedTuple):
    """What :func:`compare` updates; what a step does not name is cleared."""

    status: object
    badge: object = ""
    speedup: object = None
    tokens_time: object = None
    histogram: object = None
    positions: object = None
    time_split: object = None
    table: object = None
    csv: object = None


def _compare_out(status, **values) -> CompareOut:
    """A :class:`CompareOut` whose status in progress says it is the comparison's, so Stop can say what stopped."""
    return CompareOut(lab.comparing(status), **values)


class DraftersOut(NamedTuple):
    """What :func:`drafters` updates; what a step does not name is cleared."""

    status: object
    figure: object = None
    table: object = None
    csv: object = None


class CheckOut(NamedTuple):
    """What :func:`check_pair` and :func:`pair_changed` update."""

    report: object
    availability: object
    algorithm: object


class ExampleOut(NamedTuple):
    """What :func:`example_chosen` fills: the form, and the pair check in the same update."""

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
    drafter_temperature: object = None
    draft_threshold: object = None
    shared_noise: object = False


def _choice(values: dict):
    """The algorithm radio's update from a lab result: its choices and selection, or unchanged."""
    if "choices" not in values:
        return gr.update()
    return gr.update(choices=values["choices"], **({"value": values["algorithm"]} if "algorithm" in values else {}))


def _check_out(values: dict) -> CheckOut:
    return CheckOut(values["report"], values["availability"], _choice(values))


# ----------------------------------------------------------------------------- handlers

# Each long handler is a plain function that checks the form and loads the models here, in the main process
# (hsd.lab.load_steps: on ZeroGPU a download never holds the GPU), then yields from its GPU part, which
# @spaces.GPU runs on ZeroGPU with a duration computed from the request (hsd/zerogpu.py) and which is the
# identity elsewhere; ZeroGPU's own refusals (quota, queue, abort) become the status line.

#: turns at the device for the handlers' GPU parts (hsd/turns.py): one at a time on a machine's own device, no
#: limit on ZeroGPU, where every call gets its own GPU and ZeroGPU queues them
TURNS = turns.Turns(turns.gpu_capacity(zerogpu.on_zerogpu()))
#: handlers of the GPU buttons running at once, loading or waiting for their turn (the queue holds the rest)
GPU_EVENTS = 8


def _on_gpu(out, gpu_part, *args):
    """Yield from ``gpu_part(*args)`` once it is this request's turn at the device; while it waits, ``out`` status
    updates that say how many requests are ahead. Stop, or a closed page, leaves the line at once."""
    with TURNS.turn() as wait:
        for ahead in wait:
            yield out(status=f"{marks.BUSY} Your models are loaded; waiting for the device: {ahead} request"
                             f"{'s are' if ahead > 1 else ' is'} ahead of yours (Stop leaves the line)…")
        yield from gpu_part(*args)


def _loaded_first(out, target, drafter, device, dtype, check):
    """Yield ``out`` status updates while loading; return whether the GPU part should run."""
    for values in lab.load_steps(target, drafter, device, dtype, check):
        if "status" in values:
            yield out(status=values["status"])
        if values.get("failed"):
            return False
    return True


def _run_out(values: dict) -> RunOut:
    rounds = values.pop("rounds", 0)  # a slider needs maximum > minimum: one round leaves it at 0, disabled
    slider = (gr.update(maximum=max(1, rounds - 1), value=values["round"], interactive=rounds > 1) if "round" in values
              else gr.update(value=0, maximum=1))
    return RunOut(**{**values, "round": slider})


@zerogpu.gpu(durations.run_duration, on_error=lambda sentence: RunOut(status=f"{marks.ERROR} **ZeroGPU**: {sentence}"))
def _run_on_device(target, drafter, algorithm, form, device="auto", dtype="auto", show_rejected=True, progress=None):
    for values in lab.run_steps(target, drafter, algorithm, form, device, dtype, show_rejected):
        yield _run_out(values)


def run(target, drafter, algorithm, form: forms.Form, device="auto", dtype="auto", show_rejected=True):
    """Stream one generation round by round (:func:`hsd.lab.run_steps`); each update clears what it does not name."""
    loader = drafter if algorithm != "ar" else ""
    if (yield from _loaded_first(RunOut, target, loader, device, dtype, lambda: lab.check_form(form))):
        yield from _on_gpu(RunOut, _run_on_device, target, drafter, algorithm, form, device, dtype, show_rejected)


def picture_positions(state):
    """The position picker after a run: the verified positions that have a picture, the first chosen."""
    choices = lab.picture_choices(state)
    return gr.update(choices=choices, value=choices[0] if choices else None)


def show_picture(state, label):
    """The rejection-sampling picture of the chosen position, and its line of explanation."""
    return lab.picture_view(state, label)


def download(state):
    """The last run as JSON (reload it here) and as a self-contained HTML page."""
    try:
        return list(lab.export(state))
    except Exception as exc:  # noqa: BLE001 - no run yet: say so, change nothing
        gr.Warning(lab.error_text(exc).replace(f"{marks.ERROR} ", ""))
        return None


def load_saved(path):
    """A run saved as JSON, shown again without models: output, rounds and plot as after a run."""
    return _run_out(lab.load_run(path))


class LosslessOut(NamedTuple):
    """What :func:`lossless_check` updates."""

    status: object
    figure: object = None


@zerogpu.gpu(60, on_error=lambda sentence: LosslessOut(status=f"{marks.ERROR} **ZeroGPU**: {sentence}"))
def _lossless_on_device(target, drafter, algorithm, n, form, device="auto", dtype="auto", progress=None):
    for values in lab.lossless_steps(target, drafter, algorithm, n, form, device, dtype):
        yield LosslessOut(**values)


def lossless_check(target, drafter, algorithm, n, form: forms.Form, device="auto", dtype="auto"):
    """The next token drawn n times with AR and with the algorithm, against the target's exact distribution."""
    if (yield from _loaded_first(LosslessOut, target, drafter, device, dtype, lambda: lab.check_form(form))):
        yield from _on_gpu(LosslessOut, _lossless_on_device, target, drafter, algorithm, n, form, device, dtype)


def show_round(state, index):
    """The token-boundary view of one round of the last run."""
    try:
        return lab.round_view(state, index)
    except Exception as exc:
        return lab.error_text(exc)


def step_round(state, index, delta):
    """The round index after a ◀/▶ click; a malformed index or state warns and leaves the slider as it is."""
    if not state:
        return 0
    try:
        return lab.step(state, index, delta)
    except (hsd.HsdError, KeyError, TypeError, AttributeError) as exc:
        gr.Warning(f"Cannot step to another round: {exc if isinstance(exc, hsd.HsdError) else 'no run to step through'}.")
        return gr.update()


def rerender(state, show_rejected):
    """The coloured output again, with or without the rejected drafts; a malformed state warns and changes nothing."""
    if not state:
        return gr.update()
    try:
        return lab.output(state, show_rejected)
    except (KeyError, TypeError, AttributeError):
        gr.Warning("Cannot redraw the output: this page's run state is malformed. Run an algorithm again.")
        return gr.update()


@zerogpu.gpu(durations.compare_duration, on_error=lambda sentence: _compare_out(status=f"{marks.ERROR} **ZeroGPU**: {sentence}"))
def _compare_on_device(target, drafter, form, device="auto", dtype="auto", progress=None):
    for values in lab.compare_steps(target, drafter, form, device, dtype):
        yield _compare_out(**values)


def compare(target, drafter, form: forms.Form, device="auto", dtype="auto"):
    """AR and every applicable algorithm, repeated interleaved (:func:`hsd.lab.compare_steps`); then the figures."""
    if (yield from _loaded_first(_compare_out, target, drafter, device, dtype, lambda: lab.check_form(form))):
        yield from _on_gpu(_compare_out, _compare_on_device, target, drafter, form, device, dtype)


@zerogpu.gpu(durations.drafters_duration, on_error=lambda sentence: DraftersOut(status=f"{marks.ERROR} **ZeroGPU**: {sentence}"))
def _drafters_on_device(target, drafter_names, algorithm, num_prompts, form, device="auto", dtype="auto",
                        progress=None):
    for values in lab.drafters_steps(target, drafter_names, algorithm, num_prompts, form, device, dtype):
        yield DraftersOut(**values)


def drafters(target, drafter_names, algorithm, num_prompts, form: forms.Form, device="auto", dtype="auto"):
    """Several drafters for one target, each against AR in the same run (:func:`hsd.lab.drafters_steps`); the
    form's prompt is not used (the drafters run on held-out code prompts)."""
    for drafter in lab.drafter_lines(drafter_names) or [""]:
        if not (yield from _loaded_first(DraftersOut, target, drafter, device, dtype, form.settings)):
            return
    yield from _on_gpu(DraftersOut, _drafters_on_device, target, drafter_names, algorithm, num_prompts, form, device,
                       dtype)


def production(target, drafter, algorithm, form: forms.Form, device="auto", dtype="auto") -> str:
    """The vLLM and Transformers configuration for this pair and settings (:func:`hsd.lab.production`)."""
    return lab.production(target, drafter, algorithm, form, device, dtype)


def check_pair(target, drafter, device="auto", dtype="auto", algorithm=None):
    """What will be loaded, which algorithms apply and why, and the drafter-compatibility report."""
    return _check_out(lab.check(target, drafter, device, dtype, algorithm))


def pair_changed(target, drafter, device="auto", dtype="auto", algorithm=None):
    """After a preset or an example: checked at once where that downloads nothing, else described."""
    return _check_out(lab.pair_changed(target, drafter, device, dtype, algorithm))


def describe(target, drafter, device="auto", dtype="auto"):
    """What a pair would load, before anything is downloaded; every algorithm is offered again."""
    values = lab.describe(target, drafter, device, dtype)
    return values["report"], _choice(values)


def example_chosen(index, device="auto", dtype="auto"):
    """Fill the form with example ``index`` and check its pair as :func:`pair_changed` does."""
    values = lab.example(index, device, dtype)
    for box in ("drafter_temperature", "draft_threshold"):  # text boxes: "" is empty
        values[box] = "" if values[box] is None else str(values[box])
    return ExampleOut(**{**{k: v for k, v in values.items() if k in ExampleOut._fields},
                         "algorithm": gr.update(**({"choices": values["choices"]} if "choices" in values else {}),
                                                value=values["algorithm"])})


def advise_pair(target, drafter, form: forms.Form, device="auto", dtype="auto") -> str:
    """:func:`advise_live`'s final text."""
    *_, last = advise_live(target, drafter, form, device, dtype)
    return last


@zerogpu.gpu(durations.advise_duration, on_error=lambda sentence: f"{marks.ERROR} **ZeroGPU**: {sentence}")
def _advise_on_device(target, drafter, form, device="auto", dtype="auto"):
    yield from lab.advise_text(target, drafter, form, device, dtype)


def advise_live(target, drafter, form: forms.Form, device="auto", dtype="auto"):
    """`hsd advise` on this pair and the form's prompt and temperature, its progress first
    (:func:`hsd.lab.advise_text`)."""
    check = lambda: forms.check_prompt(form.prompt)  # noqa: E731
    status = lambda status: status  # noqa: E731 - advice is one Markdown text
    if (yield from _loaded_first(status, target, drafter, device, dtype, check)):
        yield from _on_gpu(status, _advise_on_device, target, drafter, form, device, dtype)


def stopped_page(status, advice, drafters_status, lossless_status, request: gr.Request = None):
    """:func:`stopped` once the page's long handlers have ended (at their next update, at most
    :data:`STOP_WAIT_S`): a generator's end re-sends its last update, which would otherwise overwrite the message."""
    session = getattr(request, "session_hash", None)
    deadline = time.monotonic() + STOP_WAIT_S
    while session is not None and RUNNING.get(session, 0) > 0 and time.monotonic() < deadline:
        time.sleep(0.1)
    return stopped(status, advice, drafters_status, lossless_status)


def stopped(status, advice, *others):
    """Stop: a run, comparison or advice in progress says it stopped; a finished one stays as it is. Runs a moment
    after the handlers ended, so an update one had already sent cannot overwrite it."""
    time.sleep(STOP_SETTLE_S)
    return tuple(gr.update() if text is None else text for text in lab.after_stop(status, advice, *others))


def preset_changed(label):
    """A preset fills both boxes; the line under the choice says what the paper measured for it."""
    return (*PAIRS.get(label, ("", "")), lab.pair_note(label))


def pair_moved(state):
    """The status once the pair changed under a run still on screen: which run the output is from."""
    text = lab.output_is_from(state)
    return gr.update() if text is None else text


def token_room(target, drafter, form: forms.Form, device="auto", dtype="auto"):
    """The max-new-tokens box's range for this pair and prompt (the target's context minus the prompt)."""
    info = lab.token_room(target, drafter, form, device, dtype)
    return gr.update() if info is None else gr.update(info=info)


# ----------------------------------------------------------------------------- layout

FORM = object()  #: stands for the decoding form's boxes in an event's inputs (see :func:`_event`)

#: Stop presses per page (Gradio's session hash). Stop is cooperative: a long handler ends at its next update
#: after a press, its generator closed (on ZeroGPU that stops the GPU worker too) and its last update kept. Gradio's
#: own cancellation lands at that same point but marks every output of the event as failed (red "Error" boxes).
STOPS: dict[str, int] = {}
RUNNING: dict[str | None, int] = {}  #: long handlers running per page
#: how long Stop's message waits for the page's handlers to reach their next update and end
STOP_WAIT_S = 30.0


def _until_stopped(updates, session: str | None):
    """``updates`` until this page presses Stop (a press after the handler started), then nothing more."""
    pressed = STOPS.get(session, 0)
    RUNNING[session] = RUNNING.get(session, 0) + 1
    try:
        for update in updates:
            if session is not None and STOPS.get(session, 0) != pressed:
                return
            yield update
    finally:
        RUNNING[session] -= 1
        updates.close()


def request_stop(request: gr.Request):
    """Stop: the page's running long handlers end at their next update (:func:`_until_stopped`)."""
    session = getattr(request, "session_hash", None)
    if session is not None:
        STOPS[session] = STOPS.get(session, 0) + 1


def _event(handler, inputs: list, boxes: dict) -> tuple:
    """``(fn, components)`` for a Gradio event: Gradio calls ``fn`` with the components' values in order, and
    ``fn`` calls ``handler`` with one argument per item of ``inputs``, where :data:`FORM` becomes one
    :class:`hsd.forms.Form` of the ``boxes`` (a component per :data:`hsd.forms.FORM_FIELDS` name). So a handler
    takes the form as one value, a new setting is one new box, and the API names every value: the handler's
    parameter names, the form's field names in its place."""
    names = list(inspect.signature(handler).parameters)
    components, labels = [], []
    for name, item in zip(names, inputs):
        components += list(boxes.values()) if item is FORM else [item]
        labels += list(boxes) if item is FORM else [name]

    def call(values):
        values, args = list(values), []
        for item in inputs:
            if item is FORM:
                args.append(forms.Form(**dict(zip(boxes, values[:len(boxes)]))))
                del values[:len(boxes)]
            else:
                args.append(values.pop(0))
        return handler(*args)

    params = [inspect.Parameter(label, inspect.Parameter.POSITIONAL_OR_KEYWORD) for label in labels]
    if inspect.isgeneratorfunction(handler):
        def fn(*values, progress=gr.Progress(track_tqdm=True), request=None):
            # Gradio passes its special arguments by position, after the components' values
            request = next((v for v in values if isinstance(v, gr.Request)), request)
            yield from _until_stopped(call(values), getattr(request, "session_hash", None))
        # positional, after the values: Gradio looks for its special arguments among positional parameters only
        # (a download's tqdm progress reaches the page through the first, the page's session through the second)
        params += [inspect.Parameter("progress", inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                     default=gr.Progress(track_tqdm=True)),
                   inspect.Parameter("request", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None,
                                     annotation=gr.Request)]
        fn.__annotations__ = {"request": gr.Request}  # Gradio passes the request to a parameter so annotated
    else:
        def fn(*values):
            return call(values)
    fn.__signature__ = inspect.Signature(params)
    fn.__name__ = fn.__qualname__ = handler.__name__
    fn.__doc__ = handler.__doc__
    return fn, components


def _controls(ui: SimpleNamespace) -> None:
    """The left column, onto ``ui``: the pair, the algorithm and the decoding form."""
    default_target, default_drafter = PAIRS[EMBEDDED]
    ui.preset = gr.Dropdown(list(PAIRS), value=EMBEDDED, label="Model pair (target ← drafter)")
    ui.preset_note = gr.Markdown(lab.pair_note(EMBEDDED), elem_id="hsd-preset-note")
    ui.target = gr.Textbox(default_target, label="Target (Hub id or local directory)",
                           info="owner/name@revision pins a branch, tag or commit")
    ui.drafter = gr.Textbox(default_drafter, label="Drafter (empty: AR only)")
    ui.algorithm = gr.Radio(ALGOS, value="slem", label="Algorithm", elem_id="hsd-algorithm")
    with gr.Accordion(lab.settings_summary(0, 5, 96), open=False, elem_id="hsd-settings") as ui.settings_box:
        ui.temperature = gr.Number(0, label="temperature", elem_id="hsd-temperature", step=0.1,
                                   info=f"0 = greedy; {forms.TEMPERATURE[0]:g}..{forms.TEMPERATURE[1]:g}")
        ui.lookahead = gr.Number(5, label="lookahead k", precision=0, step=1,
                                 info=f"{forms.LOOKAHEAD[0]}..{forms.LOOKAHEAD[1]}. {forms.LOOKAHEAD_INFO}")
        ui.max_new_tokens = gr.Number(96, label="max new tokens", precision=0, step=8,
                                      info=f"1..{MAX_NEW_TOKENS}", elem_id="hsd-max-new-tokens")
        ui.record = gr.Checkbox(False, label="record distributions (for the position picture)",
                                info="keeps p, the proposal and the residual of each verified position")
        with gr.Row():
            ui.top_k = gr.Number(0, label="top-k (0 = off)", precision=0, minimum=0)
            ui.top_p = gr.Number(1.0, label="top-p", minimum=0.01, maximum=1.0)
            ui.seed = gr.Number(0, label="seed", precision=0)
        # text boxes, not numbers: a number box shows and sends 0 for "empty", and 0 means something else here
        ui.drafter_temperature = gr.Textbox("", label="drafter temperature", placeholder="the target's",
                                            elem_id="hsd-drafter-temperature", max_lines=1,
                                            info="empty = the target's; 0 = a greedy drafter (often more "
                                                 "exact matches for SLEM). Changes acceptance, never the "
                                                 "output")
        ui.draft_threshold = gr.Textbox("", label="draft threshold (dynamic lookahead)", placeholder="off",
                                        elem_id="hsd-draft-threshold", max_lines=1,
                                        info="SD, SLEM, TLI: stop a round's draft after a token the drafter "
                                             "gives less than this, e.g. 0.3; empty or 0 = draft all k")
        ui.shared_noise = gr.Checkbox(False, label="shared noise (AR and SLEM)", elem_id="hsd-shared-noise",
                                      info="both models draw from one seeded noise field over the text: "
                                           "SLEM accepts more when sampling, and its text is AR's text "
                                           "for the same seed, token for token (docs/coupling.md)")
    ui.check_btn = gr.Button("Check pair", size="sm")
    ui.availability = gr.Markdown("Checking the pair…", elem_id="hsd-availability")
    with gr.Accordion("Prompt format, device, dtype", open=False):
        ui.mode = gr.Radio(["raw", "chat"], value="raw", label="prompt",
                           info="chat: each model's own chat template")
        ui.parse_special = gr.Checkbox(True, label="read special-token text in the prompt as the token",
                                       info="e.g. <|endoftext|>; off: plain text (raw prompts only)")
        ui.device = gr.Dropdown(["auto", "cpu", "cuda"], value="auto", label="device")
        ui.dtype = gr.Dropdown(["auto", "float32", "bfloat16", "float16"], value="auto", label="dtype")


def _views(ui: SimpleNamespace) -> None:
    """The right column, onto ``ui``: the prompt, the buttons, the status line and the tabs."""
    ui.prompt = gr.Textbox(EXAMPLES[0][2], lines=3, max_lines=12, label="Prompt",  # the first example's
                           elem_id="hsd-prompt")
    with gr.Row():
        ui.run_btn = gr.Button("Run", variant="primary")
        ui.compare_btn = gr.Button("Compare all algorithms")
        ui.stop_btn = gr.Button("Stop", variant="stop")
    ui.examples = gr.Dataset(
        components=[ui.prompt], samples=[[text] for _, _, text, *_ in EXAMPLES], type="index",
        sample_labels=[label for label, *_ in EXAMPLES], elem_id="hsd-examples",
        label="Examples: one click sets pair, prompt, settings; speeds on unseen code")
    ui.status = gr.Markdown(elem_id="hsd-status")
    with gr.Tabs(elem_id="hsd-tabs") as ui.tabs:
        with gr.Tab("Output"):
            _output_tab(ui)
        with gr.Tab("Rounds"):
            _rounds_tab(ui)
        with gr.Tab("Compare"), gr.Column(elem_id="hsd-compare"):
            _compare_tab(ui)
        with gr.Tab("Lossless?"), gr.Column(elem_id="hsd-lossless"):
            _lossless_tab(ui)
        with gr.Tab("Drafters"), gr.Column(elem_id="hsd-drafters"):
            _drafters_tab(ui)
        with gr.Tab("Pair check"):
            _pair_tab(ui)
        with gr.Tab("About"):
            _about_tab(ui)


def _output_tab(ui: SimpleNamespace) -> None:
    """The Output tab: the coloured output, the per-round plot, and the run's files (download, show a saved run)."""
    ui.show_rejected = gr.Checkbox(True, label="show rejected drafts (struck through)",
                                   info="on for greedy runs (the page starts at temperature 0), off when sampling")
    ui.output = gr.HTML(elem_id="hsd-output")
    ui.rounds_plot = gr.Plot(label="Rounds", elem_id="hsd-rounds-plot")
    with gr.Row():
        ui.download_btn = gr.Button("Download this run (JSON and HTML)", size="sm")
        ui.run_files = gr.File(label="this run", file_count="multiple", elem_id="hsd-run-files")
        ui.saved = gr.File(label="show a saved run (.json): no models run", file_types=[".json"],
                           elem_id="hsd-load-run")


def _rounds_tab(ui: SimpleNamespace) -> None:
    """The Rounds tab: the token-boundary view of one round at a time, and the rejection-sampling picture of a
    verified position."""
    gr.Markdown("Top: the drafter's tokens. Middle: the draft string. Bottom: the target's "
                f"proposed tokens and their verification. {lab.COLUMNS_HELP}")
    with gr.Row():
        ui.prev_btn = gr.Button("◀ previous round", size="sm")
        ui.round_idx = gr.Slider(0, 1, value=0, step=1, label="round")
        ui.next_btn = gr.Button("next round ▶", size="sm")
    ui.round_view = gr.HTML(NO_RUN, elem_id="hsd-round")
    gr.Markdown("**Why the output is the target's**: for a verified position, the target's p, "
                "the proposal, the accepted mass min(p, proposal) and the residual a rejection "
                "samples from (tick *record distributions* before the run).")
    ui.picture_position = gr.Dropdown([], label="verified position", elem_id="hsd-picture-position")
    ui.picture_plot = gr.Plot(label="rejection sampling at this position", elem_id="hsd-picture")
    ui.picture_text = gr.Markdown(elem_id="hsd-picture-text")


def _compare_tab(ui: SimpleNamespace) -> None:
    """The Compare tab: every applicable algorithm against AR, interleaved: the lossless badge, five plots, the
    summary table."""
    ui.badge = gr.HTML(elem_id="hsd-badge")
    # two plots a row where each gets 440 px, one a row on a narrower screen (a projector's 1024 px)
    with gr.Row():
        ui.speedup = gr.Plot(label="speedup", elem_id="hsd-speedup", min_width=440)
        ui.tokens_time = gr.Plot(label="tokens vs time", min_width=440)
    with gr.Row():
        ui.histogram = gr.Plot(label="acceptance length", min_width=440)
        ui.positions = gr.Plot(label="acceptance by position", min_width=440)
    ui.time_split = gr.Plot(label="time split")
    ui.table = gr.DataFrame(label="summary", interactive=False,  # cleared, it shows these, not 1 2 3
                            headers=list(viz.SUMMARY_COLUMNS))
    ui.csv = gr.File(label="summary as CSV")


def _lossless_tab(ui: SimpleNamespace) -> None:
    """The Lossless? tab: the next token drawn many times by AR and by the algorithm, against the target's exact
    distribution."""
    gr.Markdown("Draw the **next token** many times with AR and with the chosen algorithm at the "
                "current settings, and compare both histograms with the target's exact "
                "distribution. An exact sampler's distance stays under the noise floor.")
    with gr.Row():
        ui.draws = gr.Number(0, label="draws (0: the algorithm's default, about 15 s on a 2-core "
                                "CPU)", precision=0, elem_id="hsd-draws")
        ui.lossless_btn = gr.Button("Check losslessness")
    ui.lossless_status = gr.Markdown(elem_id="hsd-lossless-status")
    ui.lossless_plot = gr.Plot(label="next-token histograms", elem_id="hsd-lossless-plot")


def _drafters_tab(ui: SimpleNamespace) -> None:
    """The Drafters tab: several drafters for the target, each measured against AR, with advise's prediction."""
    gr.Markdown("Several drafters for the target above, on held-out code prompts, each measured "
                "against AR in the same run, with `advise`'s prediction beside the measurement.")
    with gr.Row():
        ui.drafter_names = gr.Textbox(lab.default_drafters(), lines=3, scale=3,
                                      label="drafters (one per line: Hub id or local directory)")
        with gr.Column(scale=1):
            ui.drafters_algorithm = gr.Dropdown(["best", *(a for a in ALGOS if a != "ar")],
                                                value="best", label="algorithm",
                                                info="best: each drafter's fastest")
            ui.num_prompts = gr.Number(2, label="prompts", precision=0, minimum=1, maximum=16,
                                       elem_id="hsd-drafters-prompts")
    ui.drafters_btn = gr.Button("Compare drafters")
    ui.drafters_status = gr.Markdown(elem_id="hsd-drafters-status")
    ui.drafters_plot = gr.Plot(label="drafters", elem_id="hsd-drafters-plot")
    ui.drafters_table = gr.DataFrame(label="one row per drafter", interactive=False)
    ui.drafters_csv = gr.File(label="every drafter and algorithm as CSV")


def _pair_tab(ui: SimpleNamespace) -> None:
    """The Pair check tab: the compatibility report, Advise and the production settings."""
    ui.report = gr.Markdown("Press **Check pair**.", elem_id="hsd-report")
    with gr.Row():
        ui.advise_btn = gr.Button("Advise: predict the best algorithm and lookahead", size="sm")
        ui.production_btn = gr.Button("Production: vLLM and Transformers settings", size="sm")
    ui.advice = gr.Markdown(elem_id="hsd-advice")
    ui.production_md = gr.Markdown(elem_id="hsd-production")


def _about_tab(ui: SimpleNamespace) -> None:
    """The About tab: the one-minute explanation and each algorithm's paragraph."""
    gr.Markdown(lab.first_minute() + "\n\n---\n\n" + lab.about_algorithms(), elem_id="hsd-about")


def _wire(demo: gr.Blocks, ui: SimpleNamespace) -> None:
    """Every event of the page. The long handlers take the pair, the algorithm and the form as one value
    (:func:`_event`): each box of the form is the ``ui`` component named after its :class:`hsd.forms.Form` field."""
    boxes = {name: getattr(ui, name) for name in forms.FORM_FIELDS}

    def wired(handler, *inputs):
        return _event(handler, list(inputs), boxes)

    room = wired(token_room, ui.target, ui.drafter, FORM, ui.device, ui.dtype)
    _wire_pair(demo, ui, room)
    _wire_runs(ui, wired)
    ui.tabs.select(None, js=RESIZE_JS, queue=False, api_visibility="private")
    summary = [ui.temperature, ui.lookahead, ui.max_new_tokens, ui.top_k, ui.top_p, ui.seed, ui.drafter_temperature,
               ui.draft_threshold, ui.shared_noise, ui.record]
    for box in summary:  # the folded settings say what is set
        box.change(lambda *values: gr.update(label=lab.settings_summary(*values)), summary, ui.settings_box,
                   queue=False, api_visibility="private")
    for button in (ui.run_btn, ui.compare_btn):  # on a small screen, bring the status and the results into view
        button.click(None, js=SHOW_RESULTS_JS, queue=False, api_visibility="private")
    demo.load(None, js=FIRST_VISIT_JS, queue=False, api_visibility="private")


#: a plot drawn while its tab was hidden took plotly's default width (its card had none); a window resize makes
#: every plot fit its card again, once the newly shown tab has been laid out
RESIZE_JS = "() => { requestAnimationFrame(() => window.dispatchEvent(new Event('resize'))); }"
#: Run and Compare scroll the status line to the top of the window, so the output follows it on a projector
SHOW_RESULTS_JS = ("() => { const s = document.getElementById('hsd-status');"
                   " if (s && s.getBoundingClientRect().top > window.innerHeight / 3) s.scrollIntoView({block: 'start'}); }")
#: the one-minute explanation starts open on a visitor's first visit and folded on later ones (this browser)
FIRST_VISIT_JS = ("() => { let seen = null; try { seen = localStorage.getItem('hsd-visited');"
                  " localStorage.setItem('hsd-visited', '1'); } catch (e) {}"
                  " if (seen) { const b = document.querySelector('#hsd-intro button.label-wrap, #hsd-intro > button');"
                  " if (b && document.querySelector('#hsd-intro .label-wrap.open, #hsd-intro button.open')) b.click(); } }")


def _wire_pair(demo: gr.Blocks, ui: SimpleNamespace, room: tuple) -> None:
    """Choosing a pair or an example, checking it, and the max-new-tokens hint (``room``) that follows each. Checking
    a pair loads it on the CPU side and never waits in (or holds) the GPU queue."""
    pair_in, check_out = [ui.target, ui.drafter, ui.device, ui.dtype, ui.algorithm], [ui.report, ui.availability,
                                                                                      ui.algorithm]
    private = dict(api_visibility="private")
    ui.preset.input(preset_changed, ui.preset, [ui.target, ui.drafter, ui.preset_note], api_name="preset").then(
        pair_changed, pair_in, check_out, **private).then(*room, ui.max_new_tokens, **private)
    filled = [ui.preset, ui.target, ui.drafter, ui.prompt, ui.algorithm, ui.temperature, ui.lookahead,
              ui.max_new_tokens, ui.report, ui.availability, ui.drafter_temperature, ui.draft_threshold,
              ui.shared_noise]
    ui.examples.click(example_chosen, [ui.examples, ui.device, ui.dtype], filled, **private).then(
        lab.pair_note, ui.preset, ui.preset_note, queue=False, **private).then(
        *room, ui.max_new_tokens, **private)
    for box in (ui.preset, ui.target, ui.drafter):  # a run still on screen says which pair it came from
        box.input(pair_moved, ui.state, ui.status, queue=False, **private)
    for box in (ui.target, ui.drafter):  # a new pair: every algorithm is offered until Check pair narrows them
        box.input(lambda: (gr.update(choices=ALGOS), "Pair changed: press **Check pair** to see which "
                           "algorithms apply."), None, [ui.algorithm, ui.availability], queue=False, **private)
    ui.temperature.change(lambda t: gr.update(value=isinstance(t, (int, float)) and t == 0), ui.temperature,
                          ui.show_rejected, queue=False, **private)
    demo.load(check_pair, pair_in, check_out, **private).then(*room, ui.max_new_tokens, **private)
    ui.check_btn.click(check_pair, pair_in, check_out, api_name="check").then(*room, ui.max_new_tokens, **private)
    ui.prompt.blur(*room, ui.max_new_tokens, **private)


def _wire_runs(ui: SimpleNamespace, wired) -> None:
    """Run, Compare, Lossless?, Advise and Drafters (their device parts take turns: TURNS), Production, Stop, the
    round view, the position picture and the run's files."""
    gpu = dict(concurrency_id="gpu", concurrency_limit=GPU_EVENTS)  # the device itself: TURNS
    pair, where = (ui.target, ui.drafter), (ui.device, ui.dtype)
    run_out = [ui.status, ui.output, ui.round_idx, ui.round_view, ui.rounds_plot, ui.state]
    runs = [ui.run_btn.click(*wired(run, *pair, ui.algorithm, FORM, *where, ui.show_rejected), run_out,
                             api_name="run", **gpu)]
    runs[0].then(picture_positions, ui.state, ui.picture_position, api_visibility="private", queue=False)
    runs.append(ui.compare_btn.click(*wired(compare, *pair, FORM, *where),
                                     [ui.status, ui.badge, ui.speedup, ui.tokens_time, ui.histogram, ui.positions,
                                      ui.time_split, ui.table, ui.csv], api_name="compare", **gpu))
    runs.append(ui.lossless_btn.click(*wired(lossless_check, *pair, ui.algorithm, ui.draws, FORM, *where),
                                      [ui.lossless_status, ui.lossless_plot], api_name="lossless", **gpu))
    runs.append(ui.advise_btn.click(*wired(advise_live, *pair, FORM, *where), ui.advice, api_name="advise", **gpu))
    runs.append(ui.drafters_btn.click(
        *wired(drafters, ui.target, ui.drafter_names, ui.drafters_algorithm, ui.num_prompts, FORM, *where),
        [ui.drafters_status, ui.drafters_plot, ui.drafters_table, ui.drafters_csv], api_name="drafters", **gpu))
    ui.production_btn.click(*wired(production, *pair, ui.algorithm, FORM, *where), ui.production_md,
                            api_name="production")
    busy = [ui.status, ui.advice, ui.drafters_status, ui.lossless_status]
    ui.stop_btn.click(request_stop, None, None, api_visibility="private", queue=False).then(
        stopped_page, busy, busy, api_visibility="private", concurrency_limit=None)
    ui.picture_position.change(show_picture, [ui.state, ui.picture_position], [ui.picture_plot, ui.picture_text],
                               api_name="picture", concurrency_limit=4)
    ui.download_btn.click(download, ui.state, ui.run_files, api_name="download", concurrency_limit=4)
    ui.saved.upload(load_saved, ui.saved, run_out, api_name="load_run", concurrency_limit=4).then(
        picture_positions, ui.state, ui.picture_position, api_visibility="private", queue=False)
    ui.round_idx.change(show_round, [ui.state, ui.round_idx], ui.round_view, api_name="round", concurrency_limit=4)
    ui.prev_btn.click(lambda s, i: step_round(s, i, -1), [ui.state, ui.round_idx], ui.round_idx, api_name="prev_round")
    ui.next_btn.click(lambda s, i: step_round(s, i, 1), [ui.state, ui.round_idx], ui.round_idx, api_name="next_round")
    ui.show_rejected.change(rerender, [ui.state, ui.show_rejected], ui.output, api_name="rerender",
                            concurrency_limit=4)


def build() -> gr.Blocks:
    with gr.Blocks(title="hsd · speculative decoding across vocabularies") as demo:
        gr.Markdown(f"# hsd · lossless speculative decoding across different vocabularies\nA small drafter "
                    "proposes, a big target verifies, and the output is exactly what the target alone would have "
                    f"written, even when the two models use different tokenizers (Timor et al., ICML 2025, "
                    f"[arXiv 2502.05202]({PAPER})).", elem_id="hsd-title")
        ui = SimpleNamespace(state=gr.State(None))
        with gr.Accordion("New here? What this page shows, in one minute", open=True, elem_id="hsd-intro"):
            gr.Markdown(lab.first_minute())
        with gr.Row():
            with gr.Column(scale=1, min_width=320):
                _controls(ui)
            with gr.Column(scale=3):
                _views(ui)
        _wire(demo, ui)
    demo.queue(default_concurrency_limit=1, max_size=32)
    return demo


demo = build()

if zerogpu.on_zerogpu():  # ZeroGPU: the presets load at start-up, in the main process, onto (emulated) cuda
    zerogpu.preload(log_to=log)

if __name__ == "__main__":
    if os.environ.get("GRADIO_SHARE", "").lower() in ("1", "true"):  # a share link is public: hsd/policy.py
        policy.make_public()
    demo.launch(**launch_options())
