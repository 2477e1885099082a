"""The Gradio app: handlers called directly on two tiny local models, then the launched app via gradio_client."""

import time

import pandas as pd
import plotly.graph_objects as go
import pytest

import app

SETTINGS = dict(temperature=0, top_k=0, top_p=1.0, lookahead=4, max_new_tokens=12, seed=0)


def _run(model_dirs, algorithm="slem", prompt="def fib(n):", **over):
    s = {**SETTINGS, **over}
    return list(app.run(model_dirs["target"], model_dirs["drafter"], algorithm, prompt, s["temperature"], s["top_k"],
                        s["top_p"], s["lookahead"], s["max_new_tokens"], s["seed"]))


def test_run_streams_coloured_output_then_the_round_view(model_dirs):
    updates = _run(model_dirs, "tli")
    status, html, slider, view, plot, state = updates[-1]
    assert status.startswith("✅ **tli**") and "tokens/s" in status
    assert any(u[0].startswith("⏳ Loading") for u in updates)
    assert "hsd-output" in html and "hsd-legend" in html and "#22c55e" in html
    assert any(f"hsd-{label}" in html for label in ("accepted", "corrected", "bonus"))
    assert slider["maximum"] == len(state["result"].rounds) - 1
    assert 'class="hsd-drafter-tok"' in view and 'class="hsd-target-tok"' in view and "q′ (proposal)" in view
    assert isinstance(plot, go.Figure) and [t.name for t in plot.data][-1] == "tokens emitted"
    assert "hsd-round" in app.show_round(state, 0)
    assert app.step_round(state, 0, -1) == 0 and app.step_round(state, 10**6, 1) == len(state["result"].rounds) - 1
    assert "hsd-rejected" not in app.rerender(state, False)


def test_ar_run_needs_no_drafter(model_dirs):
    status, *_ = list(app.run(model_dirs["target"], "", "ar", "x = ", 0, 0, 1.0, 4, 6, 0))[-1]
    assert status.startswith("✅ **ar**")


def test_compare_runs_every_applicable_algorithm(model_dirs):
    s = SETTINGS
    out = list(app.compare(model_dirs["target"], model_dirs["drafter"], "def f(x):", s["temperature"], s["top_k"],
                           s["top_p"], s["lookahead"], s["max_new_tokens"], s["seed"]))
    status, badge, speedup, tokens_time, hist, positions, split, table, csv = out[-1]
    ran = ["ar"] + [a for a in app.ALGOS if a not in ("ar", "sd")]  # sd needs a shared vocabulary; slrs if present
    assert status.startswith(f"✅ Compared {', '.join(ran)}") and "not applicable here: sd" in status
    assert all(f"✓ {a}: identical to AR" in badge for a in ran[1:])
    assert all(isinstance(f, go.Figure) for f in (speedup, tokens_time, hist, positions, split))
    assert [t.type for t in speedup.data] == ["bar", "bar"] and list(speedup.data[0].x) == ran[1:]
    assert [t.name for t in tokens_time.data] == ran
    assert isinstance(table, pd.DataFrame) and list(table["algorithm"]) == ran
    assert {"tokens/s", "TTFT (ms)", "TPOT (ms)", "τ", "acceptance rate", "target forwards"} <= set(table.columns)
    assert list(pd.read_csv(csv)["algorithm"]) == ran


def test_check_pair_reports_compatibility_and_why_sd_is_off(model_dirs):
    report, availability, choices = app.check_pair(model_dirs["target"], model_dirs["drafter"], "auto", "auto", "sd")
    assert "intersection:" in report and "round-trip" in report and "What this means" in report
    assert "✅ **slem**" in availability and "⛔ **sd**: 'sd' needs a shared vocabulary" in availability
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
    updates = list(app.run(args["target"], args["drafter"], args["algorithm"], args["prompt"], args["temperature"],
                           args["top_k"], args["top_p"], args["lookahead"], args["max_new_tokens"], args["seed"]))
    status = updates[-1][0]
    assert status.startswith("⚠️") and message in status and "Traceback" not in status
    assert _run(model_dirs)[-1][0].startswith("✅")  # the next run works


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
        s = SETTINGS
        job = client.submit(model_dirs["target"], model_dirs["drafter"], "slem", "def f(x):", s["temperature"],
                            s["top_k"], s["top_p"], s["lookahead"], s["max_new_tokens"], s["seed"], "raw", "cpu",
                            "auto", True, api_name="/run")
        outputs = job.result(timeout=120) and job.outputs()
        assert len(outputs) >= 3 and outputs[-1][0].startswith("✅ **slem**") and "hsd-output" in outputs[-1][1]
        job = client.submit(model_dirs["target"], model_dirs["drafter"], "def f(x):", s["temperature"], s["top_k"],
                            s["top_p"], s["lookahead"], 8, s["seed"], "raw", "cpu", "auto", api_name="/compare")
        job.result(timeout=120)
        final = job.outputs()[-1]
        assert final[0].startswith("✅ Compared") and "identical to AR" in final[1]
        assert final[2]["type"] == "plotly" and final[7]["headers"][0] == "algorithm"
        bad = client.predict("", "", "slem", "x", 0, 0, 1.0, 4, 4, 0, "raw", "cpu", "auto", True, api_name="/run")
        assert bad[0].startswith("⚠️")
        long = client.submit(model_dirs["target"], model_dirs["drafter"], "slem", "x", 0, 0, 1.0, 1, 400, 0, "raw",
                             "cpu", "auto", True, api_name="/run")
        deadline = time.time() + 60
        while not any(o[0].startswith("▶️") for o in long.outputs()) and time.time() < deadline:
            time.sleep(0.1)
        long.cancel()  # a cancelled run releases the device: the next one completes
        after = client.predict(model_dirs["target"], model_dirs["drafter"], "tli", "x", 0, 0, 1.0, 4, 4, 0, "raw",
                               "cpu", "auto", True, api_name="/run")
        assert after[0].startswith("✅ **tli**")
    finally:
        client.close()
        demo.close()


def test_a_model_too_large_for_the_machine_is_refused_before_loading(model_dirs, monkeypatch):
    monkeypatch.setattr(app.planning, "hub_params", lambda name: (70_000_000_000, "70 B parameters"))
    monkeypatch.setattr(app.planning, "available_bytes", lambda device: 16 * 2**30)
    status = list(app.run("meta-llama/Llama-3.1-70B", model_dirs["drafter"], "slem", "x", 0, 0, 1.0, 4, 4, 0))[-1][0]
    assert "ResourceLimitError" in status and "GB" in status and "free" in status


def test_describe_says_what_would_be_loaded_without_loading(model_dirs):
    text, choices = app.describe(model_dirs["target"], model_dirs["drafter"])
    assert choices["choices"] == app.ALGOS
    assert ("MB of weights" in text or "already loaded" in text) and "Check pair" in text
    assert app.describe("no-such-owner/x", "")[0][:1] in ("-", "⚠")  # offline: a note, never an exception


def test_advise_predicts_per_algorithm_and_lookahead(model_dirs):
    text = app.advise_pair(model_dirs["target"], model_dirs["drafter"], "def f(x):\n", 0.0)
    assert "predicted speedup over AR by lookahead" in text
    assert "Use " in text or "No drafter setting is predicted to beat AR" in text
    assert "temperature must be" in app.advise_pair(model_dirs["target"], model_dirs["drafter"], "x", -1)
