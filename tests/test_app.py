"""The Gradio app: handlers called directly on two tiny local models, then the launched app via gradio_client."""

import time

import pandas as pd
import plotly.graph_objects as go
import pytest

import app
from hsd import marks
from hsd.forms import FORM_FIELDS, Form

SETTINGS = dict(temperature=0, top_k=0, top_p=1.0, lookahead=4, max_new_tokens=12, seed=0)


def form(prompt="def fib(n):", **over) -> Form:
    """The decoding form with this test file's settings, as the page's boxes would hold them."""
    return Form(prompt=prompt, **{**SETTINGS, **over})


def _run(model_dirs, algorithm="slem", prompt="def fib(n):", **over):
    return list(app.run(model_dirs["target"], model_dirs["drafter"], algorithm, form(prompt, **over)))


def test_run_streams_coloured_output_then_the_round_view(model_dirs):
    updates = _run(model_dirs, "tli")
    status, html, slider, view, plot, state = updates[-1]
    assert status.startswith(f"{marks.OK} **TLI**") and "tokens/s" in status
    assert any(u[0].startswith(f"{marks.BUSY} Loading") for u in updates)
    assert "hsd-output" in html and "hsd-legend" in html and "#22c55e" in html
    assert any(f"hsd-{label}" in html for label in ("accepted", "corrected", "bonus"))
    assert slider["maximum"] == len(state["result"].rounds) - 1
    assert 'class="hsd-drafter-tok"' in view and 'class="hsd-target-tok"' in view and "q′ (proposal)" in view
    assert isinstance(plot, go.Figure) and [t.name for t in plot.data][-1] == "tokens emitted"
    assert "hsd-round" in app.show_round(state, 0)
    assert app.step_round(state, 0, -1) == 0 and app.step_round(state, 10**6, 1) == len(state["result"].rounds) - 1
    assert "hsd-rejected" not in app.rerender(state, False)


def test_ar_run_needs_no_drafter(model_dirs):
    status, *_ = list(app.run(model_dirs["target"], "", "ar", form("x = ", max_new_tokens=6)))[-1]
    assert status.startswith(f"{marks.OK} **AR**")


def test_compare_runs_every_applicable_algorithm(model_dirs):
    out = list(app.compare(model_dirs["target"], model_dirs["drafter"], form("def f(x):")))
    status, badge, speedup, tokens_time, hist, positions, split, table, csv = out[-1]
    ran = ["ar"] + [a for a in app.ALGOS if a not in ("ar", "sd")]  # sd needs a shared vocabulary; slrs if present
    assert status.startswith(f"{marks.OK} Compared {', '.join(ran)}") and "not applicable here: sd" in status
    assert all(f"✓ {a}: identical to AR" in badge for a in ran[1:])
    assert all(isinstance(f, go.Figure) for f in (speedup, tokens_time, hist, positions, split))
    assert [t.type for t in speedup.data] == ["bar", "bar"] and list(speedup.data[0].x) == ran[1:]
    assert [t.name for t in tokens_time.data] == ran
    assert isinstance(table, pd.DataFrame) and list(table["algorithm"]) == ran
    assert {"tokens/s", "TTFT (ms)", "TPOT (ms)", "τ", "accepted/verified", "accepted/proposed", "target forwards"} <= set(table.columns)
    assert list(pd.read_csv(csv)["algorithm"]) == ran


def test_check_pair_reports_compatibility_and_why_sd_is_off(model_dirs):
    report, availability, choices = app.check_pair(model_dirs["target"], model_dirs["drafter"], "auto", "auto", "sd")
    assert "intersection:" in report and "round-trip" in report and "What this means" in report
    assert f"{marks.YES} **slem**" in availability and f"{marks.NO} **sd**: 'sd' needs a shared vocabulary" in availability
    assert "sd" not in choices["choices"] and "tli" in choices["choices"] and choices["value"] == "slem"


@pytest.mark.parametrize("change,message", [
    (dict(prompt=""), "PromptError"),
    (dict(prompt="x" * 100_000), "100,000 characters"),
    (dict(algorithm="sd"), "needs a shared vocabulary"),
    (dict(target="no-such-owner/no-such-model"), "ModelNotFoundError"),
    (dict(target="assets/tiny-code/nothing-here"), "neither a local model directory nor a Hub id"),
    (dict(drafter="/"), "ModelNotFoundError"),
    (dict(temperature=-1), "InvalidSettingError"),
    (dict(lookahead=1000), "lookahead"),
    (dict(top_p=0), "top_p"),
    (dict(top_k=None), "top-k must be a number"),
    (dict(lookahead=2.5), "lookahead must be a whole number"),
    (dict(max_new_tokens=10**6), "max new tokens must be in 1..1024"),
])
def test_bad_input_ends_in_a_readable_message(model_dirs, change, message):
    args = dict(target=model_dirs["target"], drafter=model_dirs["drafter"], algorithm="slem", prompt="def f", **SETTINGS)
    args.update(change)
    boxes = Form(**{k: v for k, v in args.items() if k in FORM_FIELDS})
    updates = list(app.run(args["target"], args["drafter"], args["algorithm"], boxes))
    status = updates[-1][0]
    assert status.startswith(marks.ERROR) and message in status and "Traceback" not in status
    assert _run(model_dirs)[-1][0].startswith(marks.OK)  # the next run works


def test_the_drafter_samples_at_its_own_temperature(model_dirs):
    """The drafter-temperature box reaches the engine (a greedy drafter's q is one-hot), the output is the API's
    with the same settings, and a bad value is refused before anything loads."""
    import hsd

    def run(**over):
        return list(app.run(model_dirs["target"], model_dirs["drafter"], "slem",
                            form("def f(x):", temperature=1.0, seed=2, **over)))

    *_, state = run(drafter_temperature=0)[-1]
    result = state["result"]
    assert result.settings["drafter_temperature"] == 0.0
    assert {d.prob for r in result.rounds for d in r.drafted} == {1.0}
    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    same = hsd.generate(pair, "def f(x):", algorithm="slem", max_new_tokens=12, temperature=1.0, lookahead=4, seed=2,
                        drafter_temperature=0.0)
    assert result.token_ids == same.token_ids
    status = run(drafter_temperature=-0.5)[-1][0]
    assert status.startswith(marks.ERROR) and "drafter temperature" in status and "Loading" not in status
    *_, state = run(drafter_temperature=None)[-1]  # empty box: the target's settings
    assert state["result"].settings["drafter_temperature"] is None


def test_a_draft_threshold_makes_the_lookahead_dynamic(model_dirs):
    def run(**over):
        return list(app.run(model_dirs["target"], model_dirs["drafter"], "tli",
                            form("def f(x):", lookahead=8, max_new_tokens=16, **over)))

    *_, state = run(draft_threshold=0.6)[-1]
    result = state["result"]
    assert result.settings["draft_threshold"] == 0.6
    assert any(0 < len(r.drafted) < 8 for r in result.rounds)
    *_, plain = run()[-1]
    assert plain["result"].token_ids == result.token_ids  # greedy: the same text
    status = run(draft_threshold=1.5)[-1][0]
    assert status.startswith(marks.ERROR) and "draft threshold" in status


def test_unexpected_errors_are_reported_not_raised(model_dirs, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("CUDA out of memory")
    monkeypatch.setattr(app.hsd, "stream", boom)
    status = _run(model_dirs)[-1][0]
    assert "Unexpected error" in status and "CUDA out of memory" in status


def test_launched_app_through_gradio_client(model_dirs):
    from gradio_client import Client

    demo = app.build()
    _, url, _ = demo.launch(prevent_thread_lock=True, quiet=True)
    client = Client(url, verbose=False)
    try:
        names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
        assert {"/run", "/compare", "/check", "/round", "/rerender"} <= names
        params = [p["parameter_name"] for p in
                  client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/run"]["parameters"]]
        assert params == ["target", "drafter", "algorithm", *FORM_FIELDS, "device", "dtype", "show_rejected"]
        # the empty boxes (None: the target's temperature, no threshold) have no default a client can omit
        pair = dict(target=model_dirs["target"], drafter=model_dirs["drafter"], device="cpu", drafter_temperature=None,
                    draft_threshold=None)
        job = client.submit(**pair, algorithm="slem", prompt="def f(x):", **SETTINGS, api_name="/run")
        outputs = job.result(timeout=120) and job.outputs()
        assert len(outputs) >= 3 and outputs[-1][0].startswith(f"{marks.OK} **SLEM**") and "hsd-output" in outputs[-1][1]
        job = client.submit(**pair, prompt="def f(x):", **{**SETTINGS, "max_new_tokens": 8}, api_name="/compare")
        job.result(timeout=120)
        final = job.outputs()[-1]
        assert final[0].startswith(f"{marks.OK} Compared") and "identical to AR" in final[1]
        assert final[2]["type"] == "plotly" and final[7]["headers"][0] == "algorithm"
        bad = client.predict(**{**pair, "target": "", "drafter": ""}, algorithm="slem", prompt="x", max_new_tokens=4,
                             api_name="/run")
        assert bad[0].startswith(marks.ERROR)
        long = client.submit(**pair, algorithm="slem", prompt="x", lookahead=1, max_new_tokens=400, api_name="/run")
        deadline = time.time() + 60
        while not any(o[0].startswith(marks.BUSY) for o in long.outputs()) and time.time() < deadline:
            time.sleep(0.1)
        long.cancel()  # a cancelled run releases the device: the next one completes
        after = client.predict(**pair, algorithm="tli", prompt="x", lookahead=4, max_new_tokens=4, api_name="/run")
        assert after[0].startswith(f"{marks.OK} **TLI**")
    finally:
        client.close()
        demo.close()


def test_a_model_too_large_for_the_machine_is_refused_before_loading(model_dirs, monkeypatch):
    monkeypatch.setattr(app.planning, "hub_params", lambda name: (70_000_000_000, "70 B parameters"))
    monkeypatch.setattr(app.planning, "available_bytes", lambda device: 16 * 2**30)
    status = list(app.run("meta-llama/Llama-3.1-70B", model_dirs["drafter"], "slem", form("x", max_new_tokens=4)))[-1][0]
    assert "ResourceLimitError" in status and "GB" in status and "free" in status


def test_describe_says_what_would_be_loaded_without_loading(model_dirs):
    text, choices = app.describe(model_dirs["target"], model_dirs["drafter"])
    assert choices["choices"] == app.ALGOS
    assert ("MB of weights" in text or "already loaded" in text) and "Check pair" in text
    assert app.describe("no-such-owner/x", "")[0][:1] in ("-", "⚠")  # offline: a note, never an exception


def test_advise_predicts_per_algorithm_and_lookahead(model_dirs):
    text = app.advise_pair(model_dirs["target"], model_dirs["drafter"], form("def f(x):\n"))
    assert "predicted speedup over AR by lookahead" in text
    assert "Use " in text or "No drafter setting is predicted to beat AR" in text
    assert "temperature must be" in app.advise_pair(model_dirs["target"], model_dirs["drafter"], form("x", temperature=-1))


def test_every_run_clears_the_previous_runs_outputs_and_an_error_leaves_none(model_dirs):
    first = _run(model_dirs)[0]
    assert first.output == "" and first.rounds_plot is None and first.state is None
    assert first.round_view == app.NO_RUN  # nothing of an earlier run is left while this one starts
    bad = _run(model_dirs, temperature=-1)[-1]
    assert bad.status.startswith(marks.ERROR) and bad.output == "" and bad.rounds_plot is None and bad.state is None
    compare_first = next(app.compare(model_dirs["target"], model_dirs["drafter"], form("x", max_new_tokens=4)))
    assert compare_first.speedup is None and compare_first.table is None and compare_first.badge == ""


def test_stop_says_stopped_only_while_something_runs():
    status, advice = app.stopped(f"{marks.BUSY} slem: round 9, 24 tokens…", f"{marks.BUSY} Advise: calibrating slem")
    assert status == app.STOPPED and advice.startswith(marks.STOPPED)
    assert app.stopped(f"{marks.OK} **SLEM**: 12 tokens", "**Use slem**") == (app.gr.update(), app.gr.update())


def test_choosing_a_local_pair_checks_it_so_no_rejected_algorithm_is_offered(model_dirs):
    out = app.pair_changed(model_dirs["target"], model_dirs["drafter"], "auto", "auto", "sd")
    assert "sd" not in out.algorithm["choices"] and f"{marks.NO} **sd**" in out.availability
    offered = app.pair_changed("no-such-owner/no-such-model", "", "auto", "auto", "slem")
    assert "Not checked yet" in offered.availability and offered.algorithm["choices"] == app.ALGOS


def test_an_example_fills_the_form_and_checks_its_pair_in_one_update():
    index = next(i for i, example in enumerate(app.EXAMPLES) if example[3] == "tli")
    out = app.example_chosen(index)
    assert out.prompt == app.EXAMPLES[index][2] and out.temperature == 1.0 and out.algorithm["value"] == "tli"
    expected = app.EXAMPLES[index][7] if len(app.EXAMPLES[index]) > 7 else None
    assert out.drafter_temperature == ("" if expected is None else str(expected))  # none: the text box is emptied
    assert Form(drafter_temperature=out.drafter_temperature).settings().drafter_temperature == expected
    assert "sd" not in out.algorithm["choices"] and f"{marks.NO} **sd**" in out.availability
    hub = app.example_chosen(len(app.EXAMPLES) - 1)  # a Hub pair not loaded: offered, not checked
    assert hub.algorithm["choices"] == app.ALGOS and "Not checked yet" in hub.availability


def test_examples_use_only_algorithms_their_pair_runs():
    for label, preset, _, algorithm, *_ in app.EXAMPLES:
        if preset in (app.EMBEDDED, app.BYTES, app.SHARED, app.SAMPLING):
            pair = app.get_pair(*app.PAIRS[preset], "cpu", "auto")
            assert algorithm in app.hsd.usable_algorithms(pair), label


def test_example_labels_fit_gradios_example_cell_uncut():
    from hsd.lab import EXAMPLE_LABEL_MAX

    for label, *_ in app.EXAMPLES:
        assert len(label) <= EXAMPLE_LABEL_MAX, label


@pytest.mark.parametrize("change,message", [
    (dict(max_new_tokens=600), "room for at most"),  # the tiny target's context is 512
    (dict(temperature=5), "temperature must be in 0..2"),
    (dict(lookahead=0), "lookahead must be in 1..16"),
])
def test_out_of_range_values_are_refused_with_their_range_not_clamped(model_dirs, change, message):
    status = _run(model_dirs, **change)[-1][0]
    assert status.startswith(marks.ERROR) and message in status


def test_max_new_tokens_box_states_the_room_the_pair_leaves(model_dirs):
    info = app.token_room(model_dirs["target"], model_dirs["drafter"], form("def f"))["info"]
    assert info.startswith("1..") and "for this pair and prompt" in info and int(info[3:].split()[0]) < 512


@pytest.fixture(scope="module")
def advised(model_dirs):
    """Every update of one Advise on the tiny pair (shared: a calibration takes a while on a CPU)."""
    return list(app.advise_live(model_dirs["target"], model_dirs["drafter"], form("def f(x):\n")))


def test_advise_reports_progress_and_only_calibrated_lookaheads(advised):
    assert any("about" in s and " s at AR's pace" in s for s in advised[:-1])
    assert any(s.startswith(f"{marks.BUSY} Advise") and "calibrating slrs" in s for s in advised)  # SLRS is considered
    assert "this k" in advised[-1] and "k=12" not in advised[-1]


def test_advise_in_the_app_calibrates_the_dynamic_lookahead_where_a_draft_threshold_applies(advised):
    lines = {line for s in advised[:-1] for line in s.removeprefix(f"{marks.BUSY} Advise: ").split("\n\n")}
    for t in app.lab.ADVISE_DRAFT_THRESHOLDS:
        label = f"12, stop < {t:g}"
        assert any(line.startswith("calibrating slem") and line.endswith(label) for line in lines), lines
        assert not any(line.startswith("calibrating slrs") and line.endswith(label) for line in lines)
        table_row = next(line for line in advised[-1].splitlines() if line.startswith(label))
        assert table_row.split()[-2:] == ["this", "setting"]
    assert "is the dynamic lookahead" in advised[-1] and "draft threshold θ in the form" in advised[-1]


def test_drafters_tab_measures_each_drafter_against_ar_in_one_run(model_dirs):
    out = list(app.drafters(model_dirs["target"], f"{model_dirs['drafter']}\n{model_dirs['target']}", "slem", 1,
                            form(lookahead=3, max_new_tokens=6)))
    busy = [o.status for o in out[:-1]]
    assert any(s.startswith(f"{marks.BUSY} Comparing 2 drafter(s) on 1 prompt(s)") for s in busy)  # what is ahead
    measured = [s for s in busy if " measured in " in s]  # an intermediate line is busy, never "done"
    assert len(measured) == 2 and all(s.startswith(marks.BUSY) for s in measured)
    assert "s left for 1 more" in measured[0] and "left" not in measured[1]  # the time left, from the first
    final = out[-1]
    assert final.status.startswith(f"{marks.OK} Compared 2 drafter(s)"), final.status
    assert list(final.table["algorithm"]) == ["slem", "slem"] and isinstance(final.figure, go.Figure)
    assert list(pd.read_csv(final.csv)["drafter"]) == [model_dirs["drafter"], model_dirs["target"]]
    bad = list(app.drafters(model_dirs["target"], "", "slem", 1, form(lookahead=3, max_new_tokens=6)))[-1]
    assert bad.status.startswith(marks.ERROR) and bad.table is None


def test_production_settings_name_both_engines(model_dirs):
    text = app.production(model_dirs["target"], model_dirs["drafter"], "tli", form(max_new_tokens=32))
    assert "vLLM" in text and "assistant_tokenizer" in text
    assert app.production(model_dirs["target"], model_dirs["drafter"], "tli",
                          form(max_new_tokens=32, temperature=-1)).startswith(marks.ERROR)


def test_drafters_tab_and_production_take_the_forms_drafter_temperature_and_draft_threshold(model_dirs):
    final = list(app.drafters(model_dirs["target"], f"{model_dirs['drafter']}\n", "slem", 1,
                              form(lookahead=6, max_new_tokens=6, drafter_temperature=0, draft_threshold=0.5)))[-1]
    assert final.status.startswith(marks.OK) and "drafter temperature 0, lookahead 6, draft threshold 0.5" in final.status
    bad = list(app.drafters(model_dirs["target"], f"{model_dirs['drafter']}\n", "slem", 1,
                            form(lookahead=6, max_new_tokens=6, draft_threshold=1.5)))[-1]
    assert bad.status.startswith(marks.ERROR) and "draft threshold must be in" in bad.status
    text = app.production(model_dirs["target"], model_dirs["drafter"], "slem",
                          form(lookahead=12, max_new_tokens=32, drafter_temperature=0, draft_threshold=0.5))
    assert "drafter temperature 0, draft threshold 0.5" in text
    assert "assistant_confidence_threshold = 0.5" in text and "vLLM has no equivalent of hsd's draft_threshold" in text
    assert app.production(model_dirs["target"], model_dirs["drafter"], "slem",
                          form(lookahead=12, max_new_tokens=32, drafter_temperature=-1)).startswith(marks.ERROR)


def test_stop_also_ends_a_drafter_comparison_in_progress():
    assert app.stopped(f"{marks.OK} done", "", f"{marks.BUSY} Loading the target…")[2].startswith(marks.STOPPED)


def test_the_special_token_checkbox_reaches_the_run_and_the_output_marks_parsed_text():
    target, drafter = app.PAIRS[app.EMBEDDED]
    prompt = "x = 1<|endoftext|>def f():"
    boxes = dict(lookahead=3, max_new_tokens=4)
    parsed = list(app.run(target, drafter, "slem", form(prompt, **boxes, parse_special=True), "cpu"))[-1]
    plain = list(app.run(target, drafter, "slem", form(prompt, **boxes, parse_special=False), "cpu"))[-1]
    eos = parsed.state["result"].prompt_ids.count(0)
    assert parsed.status.startswith(marks.OK) and plain.status.startswith(marks.OK)
    assert eos > plain.state["result"].prompt_ids.count(0)  # the text became <|endoftext|> (id 0) only when parsed
    assert "⚑" in parsed.output and "⚑" not in plain.output


def test_a_recorded_run_offers_each_verified_positions_picture_and_downloads_and_reloads(model_dirs):
    final = _run(model_dirs, "tli", temperature=1.0)[-1]
    assert app.picture_positions(final.state)["choices"] == []  # not recorded: nothing to pick
    figure, text = app.show_picture(final.state, None)
    assert figure is None and "record distributions" in text
    recorded = list(app.run(model_dirs["target"], model_dirs["drafter"], "tli",
                            form(temperature=1.0, record=True)))[-1]
    assert recorded.status.startswith(marks.OK), recorded.status
    choices = app.picture_positions(recorded.state)["choices"]
    assert choices and choices[0].startswith("round ")
    figure, text = app.show_picture(recorded.state, choices[0])
    assert isinstance(figure, go.Figure) and text and not text.startswith(marks.ERROR)
    assert app.show_picture(recorded.state, "round x")[1].startswith(marks.ERROR)
    json_path, html_path = app.download(recorded.state)
    assert json_path.endswith(".json") and "<html" in open(html_path, encoding="utf-8").read().lower()
    again = app.load_saved(json_path)
    assert again.status.startswith(marks.SAVED) and app.rerender(again.state, True) == recorded.output
    # the form keeps its settings beside the saved run's: the status says what that run was made with
    assert "That run: TLI on " in again.status and "sampling at T 1" in again.status
    assert "The form keeps its own settings" in again.status
    moved = app.pair_moved(again.state)  # a new pair chosen (Custom, a preset, a typed id) with a run on screen
    assert moved.startswith("The output below is from the last run (TLI on ") and "Press **Run**" in moved
    assert app.pair_moved(None) == app.gr.update()
    assert again.round_view == recorded.round_view
    assert app.picture_positions(again.state)["choices"] == choices  # the pictures travel with the run
    bad = app.load_saved(__file__)
    assert bad.status.startswith(marks.ERROR) and bad.state is None


def test_losslessness_check_draws_both_histograms_and_passes_for_an_honest_algorithm(model_dirs):
    out = list(app.lossless_check(model_dirs["target"], model_dirs["drafter"], "tli", 300,
                                  form(temperature=1.0, lookahead=3)))
    final = out[-1]
    assert final.status.startswith(marks.OK), final.status
    assert isinstance(final.figure, go.Figure)
    ar = list(app.lossless_check(model_dirs["target"], model_dirs["drafter"], "ar", 300,
                                 form(temperature=1.0, lookahead=3)))[-1]
    assert ar.status.startswith(marks.ERROR) and ar.figure is None


def test_losslessness_check_with_the_draws_box_at_zero_uses_the_algorithms_default(model_dirs, monkeypatch):
    from hsd import lossless

    seen = []
    real = lossless.iter_check
    monkeypatch.setattr(lossless, "iter_check", lambda *a, **k: seen.append(k["n"]) or real(*a, **{**k, "n": 50}))
    out = list(app.lossless_check(model_dirs["target"], model_dirs["drafter"], "slem", 0,
                                  form("def f(", temperature=1.0, lookahead=3)))[-1]
    assert seen == [lossless.default_n("slem")] and out.figure is not None
    bad = list(app.lossless_check(model_dirs["target"], model_dirs["drafter"], "slem", -5,
                                  form("def f(", temperature=1.0, lookahead=3)))[-1]
    assert bad.status.startswith(marks.ERROR) and "draws" in bad.status


def test_shared_noise_makes_a_sampled_slem_run_write_ars_text_and_compare_shows_it(model_dirs):
    """The shared-noise checkbox reaches the engine: a sampled SLEM run is AR's run token for token, Compare's
    badge says so for SLEM and says the others sampled apart; with TLI it is refused with the reason."""
    shared = form("def f(x):", temperature=0.8, seed=3, shared_noise=True)
    *_, slem = list(app.run(model_dirs["target"], model_dirs["drafter"], "slem", shared))[-1]
    *_, ar = list(app.run(model_dirs["target"], model_dirs["drafter"], "ar", shared))[-1]
    assert slem["result"].settings["noise"] == "shared"
    assert slem["result"].token_ids == ar["result"].token_ids
    status = list(app.run(model_dirs["target"], model_dirs["drafter"], "tli", shared))[-1][0]
    assert status.startswith(marks.ERROR) and "works with ar and slem only" in status
    out = list(app.compare(model_dirs["target"], model_dirs["drafter"], shared))
    status, badge, *_ = out[-1]
    assert status.startswith(f"{marks.OK} Compared"), status
    assert "Lossless with shared noise" in badge and "✓ slem: identical to AR" in badge
    assert "tli" in badge and "sampled with independent noise" in badge


def test_the_shared_noise_example_ticks_the_box_and_the_others_untick_it():
    shared = [i for i, e in enumerate(app.EXAMPLES) if len(e) > 9 and e[9]]
    assert len(shared) == 1 and "shared noise" in app.EXAMPLES[shared[0]][0]
    out = app.example_chosen(shared[0])
    assert out.shared_noise is True and out.algorithm["value"] == "slem" and out.temperature > 0
    assert app.example_chosen(0).shared_noise is False


def test_an_event_hands_the_handler_the_form_as_one_value_and_names_every_api_parameter():
    seen = []

    def handler(target, algorithm, form, device="auto"):
        seen.append((target, algorithm, form, device))
        yield "done"

    boxes = {name: f"<{name} box>" for name in FORM_FIELDS}
    fn, components = app._event(handler, ["t", "a", app.FORM, "d"], boxes)
    assert components == ["t", "a", *boxes.values(), "d"]
    params = list(app.inspect.signature(fn).parameters)
    assert params == ["target", "algorithm", *FORM_FIELDS, "device", "progress", "request"]  # the last two: Gradio's
    values = ["tiny", "slem", *[f"v-{name}" for name in FORM_FIELDS], "cpu"]
    assert list(fn(*values)) == ["done"]
    target, algorithm, got, device = seen[0]
    assert (target, algorithm, device) == ("tiny", "slem", "cpu")
    assert got == Form(**{name: f"v-{name}" for name in FORM_FIELDS})


def test_stop_during_a_comparison_says_the_comparison_stopped_not_the_run():
    busy = app._compare_out(status=f"{marks.BUSY} Repeat 1 (at most 5, 45 s): slem…").status
    assert busy.startswith(f"{marks.BUSY} Compare · Repeat 1")
    status, _ = app.stopped(busy, None)
    assert status == app.lab.STOPPED_COMPARE and "The Output tab still shows the last Run" in status
    assert app.stopped(f"{marks.BUSY} slem: round 9, 24 tokens…", None)[0] == app.STOPPED  # a run: its output stays


def test_a_cleared_summary_table_shows_the_summarys_columns(model_dirs):
    from hsd import viz

    cleared = app.build().blocks  # the components as built
    table = next(b for b in cleared.values() if getattr(b, "label", None) == "summary")
    assert list(table.postprocess(None).headers) == list(viz.SUMMARY_COLUMNS)
    results = {"ar": hsd_generate(model_dirs, "ar"), "slem": hsd_generate(model_dirs, "slem")}
    assert list(viz.summary_table(results).columns[:len(viz.SUMMARY_COLUMNS)]) == list(viz.SUMMARY_COLUMNS)


def hsd_generate(model_dirs, algorithm):
    import hsd

    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"])
    return hsd.generate(pair, "def f(x):", algorithm=algorithm, max_new_tokens=4)


def test_what_the_page_says_uses_its_own_words():
    from hsd.errors import InvalidSettingError

    refusal = app.lab.error_text(InvalidSettingError(
        "noise='shared' works with slem only, not 'tli': ... Use noise='independent' (the default) with them."))
    assert "noise=" not in refusal and "shared noise works with slem only" in refusal
    assert refusal.endswith("Untick shared noise for them.")


def test_lossless_at_temperature_0_says_there_is_nothing_to_sample(model_dirs):
    from hsd import lossless

    greedy = app.lossless_check(model_dirs["target"], model_dirs["drafter"], "slem", 50, Form("def f(x):"))
    status = list(greedy)[-1].status
    assert "At temperature 0 there is nothing to sample" in status
    sampled = list(app.lossless_check(model_dirs["target"], model_dirs["drafter"], "slem", 50,
                                      Form("def f(x):", temperature=1.0)))[-1].status
    assert "nothing to sample" not in sampled and lossless.SIMULATIONS


def test_the_slrs_cost_line_leaves_out_a_mean_its_outliers_own():
    from hsd.algorithms.slrs import _cost_lines

    line = _cost_lines({"paths_median": 44, "paths_mean": 1.07e18, "paths_p99": 7_021_436, "paths_max": 2 * 10**18,
                        "default_budget": 4096, "heavy_share": 0.051, "recommendation": "r"})[0]
    assert "median 44, 99th percentile 7,021,436" in line and "mean" not in line
