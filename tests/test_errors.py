"""Bad input gets a specific hsd error that says what to do (never a traceback from deep inside). The one-line
cases (settings, prompts, model names, CLI flags) are in test_catalogue.py; these need a pair or a file built."""

import subprocess
import sys

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

import hsd
from builders import BigramLM
from pairs import heterogeneous


@pytest.fixture(scope="module")
def pair():
    return heterogeneous("bpe<-sp")


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
