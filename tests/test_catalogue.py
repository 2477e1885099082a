"""The catalogue of hostile and unusual inputs: one line per input, by surface (Python API, loading,
public-app policy, CLI, app handlers), with the error it must raise and a fragment of its message, which says
what to do; or, for an input that must simply work, what it must produce.

Bad inputs that need a model or a file built for them (a chat template that refuses a role, a model needing
remote code, a drafter with a short context...) stay in test_bad_inputs.py and test_errors.py. CLI lines run
``hsd.cli.main`` in-process; those marked ``early`` must fail before any model loads.
"""

import json
import math
import os
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import hsd
import hsd.loading
from hsd import planning, policy
from hsd.cli import main
from hsd.forms import Form
from pairs import heterogeneous

E, P, I = hsd.InvalidSettingError, hsd.PromptError, hsd.IncompatiblePairError
M, N = hsd.ModelNotFoundError, hsd.NotAllowedError

# ------------------------------------------------------------------------------------------- Python API
# hsd.generate(pair, "def f", algorithm="slem", max_new_tokens=4, **input) -> (input, error, message fragment)
API = [
    (dict(temperature=-1), E, "temperature"),
    (dict(temperature=math.nan), E, "temperature"),
    (dict(temperature=math.inf), E, "temperature"),
    (dict(temperature=1e-40), E, "too small"),
    (dict(temperature=1e-7), E, "too small"),
    (dict(temperature=1e-40, algorithm="ar"), E, "Use 0 for greedy"),
    (dict(drafter_temperature=1e-40), E, "too small"),
    (dict(draft_threshold=1.0), E, "draft_threshold must be a number in [0, 1)"),
    (dict(draft_threshold=-0.1), E, "draft_threshold must be a number in [0, 1)"),
    (dict(draft_threshold="0.5"), E, "draft_threshold must be a number in [0, 1)"),
    (dict(temperature=True), E, "temperature must be a finite number"),
    (dict(temperature="0.5"), E, "temperature must be a finite number"),
    (dict(top_p=0.0), E, "top_p"),
    (dict(top_p=1.5), E, "top_p"),
    (dict(top_p=True), E, "top_p must be"),
    (dict(top_k=-1), E, "top_k"),
    (dict(top_k=True), E, "top_k must be"),
    (dict(top_k=2.5), E, "top_k must be"),
    (dict(lookahead=0), E, "lookahead"),
    (dict(lookahead=65), E, "lookahead"),
    (dict(lookahead=True), E, "lookahead must be"),
    (dict(max_new_tokens=0), E, "max_new_tokens"),
    (dict(max_new_tokens=5000), E, "max_new_tokens"),
    (dict(max_new_tokens=True), E, "max_new_tokens must be"),
    (dict(max_new_tokens=8.0), E, "max_new_tokens must be"),
    (dict(seed=True), E, "seed must be"),
    (dict(seed=2**64), E, "seed must be"),
    (dict(algorithm="nope"), E, "choose one of"),
    (dict(algorithm="sd"), I, "slem"),
    (dict(algorithm="ar", slrs_max_paths=4), E, "applies only to algorithm='slrs'"),
    (dict(algorithm="slrs", slrs_max_paths=0), E, "slrs_max_paths must be"),
    (dict(parse_special="no"), E, "parse_special must be True or False"),
    (dict(prompt=None, messages=[{"role": "user", "content": "hi"}], parse_special=False), E,
     "applies to a raw prompt"),
    (dict(prompt=""), P, "empty"),
    (dict(prompt="word " * 600, max_new_tokens=8), P, "context is 512"),
    (dict(prompt="\ud800"), P, "prompt is not valid Unicode text: character 0"),
    (dict(prompt="def f(x):\udcff"), P, "character 9"),
    (dict(prompt=None, messages=[{"role": "user", "content": "a\ud800"}]), P, "content of message 0 is not valid"),
    (dict(prompt=None, messages=[{"content": "hi"}]), P, "role"),
    (dict(prompt=None, messages=[]), P, "non-empty list"),
    (dict(prompt=None, messages=[{"role": "user", "content": "hi"}]), P, "chat template"),
    (dict(prompt="x", messages=[{"role": "user", "content": "hi"}]), P, "not both"),
    (dict(prompt=b"def f"), P, "prompt must be a str (got bytes)"),
    (dict(prompt=7), P, "prompt must be a str (got int)"),
    (dict(prompt=["def f"]), P, "prompt must be a str (got list)"),
    (dict(algorithm=["slem"]), E, "algorithm must be one name (a str), got list ['slem']"),
    (dict(drafter_temperature=float("nan")), E, "drafter_temperature must be a finite number ≥ 0"),
    (dict(drafter_temperature=-1), E, "drafter_temperature must be a finite number ≥ 0"),
    (dict(seed=np.array([1, 2])), E, "seed must be an integer"),
    (dict(temperature=torch.tensor([0.5, 0.7])), E, "temperature must be a finite number"),
]

# unusual inputs that must run: at temperature 0, with the same tokens as AR
API_OK = [
    dict(prompt="<|endoftext|> not really"),
    dict(prompt="<|endoftext|> not really", parse_special=False),
    dict(prompt="<s> looks special </s>", parse_special=False),
    dict(prompt="emoji 😀🎉 and 👩‍👩‍👧"),
    dict(prompt="combining e\u0301 and a\u0308"),
    dict(prompt=" "),
    dict(prompt="\n"),
    dict(prompt="windows\r\nline\r\nendings\r\n", lookahead=64),
    dict(prompt="def f", lookahead=1, algorithm="tli"),
    dict(prompt="def f", seed=-2**63, algorithm="slrs"),
    dict(prompt="def f", max_new_tokens=1),
    dict(prompt="def f", top_k=np.int64(5), seed=np.int64(3), lookahead=torch.tensor(4)),  # exact conversions
]


@pytest.fixture(scope="module")
def pair():
    return heterogeneous("bpe<-sp")


@pytest.mark.parametrize("kwargs,error,fragment", API, ids=[repr(c[0])[:60] for c in API])
def test_api_bad_input(pair, kwargs, error, fragment):
    kwargs = {"prompt": "def f", "algorithm": "slem", **kwargs}
    with pytest.raises(error) as info:
        hsd.generate(pair, kwargs.pop("prompt"), max_new_tokens=kwargs.pop("max_new_tokens", 4), **kwargs)
    assert fragment in str(info.value)


@pytest.mark.parametrize("kwargs", API_OK, ids=[repr(c)[:60] for c in API_OK])
def test_api_unusual_input_runs_like_ar(pair, kwargs):
    kwargs = {"algorithm": "slem", "max_new_tokens": 4, **kwargs}
    res = hsd.generate(pair, **kwargs)
    ar = hsd.generate(pair, **{**kwargs, "algorithm": "ar"})
    assert res.token_ids == ar.token_ids and res.token_ids


# ------------------------------------------------------------------------------------------- loading (API)
# hsd.load_model / hsd.load_pair with names from {target}, {drafter}, {dir}, {t5} -> (call, kwargs, error, fragment)
LOAD = [
    ("load_model", dict(name=""), M, "No model given"),
    ("load_model", dict(name=None), M, "No model given"),
    ("load_model", dict(name="no-such-org/no-such-model-hsd"), M, "hf download"),
    ("load_model", dict(name="{dir}"), M, "is a directory but not a loadable model"),
    ("load_model", dict(name="a\x00b"), M, "neither a local directory nor a valid Hub id"),
    ("load_model", dict(name="/" + "x" * 5000), M, "neither a local directory nor a valid Hub id"),
    ("load_model", dict(name="{t5}"), hsd.NotCausalLMError, "not a causal language model"),
    ("load_model", dict(name="{target}", revision="main"), E, "a revision pins a Hub model"),
    ("load_model", dict(name="{target}", device="gpu7"), E, "Unknown device"),
    ("load_model", dict(name="{target}", dtype="int3"), E, "Unknown dtype"),
    ("load_pair", dict(preset="nope"), M, "known presets: tiny-code"),
    ("load_pair", dict(target="{target}", drafter_revision="main"), E, "there is no drafter"),
    ("load_pair", dict(target="{target}", trust_remote_code="yes"), E, "trust_remote_code must be"),
    ("load_pair", dict(target=5), M, "as a str or a path; got int 5"),
    ("load_model", dict(name="{target}", device_map="garbage"), E, "device_map='garbage' is not a device map"),
]


@pytest.fixture
def paths(model_dirs, tmp_path):
    from transformers import T5Config

    (tmp_path / "latin1.txt").write_bytes(b"ab\xe9t\xe9")
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "bad.jsonl").write_text('{"prompt": "a"}\n{"prompt": \n')
    (tmp_path / "noprompt.jsonl").write_text('{"prompt": "a"}\n\n{"text": "b"}\n')
    (tmp_path / "empty.jsonl").write_text("\n")
    T5Config(vocab_size=32, d_model=8, num_layers=1).save_pretrained(tmp_path / "t5")
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "config.json").write_text(json.dumps({"model_type": "hsd-custom", "auto_map": {
        "AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XModel"}}))
    return dict(model_dirs, dir=str(tmp_path), file=tmp_path / "a-file", bad_utf8=tmp_path / "latin1.txt",
                remote=str(remote), t5=str(tmp_path / "t5"))


@pytest.mark.parametrize("call,kwargs,error,fragment", LOAD, ids=[f"{c}{k}"[:60] for c, k, _, _ in LOAD])
def test_loading_bad_input(paths, call, kwargs, error, fragment):
    kwargs = {k: v.format(**paths) if isinstance(v, str) else v for k, v in kwargs.items()}
    with pytest.raises(error) as info:
        getattr(hsd, call)(**kwargs)
    assert fragment in str(info.value)


# ------------------------------------------------------------------------------------------- public app policy
# planning.resolve_name(name, public=True): (name, error or None, fragment of the error or of the resolved name)
ALLOWED = "The operator can allow more folders with the environment variable HSD_ALLOWED_DIRS"
PUBLIC = [
    ("/root", N, ALLOWED),
    ("/nonexistent-hsd-dir", N, ALLOWED),  # refused exactly as an existing folder is: no probing
    ("/etc/passwd", N, ALLOWED),
    ("../../etc", N, ALLOWED),
    ("..", N, ALLOWED),
    (".", N, ALLOWED),
    ("~", N, ALLOWED),
    ("hsd", N, ALLOWED),  # a Hub-shaped name that is a folder here: transformers would read the folder
    ("assets/../../etc", N, ALLOWED),
    ("assets/../hsd", N, ALLOWED),
    ("{link}", N, ALLOWED),  # a symbolic link inside an allowed folder, pointing out of it
    ("{dir}", N, ALLOWED),
    ("a\x00b", N, ALLOWED),
    ("org/model\x00", N, ALLOWED),
    ("/" + "x" * 5000, N, ALLOWED),
    ("a/" * 3000, N, ALLOWED),
    ("\ud800", N, ALLOWED),
    ("~no-such-user-hsd/models", N, ALLOWED),
    ("assets/tiny-code/target", None, "tiny-code/target"),
    ("assets/tiny-code/../tiny-code/drafter", None, "tiny-code/drafter"),
    ("{allowed}", None, "allowed-models"),
    ("Qwen/Qwen2.5-0.5B-Instruct", None, "Qwen/Qwen2.5-0.5B-Instruct"),
    ("gpt2", None, "gpt2"),
    ("", None, ""),
]


@pytest.fixture
def public_paths(tmp_path, monkeypatch):
    allowed = tmp_path / "allowed-models"
    allowed.mkdir()
    (allowed / "escape").symlink_to("/etc")
    monkeypatch.setenv("HSD_ALLOWED_DIRS", os.pathsep.join([str(allowed), "", str(tmp_path / "absent")]))
    return dict(link=str(allowed / "escape"), dir=str(tmp_path), allowed=str(allowed))


@pytest.mark.parametrize("name,error,fragment", PUBLIC, ids=[repr(c[0])[:40] for c in PUBLIC])
def test_public_app_accepts_presets_hub_ids_and_allowed_folders_only(public_paths, name, error, fragment):
    name = name.format(**public_paths)
    if error is None:
        assert fragment in planning.resolve_name(name, public=True)
        return
    with pytest.raises(error) as info:
        planning.resolve_name(name, public=True)
    assert fragment in str(info.value) and f"{name[:200]!r}"[:-1] in str(info.value)


def test_public_refusals_of_existing_and_missing_folders_read_the_same(tmp_path):
    def message(name):
        with pytest.raises(N) as info:
            planning.plan_named(name, "", public=True)
        return str(info.value).replace(repr(name), "NAME")

    assert message(str(tmp_path)) == message(str(tmp_path / "missing")) == message("/root")


@pytest.mark.parametrize("env,public", [
    ({}, False), ({"SPACE_ID": "user/space"}, True), ({"HSD_PUBLIC": "1"}, True), ({"HSD_PUBLIC": "0"}, False),
])
def test_public_mode_comes_from_the_environment(monkeypatch, env, public):
    for key in ("SPACE_ID", "HSD_PUBLIC"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert policy.is_public() is public and policy.is_public(True) and not policy.is_public(False)
    if public:
        with pytest.raises(N):
            planning.load_named_pair("/root", "")
    else:
        assert planning.resolve_name("/root") == "/root"


def test_on_a_space_the_python_api_still_loads_any_directory(monkeypatch, model_dirs):
    monkeypatch.setenv("SPACE_ID", "user/space")
    assert hsd.load_pair(model_dirs["target"], model_dirs["drafter"]).drafter is not None
    with pytest.raises(M, match="is a directory but not a loadable model"):
        hsd.load_model("/root")


def test_make_public_switches_the_process_on(monkeypatch):
    monkeypatch.setattr(policy, "_declared_public", False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.delenv("HSD_PUBLIC", raising=False)
    assert not policy.is_public()
    policy.make_public()
    assert policy.is_public()


def test_a_visitor_never_turns_remote_code_on(paths, monkeypatch):
    monkeypatch.setenv("HSD_ALLOWED_DIRS", paths["dir"])
    monkeypatch.delenv("HSD_TRUST_REMOTE_CODE", raising=False)
    with pytest.raises(hsd.RemoteCodeError) as info:
        planning.load_named_pair(paths["remote"], "", public=True)
    assert "never runs at a visitor's request" in str(info.value) and "HSD_TRUST_REMOTE_CODE" in str(info.value)


def test_the_operator_trusts_named_repositories_only(monkeypatch):
    seen = {}
    monkeypatch.setattr(planning, "load_pair", lambda t, d, **kw: seen.update(kw))
    monkeypatch.setenv("HSD_TRUST_REMOTE_CODE", "org/a, org/c")
    planning.load_named_pair("org/a", "org/b", public=True)
    assert seen["trust_remote_code"] == {"org/a"}
    planning.load_named_pair("org/b", "org/d", public=True)
    assert seen["trust_remote_code"] == set()


# ------------------------------------------------------------------------------------------- CLI
# argv with {target}, {drafter}, {dir}, {file}, {bad_utf8}, {remote}; (argv, early, error fragment)
CLI = [
    ("generate --prompt x --temperature -1", True, "temperature"),
    ("generate --prompt x --temperature 1e-40", True, "too small"),
    ("generate --prompt x --top-p 0", True, "top_p"),
    ("generate --prompt x --lookahead 0", True, "lookahead must be an integer in 1..64"),
    ("generate --prompt x --max-new-tokens 0", True, "max_new_tokens must be an integer"),
    ("generate --prompt x --chat --no-parse-special", True, "--no-parse-special applies to a raw prompt"),
    ("generate --prompt-file {bad_utf8}", True, "is not valid UTF-8 text (byte 2)"),
    ("generate --prompt-file {dir}", True, "is a directory: give the path of a text file"),
    ("generate --prompt-file {dir}/absent.txt", True, "file not found"),
    ("generate --prompt x --json {dir}", True, "is a directory: give a file name"),
    ("generate --prompt x --json {dir}/missing/run.json", True, "does not exist; create it first"),
    ("generate --prompt x --json {file}/run.json", True, "does not exist"),
    ("generate --prompt x --preset nope", False, "known presets"),
    ("generate --prompt x --algorithm ar --target {target} --target-revision main", False, "a revision pins a Hub model"),
    ("generate --prompt x --device gpu7", False, "Unknown device"),
    ("vocab --drafter {drafter}", True, "--drafter needs a --target too"),
    ("vocab --target {target}", True, "--drafter is needed with --target."),
    ("vocab --json {dir}", True, "is a directory"),
    ("bench --algorithms ar nope", True, "Unknown algorithm 'nope' in --algorithms"),
    ("bench --max-new-tokens -4", True, "--max-new-tokens must be an integer in 1..4096"),
    ("bench --temperatures 0 nan", True, "temperature must be a finite number"),
    ("bench --temperatures 1e-40", True, "too small"),
    ("bench --lookahead 0", True, "--lookahead must be an integer in 1..64"),
    ("bench --num-prompts 0", True, "--num-prompts must be an integer"),
    ("bench --num-prompts -3", True, "--num-prompts must be an integer"),
    ("bench --threads 0", True, "--threads must be an integer"),
    ("bench --repeats 0", True, "--repeats must be"),
    ("bench --warmups -1", True, "--warmups must be"),
    ("bench --out {file}/sub", True, "cannot write there"),
    ("bench --out /proc/hsd-forbidden", True, "cannot write there"),
    ("bench --prompts no-such-set", True, "No prompt set or file"),
    ("bench --prompts {dir}", True, "is a directory; give a .jsonl file"),
    ("bench --prompts {dir}/bad.jsonl", True, "line 2: not valid JSON"),
    ("bench --prompts {dir}/noprompt.jsonl", True, 'line 3: needs a non-empty "prompt" string'),
    ("bench --prompts {dir}/empty.jsonl", True, "holds no prompt"),
    ("bench --prompts {bad_utf8}", True, "not valid UTF-8 text"),
    ("advise --json {dir}", True, "is a directory"),
    ("advise --temperature -1", True, "temperature must be"),
    ("advise --drafter {drafter}", True, "--drafter needs a --target too"),
    ("advise --prompts {dir}/bad.jsonl", True, "line 2: not valid JSON"),
    ("advise --draft-thresholds 1.5", True, "--draft-thresholds must be numbers strictly between 0 and 1"),
    ("advise --draft-thresholds 0 0.5", True, "give no value, or 0 alone, for none"),
    ("advise --draft-thresholds nan", True, "--draft-thresholds must be numbers strictly between 0 and 1"),
    ("generate --target {remote} --algorithm ar --prompt x", False, "or --trust-remote-code on the command line"),
    ("generate --target {target} --drafter {drafter} --algorithm sd --prompt x", False, "Use 'slem' or 'tli'"),
    ("generate --target {dir} --algorithm ar --prompt x", False, "is a directory but not a loadable model"),
]

# argv that must run (exit 0) and a fragment of what it prints (stdout and stderr together)
CLI_OK = [
    ("generate --target {target} --drafter {drafter} --prompt x<|endoftext|>y --max-new-tokens 3",
     "became the target's special token"),
    ("generate --target {target} --drafter {drafter} --prompt x<|endoftext|>y --max-new-tokens 3 --no-parse-special",
     "accepted/verified"),
    ("generate --target {target} --algorithm ar --prompt x --max-new-tokens 2 --json {dir}/run.json",
     "accepted/proposed"),
]


@pytest.mark.parametrize("argv,early,fragment", CLI, ids=[c[0] for c in CLI])
def test_cli_bad_input(paths, monkeypatch, capsys, argv, early, fragment):
    if early:
        def refuse(*a, **k):
            raise AssertionError("a model was loaded before the input was checked")
        monkeypatch.setattr(hsd.loading, "load_pair", refuse)
        monkeypatch.setattr(hsd.loading, "load_model", refuse)
    assert main(argv.format(**paths).split()) == 2
    err = capsys.readouterr().err
    assert fragment in err, err
    assert "Traceback" not in err and "target='" not in err and "algorithm='" not in err


@pytest.mark.parametrize("argv,fragment", CLI_OK, ids=[c[0][:60] for c in CLI_OK])
def test_cli_unusual_input_runs(paths, capsys, argv, fragment):
    assert main(argv.format(**paths).split()) == 0
    out, err = capsys.readouterr()
    assert fragment in out + err, out + err


# ------------------------------------------------------------------------------------------- app handlers
# (handler, args, fragment of the warning); the slider or output stays as it was
ROUNDS = {"result": SimpleNamespace(rounds=[None] * 3)}
APP = [
    ("step_round", (ROUNDS, "abc", 1), "round must be a number"),
    ("step_round", (ROUNDS, 1.5, 1), "round must be a whole number"),
    ("step_round", (ROUNDS, None, "x"), "step must be a number"),
    ("step_round", ({"rounds": []}, 0, 1), "no run to step through"),
    ("rerender", ({"result": None}, True), "state is malformed"),
    ("rerender", ({"prompt": "x"}, False), "state is malformed"),
]


@pytest.mark.parametrize("handler,args,fragment", APP, ids=[f"{h}{a[1:]}" for h, a, _ in APP])
def test_app_handler_bad_input_warns_and_keeps_state(handler, args, fragment):
    import gradio as gr

    import app

    with pytest.warns(UserWarning, match=fragment):
        out = getattr(app, handler)(*args)
    assert out == gr.update()


# app.run with one setting changed: (change, fragment of the status)
APP_RUN = [
    (dict(temperature=1e-40), "too small"),
    (dict(temperature=True), "temperature must be a number"),
    (dict(seed=False), "seed must be a number"),
    (dict(prompt="\ud800"), "not valid Unicode text"),
    (dict(prompt=""), "empty"),
    (dict(target="/nonexistent-hsd-dir"), "neither a local model directory nor a Hub id"),
]


@pytest.mark.parametrize("over,fragment", APP_RUN, ids=[repr(c[0])[:60] for c in APP_RUN])
def test_app_run_bad_input_is_a_message(model_dirs, over, fragment):
    import app

    s = dict(target=model_dirs["target"], prompt="def f", temperature=0, top_k=0, top_p=1.0, lookahead=4,
             max_new_tokens=4, seed=0)
    s.update(over)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        boxes = Form(**{k: v for k, v in s.items() if k != "target"})
        status = list(app.run(s["target"], model_dirs["drafter"], "slem", boxes))[-1][0]
    assert "Error**" in status and "Unexpected" not in status and fragment in status, status


@pytest.mark.parametrize("name", ["/root", "/nonexistent-hsd-dir", "../../etc", "{dir}"])
def test_app_on_a_space_refuses_folders_outside_the_allow_list_alike(paths, monkeypatch, name):
    import app

    monkeypatch.setenv("SPACE_ID", "user/space")
    monkeypatch.delenv("HSD_ALLOWED_DIRS", raising=False)
    name = name.format(**paths)
    report = app.check_pair(name, paths["drafter"], "auto", "auto", "slem")[0]
    assert "NotAllowedError" in report and ALLOWED in report, report


@pytest.mark.parametrize("name", ["/root", "/nonexistent-hsd-dir", "assets/tiny-code/target"])
def test_loadable_named_never_raises(monkeypatch, name):
    monkeypatch.setenv("SPACE_ID", "user/space")
    assert planning.loadable_named(name, "", "cpu") is (name == "assets/tiny-code/target")


@pytest.mark.parametrize("name", ["/root", "/nonexistent-hsd-dir"])
def test_app_choosing_a_refused_folder_on_a_space_says_why_and_never_raises(monkeypatch, name):
    from hsd import lab

    monkeypatch.setenv("SPACE_ID", "user/space")
    report = lab.pair_changed(name, "", "cpu", "auto")["report"]
    assert "NotAllowedError" in report and ALLOWED in report, report


@pytest.mark.parametrize("parse_special", [True, False])
def test_app_run_marks_prompt_text_that_became_a_special_token(parse_special):
    from hsd import lab

    boxes = Form("x<|endoftext|>def", lookahead=4, max_new_tokens=4, parse_special=parse_special)
    last = list(lab.run_steps("assets/tiny-code/target", "assets/tiny-code/drafter", "slem", boxes, device="cpu"))[-1]
    assert ("hsd-prompt-special" in last["output"]) is parse_special, last.get("status")
    assert ("hsd-prompt-special" in lab.output(last["state"], True)) is parse_special


# ----------------------------------------------------------------------------- a CPU machine (a CPU Space)

def test_on_a_cpu_the_gallery_says_which_hub_pairs_fit(monkeypatch):
    from hsd import catalogue, lab

    monkeypatch.setattr(planning, "available_bytes", lambda dev: 16e9)  # a cpu-basic Space's memory
    notes = {p.label: lab.pair_note(p.label, device="cpu") for p in catalogue.HUB_PAIRS}
    classroom = next(label for label in notes if "CPU classroom" in label)
    assert "Fits this machine: about 7.2 GB on the CPU, 16.0 GB free." in notes[classroom]
    too_large = [label for label, note in notes.items() if "Too large for this machine" in note]
    assert set(too_large) == set(notes) - {classroom}


def test_a_catalogued_pair_too_large_for_the_cpu_is_refused_before_any_download_even_offline(monkeypatch):
    from hsd.errors import ResourceLimitError

    monkeypatch.setattr(planning, "available_bytes", lambda dev: 16e9)
    monkeypatch.setattr(planning, "offline", lambda: True)
    with pytest.raises(ResourceLimitError, match=r"need about 62\.6 GB but cpu has 16\.0 GB free"):
        planning.plan_named("microsoft/phi-4", "Qwen/Qwen2.5-0.5B-Instruct", "cpu")
    plan = planning.plan_named("Qwen/Qwen2.5-1.5B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct", "cpu")
    assert "1.54 B parameters (hsd's catalogue)" in plan



# ----------------------------------------------------------------------------- the second audit's CLI cases

def test_numpy_and_torch_scalars_are_taken_as_the_numbers_they_hold():
    settings = hsd.Settings(temperature=np.float32(0.5), top_k=np.int64(5), top_p=torch.tensor(0.5), seed=np.int64(3))
    assert settings.temperature == 0.5 and type(settings.temperature) is float
    assert settings.top_k == 5 and type(settings.top_k) is int and settings.top_p == 0.5 and settings.seed == 3


def test_a_bad_model_cache_size_is_an_error_line_from_the_cli_not_a_traceback():
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "hsd", "generate", "--prompt", "x", "--max-new-tokens", "2"],
                          capture_output=True, text=True, env={**os.environ, "HSD_MAX_CACHED_MODELS": "abc"},
                          timeout=300)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: HSD_MAX_CACHED_MODELS='abc'") and "Traceback" not in proc.stderr


@pytest.mark.parametrize("value", ["1", "-3", "", "2.5"])
def test_every_bad_model_cache_size_is_refused_by_the_first_load(value, monkeypatch, capsys):
    from hsd import loading

    with pytest.raises(E, match=f"HSD_MAX_CACHED_MODELS={value!r}") as info:
        loading._max_cached_models(value)
    monkeypatch.setattr(loading, "_BAD_CACHE_SETTING", info.value)
    assert main(["generate", "--prompt", "x", "--max-new-tokens", "2"]) == 2
    assert capsys.readouterr().err.startswith(f"error: HSD_MAX_CACHED_MODELS={value!r}")


def test_ctrl_c_mid_generation_keeps_what_was_generated(monkeypatch, capsys, tmp_path):
    import importlib

    generate_module = importlib.import_module("hsd.generate")  # the module: hsd.generate is also the function
    real = generate_module.stream

    def interrupted(*args, **kwargs):
        for i, item in enumerate(real(*args, **kwargs)):
            if i == 2:
                raise KeyboardInterrupt
            yield item

    monkeypatch.setattr(generate_module, "stream", interrupted)
    out = tmp_path / "run.json"
    assert main(["generate", "--prompt", "def f(x):", "--max-new-tokens", "32", "--json", str(out)]) == 130
    captured = capsys.readouterr()
    assert "stopped (Ctrl-C) after 2 rounds" in captured.err
    saved = json.loads(out.read_text())
    assert saved["stopped"] == "ctrl-c" and saved["rounds"] == 2 and captured.out.rstrip("\n") == saved["text"]
    assert saved["text"]


def test_ctrl_c_while_loading_says_it_stopped(monkeypatch, capsys):
    from hsd import cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "load_cli_pair", interrupted)
    assert main(["generate", "--prompt", "x"]) == 130
    assert "stopped (Ctrl-C)" in capsys.readouterr().err


def test_a_terminal_that_cannot_show_a_character_gets_an_escape(monkeypatch):
    import io
    import sys

    from hsd import cli

    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    monkeypatch.setattr(cli, "cmd_vocab", lambda args: print("café ✓") or 0)
    assert main(["vocab"]) == 0
    sys.stdout.flush()
    assert raw.getvalue().decode("ascii").strip() == "caf\\xe9 \\u2713"


def test_a_json_name_too_long_for_the_file_system_is_refused_before_the_run(tmp_path):
    from hsd.outfiles import check_output_file

    with pytest.raises(E, match="more than this file system's"):
        check_output_file(tmp_path / ("a" * 300 + ".json"))


def test_drafters_with_no_drafter_that_loads_exits_with_an_error(capsys):
    assert main(["drafters", "--drafter", "/nonexistent", "--num-prompts", "1", "--max-new-tokens", "2"]) == 2
    assert "error: 1 of 1 drafter could not be compared (/nonexistent)" in capsys.readouterr().err
