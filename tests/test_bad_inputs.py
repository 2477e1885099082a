"""A catalogue of hostile and unusual inputs (issue 18): one line per input, its surface, the error it must
raise and a fragment of the message, which says what to do. The settings checked since the first version
(negative temperature, top_p 0, unknown models...) live in test_errors.py.

CLI lines run ``hsd.cli.main`` in-process; those marked ``early`` must fail before any model loads.
"""

import json
import math
import warnings
from types import SimpleNamespace

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

import hsd
import hsd.loading
from builders import BigramLM, sentencepiece_tokenizer, tiny_llama
from hsd.cli import main
from pairs import heterogeneous

E = hsd.InvalidSettingError
P = hsd.PromptError

# (input, error, message fragment)
API = [
    (dict(temperature=1e-40), E, "too small"),
    (dict(temperature=1e-7), E, "too small"),
    (dict(temperature=1e-40, algorithm="ar"), E, "Use 0 for greedy"),
    (dict(drafter_temperature=1e-40), E, "too small"),
    (dict(temperature=True), E, "temperature must be a finite number"),
    (dict(top_p=True), E, "top_p must be"),
    (dict(top_k=True), E, "top_k must be"),
    (dict(top_k=2.5), E, "top_k must be"),
    (dict(lookahead=True), E, "lookahead must be"),
    (dict(max_new_tokens=True), E, "max_new_tokens must be"),
    (dict(max_new_tokens=8.0), E, "max_new_tokens must be"),
    (dict(seed=True), E, "seed must be"),
    (dict(prompt="\ud800"), P, "prompt is not valid Unicode text: character 0"),
    (dict(prompt="def f(x):\udcff"), P, "character 9"),
    (dict(prompt=None, messages=[{"role": "user", "content": "a\ud800"}]), P, "content of message 0 is not valid"),
    (dict(prompt=b"def f"), P, "prompt must be a str (got bytes)"),
    (dict(prompt=7), P, "prompt must be a str (got int)"),
    (dict(prompt=["def f"]), P, "prompt must be a str (got list)"),
]

# argv with {target}, {drafter}, {dir}, {file}, {bad_utf8}, {remote}; (argv, early, error fragment)
CLI = [
    ("generate --prompt x --temperature 1e-40", True, "too small"),
    ("generate --prompt-file {bad_utf8}", True, "is not valid UTF-8 text (byte 2)"),
    ("generate --prompt-file {dir}", True, "is a directory: give the path of a text file"),
    ("generate --prompt-file {dir}/absent.txt", True, "file not found"),
    ("generate --prompt x --json {dir}", True, "is a directory: give a file name"),
    ("generate --prompt x --json {dir}/missing/run.json", True, "does not exist; create it first"),
    ("generate --prompt x --json {file}/run.json", True, "does not exist"),
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
    ("bench --out {file}/sub", True, "cannot write there"),
    ("bench --prompts no-such-set", True, "No prompt set or file"),
    ("advise --json {dir}", True, "is a directory"),
    ("advise --temperature -1", True, "temperature must be"),
    ("advise --drafter {drafter}", True, "--drafter needs a --target too"),
    ("generate --target {remote} --algorithm ar --prompt x", False, "or --trust-remote-code on the command line"),
    ("generate --target {target} --drafter {drafter} --algorithm sd --prompt x", False, "Use 'slem' or 'tli'"),
]


@pytest.fixture(scope="module")
def pair():
    return heterogeneous("bpe<-sp")


@pytest.fixture
def paths(model_dirs, tmp_path):
    (tmp_path / "latin1.txt").write_bytes(b"ab\xe9t\xe9")
    (tmp_path / "a-file").write_text("x")
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "config.json").write_text(json.dumps({"model_type": "hsd-custom", "auto_map": {
        "AutoConfig": "configuration_x.XConfig", "AutoModelForCausalLM": "modeling_x.XModel"}}))
    return dict(model_dirs, dir=tmp_path, file=tmp_path / "a-file", bad_utf8=tmp_path / "latin1.txt", remote=remote)


@pytest.mark.parametrize("kwargs,error,fragment", API, ids=[repr(c[0])[:60] for c in API])
def test_api_bad_input(pair, kwargs, error, fragment):
    kwargs = {"prompt": "def f", "algorithm": "slem", **kwargs}
    with pytest.raises(error) as info:
        hsd.generate(pair, kwargs.pop("prompt"), max_new_tokens=kwargs.pop("max_new_tokens", 4), **kwargs)
    assert fragment in str(info.value)


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


def _templated_pair() -> hsd.Pair:
    tk = Tokenizer(models.WordLevel({"<eos>": 0, "alpha": 1, "beta": 2}, unk_token="<eos>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<eos>")
    tok.chat_template = ("{% for m in messages %}{% if m['role'] not in ['user', 'assistant'] %}"
                         "{{ raise_exception('Conversation roles must be user or assistant') }}{% endif %}"
                         "{{ m['content'] }} {% endfor %}")
    return hsd.Pair.from_models(BigramLM(torch.zeros(3, 3), 0), tok)


@pytest.mark.parametrize("messages,fragment", [
    ([{"role": "tool", "content": "alpha"}], "refused these messages: Conversation roles must be user or assistant"),
    ([{"role": "user", "content": "alpha"}], None),
])
def test_api_chat_template_refusal_is_a_prompt_error(messages, fragment):
    pair = _templated_pair()
    if fragment is None:
        assert hsd.generate(pair, messages=messages, algorithm="ar", max_new_tokens=2).token_ids
        return
    with pytest.raises(hsd.PromptError, match=fragment):
        hsd.generate(pair, messages=messages, algorithm="ar", max_new_tokens=2)


def test_api_remote_code_says_how_to_turn_it_on(paths):
    with pytest.raises(hsd.RemoteCodeError, match=r"trust_remote_code=True .* --trust-remote-code"):
        hsd.load_model(str(paths["remote"]))


def test_cli_json_write_failing_after_the_run_prints_the_json(paths, monkeypatch, capsys):
    monkeypatch.setattr("hsd.cli.check_output_file", lambda *a, **k: None)  # the folder vanished mid-run
    argv = ["generate", "--target", paths["target"], "--drafter", paths["drafter"], "--prompt", "def f",
            "--max-new-tokens", "4", "--json", str(paths["dir"])]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert "printed to stdout instead" in err
    assert len(json.loads(out[out.index("{"):])["token_ids"]) == 4


# App handlers: (handler, args, fragment of the warning); the slider or output stays as it was.
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


@pytest.mark.parametrize("over,fragment", [
    (dict(temperature=1e-40), "too small"),
    (dict(temperature=True), "temperature must be a number"),
    (dict(seed=False), "seed must be a number"),
    (dict(prompt="\ud800"), "not valid Unicode text"),
])
def test_app_run_bad_input_is_a_message(model_dirs, over, fragment):
    import app

    s = dict(prompt="def f", temperature=0, top_k=0, top_p=1.0, lookahead=4, max_new_tokens=4, seed=0)
    s.update(over)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        status = list(app.run(model_dirs["target"], model_dirs["drafter"], "slem", s["prompt"], s["temperature"],
                              s["top_k"], s["top_p"], s["lookahead"], s["max_new_tokens"], s["seed"]))[-1][0]
    assert "Error**" in status and "Unexpected" not in status and fragment in status, status


@pytest.mark.parametrize("algorithm", ["slem", "tli", "slrs"])
def test_prompt_longer_than_the_drafters_context_runs_target_only_like_ar(pair, algorithm):
    sp = sentencepiece_tokenizer()
    short = tiny_llama(sp, 1)
    short.config.max_position_embeddings = 16
    small = hsd.Pair.from_models(pair.target.model, pair.target.tokenizer, short, sp)
    prompt = "def fibonacci(number):\n    return number if number < 2 else fibonacci(number - 1)"
    assert len(sp(prompt)["input_ids"]) > 16
    ar = hsd.generate(small, prompt, algorithm="ar", max_new_tokens=10)
    res = hsd.generate(small, prompt, algorithm=algorithm, max_new_tokens=10)
    assert res.token_ids == ar.token_ids
    assert res.metrics["drafter_forwards"] == 0 and not math.isnan(res.metrics["tokens_per_s"] or 0)
