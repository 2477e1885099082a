"""ZeroGPU, with ``SPACES_ZERO_GPU`` set and a stand-in ``spaces`` module: decorated handlers and their durations,
presets loaded before any GPU call, user models loaded outside it, ZeroGPU's failures as status sentences, the
Space's front matter and requirements."""

import dataclasses
import functools
import inspect
import logging
import os
import sys
import types
from pathlib import Path

import gradio as gr
import pytest
from huggingface_hub import SpaceCard

import hsd
from hsd import catalogue, cli, durations, loading, marks, planning, refusals, zerogpu
from hsd.forms import Form

ROOT = Path(__file__).resolve().parent.parent
EMBEDDED = "tiny-code (embedded, offline, CPU)"
#: the handlers' signatures, which the lead keeps in app.py (each duration function has its handler's)
#: the app's GPU parts (and so their durations): the decoding form travels as one hsd.forms.Form
SIGNATURES = {
    "run": ["target", "drafter", "algorithm", "form", "device", "dtype", "show_rejected", "progress"],
    "compare": ["target", "drafter", "form", "device", "dtype", "progress"],
    "advise_live": ["target", "drafter", "form", "device", "dtype"],
}
FORM_KEYS = ("prompt", "mode", "temperature", "top_k", "top_p", "lookahead", "max_new_tokens", "seed")


class FakeSpaces(types.ModuleType):
    """``spaces`` as ZeroGPU runs it, minus the GPU: ``GPU(duration=...)`` records what it decorates; a call
    computes the duration with the handler's own arguments (as spaces' wrapper does before scheduling), may
    fail as the scheduler does (``fail``), and marks the handler's run as inside the GPU (``in_gpu``)."""

    def __init__(self):
        super().__init__("spaces")
        self.decorated, self.calls, self.fail, self.in_gpu = [], [], [], False

    def GPU(self, task=None, *, duration=None, size=None):  # noqa: N802 - spaces' name
        def decorate(fn):
            self.decorated.append((fn.__name__, duration))

            def schedule(args, kwargs):
                seconds = duration(*args, **kwargs) if callable(duration) else duration
                self.calls.append((fn.__name__, seconds))
                if self.fail:
                    raise self.fail.pop(0)

            if inspect.isgeneratorfunction(fn):
                @functools.wraps(fn)
                def wrapper(*args, **kwargs):
                    schedule(args, kwargs)
                    self.in_gpu = True
                    try:
                        yield from fn(*args, **kwargs)
                    finally:
                        self.in_gpu = False
            else:
                @functools.wraps(fn)
                def wrapper(*args, **kwargs):
                    schedule(args, kwargs)
                    self.in_gpu = True
                    try:
                        return fn(*args, **kwargs)
                    finally:
                        self.in_gpu = False
            return wrapper
        return decorate if task is None else decorate(task)


@pytest.fixture
def spaces(monkeypatch):
    fake = FakeSpaces()
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    monkeypatch.setitem(sys.modules, "spaces", fake)
    return fake


@pytest.fixture
def loads(monkeypatch, spaces):
    """Every model load, with whether it happened inside a GPU function; the cache starts empty."""
    seen, real = [], loading._load

    def recording(name, *args, **kwargs):
        seen.append((name, spaces.in_gpu))
        return real(name, *args, **kwargs)

    loading.clear_cache()
    monkeypatch.setattr(loading, "_load", recording)
    monkeypatch.setattr(loading, "MAX_CACHED_MODELS", loading.MAX_CACHED_MODELS)  # restored after the test
    yield seen
    loading.clear_cache()


def status(text):
    return {"status": f"⚠️ {text}"}


def handlers():
    """Handlers shaped like app.py's (same signatures), decorated as the app decorates them."""
    @zerogpu.gpu(durations.run_duration, on_error=status)
    def run(target, drafter, algorithm, form, device="auto", dtype="auto", show_rejected=True, progress=None):
        pair = planning.load_named_pair(target, drafter, device, dtype)
        result = hsd.generate(pair, form.prompt, algorithm=algorithm, max_new_tokens=8, lookahead=int(form.lookahead),
                              temperature=form.temperature, seed=form.seed)
        yield {"status": f"✅ {len(result.token_ids)} tokens"}

    @zerogpu.gpu(durations.compare_duration, on_error=status)
    def compare(target, drafter, form, device="auto", dtype="auto", progress=None):
        yield {"status": "compared"}

    @zerogpu.gpu(durations.advise_duration, on_error=status)
    def advise_live(target, drafter, form, device="auto", dtype="auto"):
        yield "advised"

    return run, compare, advise_live


def default_args(name):
    """The app's default request, positionally, as Gradio passes it (the progress tracker included)."""
    r = {**durations.DEFAULT_REQUEST, "show_rejected": True, "progress": object(),
         "form": Form(**{k: durations.DEFAULT_REQUEST[k] for k in FORM_KEYS})}
    return [r[p] for p in SIGNATURES[name]]


def with_changes(args: dict, **change) -> dict:
    """A handler's arguments with ``change``, each a handler argument or a field of its form."""
    form = {k: v for k, v in change.items() if k in FORM_KEYS}
    return {**args, **{k: v for k, v in change.items() if k not in FORM_KEYS},
            "form": dataclasses.replace(args["form"], **form)}


# ----------------------------------------------------------------------------- durations

def test_duration_functions_have_their_handlers_signatures():
    for name, fn in [("run", durations.run_duration), ("compare", durations.compare_duration),
                     ("advise_live", durations.advise_duration)]:
        assert list(inspect.signature(fn).parameters) == SIGNATURES[name], name


def test_the_drafters_duration_has_its_handlers_signature_with_the_form():
    app = pytest.importorskip("app")
    names = list(inspect.signature(durations.drafters_duration).parameters)
    assert names == list(inspect.signature(app._drafters_on_device).parameters)
    assert names[-4:] == ["form", "device", "dtype", "progress"]


def test_app_handlers_still_have_the_signatures_the_durations_assume():
    app = pytest.importorskip("app")
    parts = {"run": app._run_on_device, "compare": app._compare_on_device, "advise_live": app._advise_on_device}
    for name, params in SIGNATURES.items():
        assert list(inspect.signature(parts[name]).parameters) == params, name
        public = [p for p in params if p != "progress"]  # the page's wiring adds Gradio's progress tracker
        assert list(inspect.signature(getattr(app, name)).parameters) == public, name


def test_handlers_are_decorated_and_the_default_request_fits_an_unauthenticated_quota(spaces):
    run, compare, advise = handlers()
    assert [name for name, _ in spaces.decorated] == ["run", "compare", "advise_live"]
    assert [d for _, d in spaces.decorated] == [durations.run_duration, durations.compare_duration,
                                                durations.advise_duration]
    assert inspect.isgeneratorfunction(run) and list(inspect.signature(run).parameters) == SIGNATURES["run"]
    list(compare(*default_args("compare")))
    list(advise(*default_args("advise_live")))
    asked = dict(spaces.calls)
    table = durations.quota_table()
    # the table is a started Space's bound (every algorithm assumed); a checked pair may need fewer
    assert 0 < asked["compare"] <= table["unauthenticated"]["compare_s"]
    quota = durations.QUOTAS["unauthenticated"]
    for name in ("compare",):  # the scheduler checks duration x the GPU's factor against the quota left
        assert round(asked[name] * durations.DURATION_FACTOR) <= quota, durations
    assert 0 < asked["advise_live"] <= durations.ADVISE_CAP_S
    # the run's duration: what the stand-in recorded when the handler was called with the default request
    assert 0 < durations.run_duration(*default_args("run")) <= table["unauthenticated"]["run_s"]
    assert round(table["unauthenticated"]["run_s"] * durations.DURATION_FACTOR) <= quota
    assert table["unauthenticated"]["runs"] >= 3 and table["unauthenticated"]["compares"] >= 1


def test_the_quota_numbers_in_docstrings_and_docs_are_the_models():
    t = durations.quota_table()
    run_doc, cmp_doc = durations.run_duration.__doc__, durations.compare_duration.__doc__
    req = {k: round(t["PRO"][f"{k}_s"] * durations.DURATION_FACTOR) for k in ("run", "compare")}
    assert f"asks\n    for {t['PRO']['run_s']} s, checked against the quota as {req['run']} s" in run_doc
    assert (f"at least {t['unauthenticated']['runs']} default runs unauthenticated (2 min), "
            f"{t['free account']['runs']} with a\n    free account (5 min), {t['PRO']['runs']} with PRO or Team "
            f"(40 min) and {t['Enterprise']['runs']} with Enterprise") in run_doc
    assert f"asks for {t['PRO']['compare_s']} s, checked as {req['compare']} s" in cmp_doc
    assert (f"at least {t['unauthenticated']['compares']} a day unauthenticated, {t['free account']['compares']} "
            f"with a free\n    account, {t['PRO']['compares']} with PRO or Team and {t['Enterprise']['compares']} "
            f"with Enterprise") in cmp_doc
    docs = (ROOT / "docs" / "app.md").read_text()
    deploy = docs[docs.index("## Deploy"):]
    for tier, row in t.items():
        assert f"| {tier} | {durations.QUOTAS[tier] // 60} min | {row['runs']} | {row['compares']} |" in deploy, tier
    assert f"asks for {t['PRO']['run_s']} s" in deploy and f"asks for {t['PRO']['compare_s']} s" in deploy


def test_durations_follow_the_request_and_never_fail():
    base = dict(zip(SIGNATURES["run"], default_args("run")))

    def run(**change):
        return durations.run_duration(**with_changes(base, **change))

    assert run(max_new_tokens=512) > run() > run(max_new_tokens=8)
    assert run(algorithm="slrs") > run(algorithm="slem") > run(algorithm="ar")
    assert run(lookahead=12) > run(lookahead=2)
    big = dict(target="deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", drafter="double7/vicuna-68m")
    assert run(**big) > run()
    assert run(**big, max_new_tokens=1024, algorithm="slrs", lookahead=16) == durations.RUN_CAP_S  # capped
    for junk in (dict(max_new_tokens=None), dict(lookahead="abc"), dict(target="not a model!"),
                 dict(algorithm="nope"), dict(prompt=None)):
        assert isinstance(run(**junk), int) and run(**junk) > 0, junk
    args = dict(zip(SIGNATURES["compare"], default_args("compare")))
    assert durations.compare_duration(**with_changes(args, max_new_tokens=512)) > durations.compare_duration(**args)


def test_the_duration_counts_what_a_fresh_worker_copies_to_its_gpu(monkeypatch):
    r = durations.DEFAULT_REQUEST
    args = (r["target"], r["drafter"], "slem", r["prompt"], 5, 96)
    on = durations.estimate_run(*args, zerogpu=True)
    off = durations.estimate_run(*args, zerogpu=False)
    moved = durations.preset_bytes() / durations.MOVE_BANDWIDTH
    assert on.parts["worker start"] == pytest.approx(durations.WORKER_START_S + moved, rel=0.01)
    assert off.parts["worker start"] == pytest.approx(durations.WORKER_START_S, rel=0.01)  # the embedded pair only


def test_advise_duration_counts_a_dynamic_lookahead_run_per_draft_threshold(monkeypatch):
    r = durations.DEFAULT_REQUEST
    args = (r["target"], r["drafter"], r["prompt"], "auto", "auto", False)
    assert durations.ADVISE_DRAFT_THRESHOLDS == hsd.advise.DRAFT_THRESHOLDS == (0.5, 0.7)  # what the app calibrates
    both = durations.estimate_advise(*args)
    monkeypatch.setattr(durations, "ADVISE_DRAFT_THRESHOLDS", (0.5,))
    one = durations.estimate_advise(*args)
    monkeypatch.setattr(durations, "ADVISE_DRAFT_THRESHOLDS", ())
    none = durations.estimate_advise(*args)
    assert none.parts["dynamic lookahead"] == 0
    assert one.parts["dynamic lookahead"] > 0
    assert both.parts["dynamic lookahead"] == pytest.approx(2 * one.parts["dynamic lookahead"])
    assert both.parts["calibration"] == none.parts["calibration"]  # the fixed lookaheads cost the same
    assert both.parts["forward costs"] > none.parts["forward costs"]  # target forwards up to 2 x 12 + 2 tokens
    assert both.seconds > none.seconds and 0 < both.duration <= durations.ADVISE_CAP_S


# ----------------------------------------------------------------------------- loading outside the GPU

def test_presets_are_loaded_at_start_up_before_any_gpu_call(spaces, loads, monkeypatch, caplog):
    monkeypatch.setattr(zerogpu, "preload_device", lambda: "cpu")  # ZeroGPU's cuda, played by the CPU here
    embedded = catalogue.startup_pairs(zerogpu=False)
    assert set(embedded) == {EMBEDDED, "tiny-code-bytes (embedded target, byte-level drafter: SLRS at its cheapest)",
                             "tiny-code-shared (embedded target, same-vocabulary drafter: classic SD)",
                             "tiny-code-sampling (embedded target, drafter trained on its distribution: TLI at T=1)"}
    presets = {**embedded, "broken": ("no-such-owner/no-such-model", "")}
    with caplog.at_level(logging.WARNING, logger="hsd.zerogpu"):
        loaded = zerogpu.preload(presets)
    assert loaded == list(embedded)  # the broken one is logged, not raised
    assert "could not preload broken" in caplog.text
    assert loading.MAX_CACHED_MODELS >= 5 + 1 + 2  # every preset model and one more pair stay cached
    target, drafter = catalogue.GALLERY[EMBEDDED]
    assert zerogpu.pair_loaded(target, drafter, "cpu") and zerogpu.missing_models(target, drafter, "cpu") == []
    loaded_before = len(loads)  # the five embedded models, and the broken preset's attempt
    assert loaded_before == 6 and not any(in_gpu for _, in_gpu in loads)

    run, _, _ = handlers()
    args = default_args("run")
    args[SIGNATURES["run"].index("device")] = "cpu"
    out = list(run(*args))
    assert out[-1]["status"] == "✅ 8 tokens" and spaces.calls[0][0] == "run"
    assert len(loads) == loaded_before  # the GPU function loaded nothing: the presets were there


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_load_in_progress_when_zerogpu_forks_its_worker_does_not_hang_the_worker(spaces, monkeypatch):
    monkeypatch.setattr(zerogpu, "preload_device", lambda: "cpu")
    zerogpu.preload({})  # on ZeroGPU, preload makes hsd's locks fork-safe
    with planning._LOAD_LOCK, loading._LOCK:  # another visitor's model loading on another thread
        pid = os.fork()
        if pid == 0:  # the GPU worker: its first look at the cache takes these locks
            ok = planning._LOAD_LOCK.acquire(timeout=5) and loading._LOCK.acquire(timeout=5)
            os._exit(0 if ok else 1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def test_a_typed_model_is_loaded_in_the_main_process_and_only_generation_runs_on_the_gpu(spaces, loads, model_dirs):
    target, drafter = model_dirs["target"], model_dirs["drafter"]
    assert zerogpu.missing_models(target, drafter) == [target, drafter]
    steps = list(zerogpu.load_steps(target, drafter))
    assert steps[0].startswith(f"{marks.BUSY} Loading") and "outside the GPU queue" in steps[0]
    assert "- the next GPU call copies these ≈0.0 GB onto its GPU (≈0 s, within the GPU time it asks for" in steps[0]
    assert isinstance(steps[-1], hsd.Pair) and zerogpu.pair_loaded(target, drafter)
    assert [name for name, in_gpu in loads if not in_gpu] == [target, drafter] and len(loads) == 2
    assert list(zerogpu.load_steps(target, drafter))[0] is steps[-1]  # loaded: the Pair at once

    run, _, _ = handlers()
    args = dict(zip(SIGNATURES["run"], default_args("run")), target=target, drafter=drafter, algorithm="tli")
    assert list(run(**args))[-1]["status"] == "✅ 8 tokens"
    assert len(loads) == 2  # nothing loaded inside the GPU function


def test_a_pair_too_large_for_zerogpu_is_refused_and_one_beside_the_presets_evicts_them(monkeypatch):
    monkeypatch.setenv("SPACES_ZERO_GPU", "1")
    with pytest.raises(hsd.errors.ResourceLimitError, match="ZeroGPU"):  # 59 GB of weights
        zerogpu.make_room("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B", "microsoft/phi-4", "auto", "auto")
    evicted = []
    monkeypatch.setattr(zerogpu, "resident_bytes", lambda: int(durations.preset_bytes()))
    monkeypatch.setattr(loading, "release_models", lambda keep=(): evicted.append(keep) or 3)
    assert zerogpu.make_room("microsoft/phi-4", "Qwen/Qwen2.5-0.5B-Instruct", "auto", "auto") == 3
    assert evicted == [()]
    assert zerogpu.make_room("Qwen/Qwen2.5-0.5B-Instruct", "", "auto", "auto") == 0  # fits beside them


# ----------------------------------------------------------------------------- ZeroGPU's failures

QUOTA = "You have exceeded your ZeroGPU quota (30s requested vs. 12s left). Try again in 3:12:00. "


def test_a_quota_error_becomes_a_readable_status_and_the_handler_never_runs(spaces):
    run, _, _ = handlers()
    spaces.fail.append(gr.Error(QUOTA, title="ZeroGPU quota exceeded", print_exception=False))
    out = list(run(*default_args("run")))
    assert len(out) == 1 and not spaces.in_gpu
    text = out[0]["status"]
    assert text.startswith("⚠️ Your daily ZeroGPU quota is used up (this request needs 30 s of GPU time and 12 s "
                           "are left)")
    for advice in ("lower max new tokens", "log in to Hugging Face", "resets in 3:12:00", "CPU"):
        assert advice in text, advice


def test_other_errors_pass_through_the_guard(spaces):
    @zerogpu.gpu(durations.advise_duration, on_error=status)
    def advise_live(target, drafter, form, device="auto", dtype="auto"):
        raise ValueError("a bug")
        yield

    spaces.fail.append(gr.Error("Cannot divide by zero!"))
    with pytest.raises(gr.Error):
        list(advise_live("a", "b", Form("p")))
    with pytest.raises(ValueError, match="a bug"):
        list(advise_live("a", "b", Form("p")))


class HTMLError(gr.Error):  # what spaces raises for a queue timeout
    pass


@pytest.mark.parametrize("exc, kind, says", [
    (gr.Error(QUOTA, title="ZeroGPU quota exceeded"), "quota", "log in to Hugging Face"),
    (gr.Error("You have exceeded your free ZeroGPU quota (60s requested vs. 40s left). Try again in 0:20:00. ",
              title="ZeroGPU quota exceeded"), "quota", "get PRO"),
    (gr.Error("You have exceeded your Pro ZeroGPU quota (60s requested vs. 0s left). Try again in 1:00:00. ",
              title="ZeroGPU quota exceeded"), "quota", "add credits"),
    (gr.Error("You have exceeded your ZeroGPU runs limit. ", title="ZeroGPU quota exceeded"), "runs-limit",
     "wait until your quota resets"),
    (gr.Error("Space app has reached its GPU limit. Try re-running outside of examples if it happened after "
              "clicking one", title="ZeroGPU quota exceeded"), "space-limit", "pass a token"),
    (gr.Error("No GPU was available after 60s. Try re-running outside of examples if it happened after clicking one",
              title="ZeroGPU quota exceeded"), "no-gpu", "try again in a minute"),
    (HTMLError("No GPU was available after 60s. <a href='x'>Create a free account</a>",
               title="ZeroGPU queue timeout"), "no-gpu", "logged-in visitors wait in a faster queue"),
    (gr.Error("No GPU was available", title="ZeroGPU client error"), "no-gpu", "try again in a minute"),
    (gr.Error("The requested GPU duration (450s) is larger than the maximum allowed",
              title="ZeroGPU illegal duration"), "duration", "lower max new tokens"),
    (gr.Error("GPU task aborted", title="ZeroGPU worker error"), "aborted", "fewer max new tokens"),
    (gr.Error("RuntimeError", title="ZeroGPU worker error"), "worker", "RuntimeError"),
    (gr.Error("Expired ZeroGPU proxy token", title="ZeroGPU client error"), "session", "reload the page"),
    (gr.Error("You have too many ZeroGPU credits allocated to running tasks. Try again once some of those tasks "
              "have completed.", title="ZeroGPU pending credits exceeded"), "credits", "finished"),
    (gr.Error(QUOTA), "quota", "log in"),  # no ZeroGPU title (an old gradio): the message pattern decides
    (RuntimeError("Connection closed by visitor while queueing"), "left", "reload"),
])
def test_each_zerogpu_failure_is_classified_and_says_what_to_do(exc, kind, says):
    assert refusals.classify_gpu_error(exc).kind == kind
    text = refusals.explain_gpu_error(exc)
    assert says in text and "\n" not in text and text.endswith(".")


@pytest.mark.parametrize("exc", [gr.Error("Cannot divide by zero!"), ValueError("GPU task aborted"),
                                 hsd.errors.HsdError("quota"), RuntimeError("CUDA out of memory")])
def test_errors_that_are_not_zerogpus_are_left_alone(exc):
    assert refusals.classify_gpu_error(exc) is None and refusals.explain_gpu_error(exc) is None


def test_the_cpu_space_is_named_when_configured(monkeypatch):
    monkeypatch.setenv(refusals.CPU_SPACE_ENV, "someone/hsd-cpu")
    assert "https://huggingface.co/spaces/someone/hsd-cpu" in refusals.explain_gpu_error(
        gr.Error(QUOTA, title="ZeroGPU quota exceeded"))


def test_without_spaces_the_decorator_is_the_identity(monkeypatch):
    monkeypatch.setitem(sys.modules, "spaces", None)  # import spaces raises ImportError
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)

    def f(x):
        return x

    assert zerogpu.gpu(30)(f) is f and not zerogpu.on_zerogpu()
    assert zerogpu.gpu(30, on_error=status)(f)(2) == 2


# ----------------------------------------------------------------------------- presets and the Space's files

def front_matter():
    return SpaceCard((ROOT / "README.md").read_text(encoding="utf-8")).data


def test_preload_from_hub_lists_exactly_what_the_presets_need():
    data = front_matter()
    assert data.preload_from_hub == catalogue.preload_hub_ids()
    assert set(catalogue.preload_hub_ids()) == {n for label, pair in catalogue.startup_pairs(zerogpu=True).items()
                                                for n in pair if n and loading.embedded_path(n) is None}
    hub = list(dict.fromkeys(n for pair in catalogue.GALLERY.values() for n in pair if n and not n.startswith("assets/")))
    assert data.models == hub  # the Space card links every Hub model it offers
    assert data.python_version in zerogpu.SUPPORTED_PYTHON and data.python_version == zerogpu.SPACE_PYTHON


def test_every_hub_pair_is_described_and_the_preloaded_ones_can_be():
    hub_labels = [label for label, (t, _) in catalogue.GALLERY.items() if t and not t.startswith("assets/")]
    assert [p.label for p in catalogue.HUB_PAIRS] == hub_labels
    assert set(catalogue.HUB_MODELS) == {n for p in catalogue.HUB_PAIRS for n in (p.target, p.drafter)}  # one list
    for p in catalogue.HUB_PAIRS:
        names = [n for n in (p.target, p.drafter) if n]
        gated = any(n.split("/")[0] in ("google", "meta-llama") for n in names)
        assert p.gated == gated, p.label
        assert not (p.preload and p.gated), p.label  # gated models cannot be preloaded
        if p.preload:
            assert p.measured and p.sped_up is not None, p.label  # measured by the paper's benchmark
            assert all(catalogue.HUB_MODELS[n].params * 2 <= durations.GPU_BYTES for n in names)
    preloaded = [p for p in catalogue.HUB_PAIRS if p.preload]
    assert any(p.sped_up for p in preloaded)
    assert durations.preset_bytes() <= durations.WEIGHTS_BUDGET < durations.XLARGE_THRESHOLD_BYTES
    r1 = catalogue.hub_pair("DeepSeek-R1-Distill-Qwen-14B ← vicuna-68m (paper, reasoning)")
    assert "1.59× with SLEM at T=0" in r1.summary() and "Preloaded on the ZeroGPU Space" in r1.summary()
    bad = catalogue.hub_pair("Llama-3.1-8B-Instruct ← Qwen2.5-0.5B-Instruct (bad drafter)")
    assert "**slower** than AR: 0.17× with SLEM" in bad.summary() and "Gated" in bad.summary()
    assert catalogue.hub_pair(EMBEDDED) is None and "offline" in catalogue.pair_note(EMBEDDED)
    assert catalogue.pair_note(r1.label) == r1.summary() and catalogue.pair_note(catalogue.CUSTOM) == ""


def test_space_push_dry_run_for_zerogpu_writes_requirements_with_a_supported_torch(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    out = tmp_path / "space"
    assert cli.main(["space", "push", "someone/hsd-demo", "--dry-run", "--hardware", "zero-a10g", "--out", str(out)]) == 0
    assert "wrote the" in capsys.readouterr().out
    requirements = (out / "requirements.txt").read_text().splitlines()
    assert [line.split("#")[0].strip() for line in requirements if line.startswith("torch")] == \
        [f"torch=={zerogpu.SPACE_TORCH}"]
    assert zerogpu.SPACE_TORCH in zerogpu.SUPPORTED_TORCH and "pytest" not in "\n".join(requirements)
    card = SpaceCard((out / "README.md").read_text()).data
    assert card.python_version == zerogpu.SPACE_PYTHON and card.preload_from_hub == catalogue.preload_hub_ids()
    assert (out / "app.py").read_bytes() == (ROOT / "app.py").read_bytes()
    assert cli.main(["space", "push", "someone/hsd-demo", "--out", str(tmp_path / "x")]) == 2  # only with --dry-run


def test_the_app_loads_outside_its_gpu_functions_and_reports_a_quota_error(spaces, loads, monkeypatch):
    """app.py as a ZeroGPU Space runs it: its GPU parts are decorated with the durations, the models load in the
    main process before the GPU part starts, and ZeroGPU's own refusal becomes the status line."""
    import importlib

    import app

    preloaded = []
    monkeypatch.setattr(zerogpu, "preload", lambda **k: preloaded.append(k) or [])
    try:
        importlib.reload(app)  # decorated again, now with the stand-in spaces
        names = [name for name, _ in spaces.decorated]
        assert names == ["_run_on_device", "_lossless_on_device", "_compare_on_device", "_drafters_on_device",
                         "_advise_on_device"]
        for name in ("run", "compare", "advise_live"):
            gpu_part = {"run": app._run_on_device, "compare": app._compare_on_device,
                        "advise_live": app._advise_on_device}[name]
            assert list(inspect.signature(gpu_part).parameters) == SIGNATURES[name], name
        assert preloaded, "the presets load at start-up on ZeroGPU"
        target, drafter = catalogue.GALLERY[EMBEDDED]
        out = list(app.run(target, drafter, "slem", Form("def f(x):", lookahead=3, max_new_tokens=8), "cpu"))
        assert out[-1].status.startswith(marks.OK), out[-1].status
        assert loads and not any(inside for _, inside in loads)  # every load before the GPU part
        assert spaces.calls[-1][0] == "_run_on_device" and 0 < spaces.calls[-1][1] <= durations.RUN_CAP_S
        spaces.fail.append(gr.Error(QUOTA, title="ZeroGPU quota exceeded", print_exception=False))
        refused = list(app.run(target, drafter, "slem", Form("def f(x):", lookahead=3, max_new_tokens=8), "cpu"))
        assert refused[-1].status.startswith(f"{marks.ERROR} **ZeroGPU**") and "quota" in refused[-1].status.lower()
        bad = list(app.run(target, drafter, "slem", Form("def f(x):", temperature=-1, lookahead=3, max_new_tokens=8),
                           "cpu"))
        assert "temperature" in bad[-1].status  # refused before the GPU part: no third call was scheduled
        assert len([c for c in spaces.calls if c[0] == "_run_on_device"]) == 2
    finally:
        monkeypatch.delitem(sys.modules, "spaces")
        monkeypatch.delenv("SPACES_ZERO_GPU")
        importlib.reload(app)


def test_a_zerogpu_space_without_the_spaces_package_says_so_loudly(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "spaces", None)
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    with caplog.at_level(logging.ERROR, logger="hsd.zerogpu"):
        assert zerogpu._spaces() is None
    assert f"add spaces=={zerogpu.SPACES_VERSION} to the Space's requirements.txt" in caplog.text
