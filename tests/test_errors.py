"""Bad input gets a specific hsd error that says what to do (never a traceback from deep inside)."""

import math
import subprocess
import sys

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, T5Config

import hsd
from builders import BigramLM
from pairs import heterogeneous


@pytest.fixture(scope="module")
def pair():
    return heterogeneous("bpe<-sp")


@pytest.mark.parametrize("kwargs,error,words", [
    (dict(temperature=-1), hsd.InvalidSettingError, "temperature"),
    (dict(temperature=math.nan), hsd.InvalidSettingError, "temperature"),
    (dict(top_p=0.0), hsd.InvalidSettingError, "top_p"),
    (dict(top_p=1.5), hsd.InvalidSettingError, "top_p"),
    (dict(top_k=-1), hsd.InvalidSettingError, "top_k"),
    (dict(lookahead=0), hsd.InvalidSettingError, "lookahead"),
    (dict(lookahead=65), hsd.InvalidSettingError, "lookahead"),
    (dict(max_new_tokens=0), hsd.InvalidSettingError, "max_new_tokens"),
    (dict(max_new_tokens=5000), hsd.InvalidSettingError, "max_new_tokens"),
    (dict(algorithm="nope"), hsd.InvalidSettingError, "choose one of"),
    (dict(algorithm="sd"), hsd.IncompatiblePairError, "slem"),
])
def test_bad_setting_raises_specific_error(pair, kwargs, error, words):
    with pytest.raises(error, match=words):
        hsd.generate(pair, "def f", **kwargs)


def test_empty_prompt(pair):
    with pytest.raises(hsd.PromptError, match="empty"):
        hsd.generate(pair, "")


def test_prompt_longer_than_context(pair):
    with pytest.raises(hsd.PromptError, match="context is 512"):
        hsd.generate(pair, "word " * 600, max_new_tokens=8)


def test_bad_messages(pair):
    with pytest.raises(hsd.PromptError, match="role"):
        hsd.generate(pair, messages=[{"content": "hi"}])
    with pytest.raises(hsd.PromptError, match="chat template"):
        hsd.generate(pair, messages=[{"role": "user", "content": "hi"}])


def test_ar_needs_no_drafter_but_others_do(pair):
    alone = hsd.Pair(pair.target)
    assert hsd.generate(alone, "def f", algorithm="ar", max_new_tokens=4).token_ids
    with pytest.raises(hsd.IncompatiblePairError, match="needs a drafter"):
        hsd.generate(alone, "def f", algorithm="slem")


def _word_tokenizer(words):
    tk = Tokenizer(models.WordLevel({w: i for i, w in enumerate(["<eos>"] + words)}, unk_token="<eos>"))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=tk, eos_token="<eos>")


def test_tli_on_pair_without_shared_tokens():
    t_tok, d_tok = _word_tokenizer(["alpha", "beta"]), _word_tokenizer(["gamma", "delta"])
    pair = hsd.Pair.from_models(BigramLM(torch.zeros(3, 3), 0), t_tok, BigramLM(torch.zeros(3, 3), 0), d_tok)
    assert pair.vocab.intersection_size == 0
    with pytest.raises(hsd.IncompatiblePairError, match="share none"):
        hsd.generate(pair, "alpha", algorithm="tli")


def test_unknown_model_offline_says_how_to_get_it():
    with pytest.raises(hsd.ModelNotFoundError, match="not available locally.*hf download"):
        hsd.load_model("no-such-org/no-such-model-hsd")


def test_not_a_causal_lm(tmp_path):
    T5Config(vocab_size=32, d_model=8, num_layers=1).save_pretrained(tmp_path)
    with pytest.raises(hsd.NotCausalLMError, match="not a causal language model"):
        hsd.load_model(str(tmp_path))


def test_missing_tokenizer(tmp_path, model_dirs):
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(model_dirs["target"]).save_pretrained(tmp_path)
    with pytest.raises(hsd.TokenizerMissingError, match="tokenizer"):
        hsd.load_model(str(tmp_path))


def test_cli_bad_input_exits_2_without_traceback(model_dirs):
    cmd = [sys.executable, "-m", "hsd", "generate", "--target", model_dirs["target"], "--drafter",
           model_dirs["drafter"], "--prompt", "x", "--temperature", "-1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "error: temperature" in proc.stderr and "Traceback" not in proc.stderr
