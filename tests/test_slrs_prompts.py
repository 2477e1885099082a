"""SLRS on the embedded tiny-code pair at default settings never stops with an error.

30 varied prompts (code, prose, Unicode, whitespace runs) × the SentencePiece-style drafter and the
byte-level drafter × temperatures 0 and 1, with the default path budget: every run finishes, every
round emits at least one token, and at temperature 0 the output is AR's token for token. Whitespace runs
are the hard case: over the SentencePiece-style drafter, the exact ψ of a target token for a long run of spaces
needs more drafter paths than the budget allows; it is proposed as ``⊥`` (docs/slrs.md) and must not stop the run.
The full grid is slow (``-m slow``); a few of the hardest prompts run by default.
"""

from functools import lru_cache

import pytest
import torch

import hsd

PROMPTS = [
    "def fib(n):\n    ",
    "import os\n\nclass Config:\n    def __init__(self, path):\n        ",
    "    for i, line in enumerate(lines):\n        if line.strip():\n            ",
    "if __name__ == '__main__':\n    main()\n",
    "x = [1, 2, 3]\ny = {k: v for k, v in zip(x, x)}\n",
    "        return                    ",
    "def f():\n\n\n\n        \n",
    "\t\tindented\twith\ttabs\n\t\t",
    "#" * 40 + "\n# ",
    "SELECT name, count(*) FROM users WHERE age > 30 GROUP BY name;\n",
    "The quick brown fox jumps over the lazy dog. ",
    "Once upon a time, in a land far away, there lived",
    "In this paper we show that speculative decoding across vocabularies is",
    "Dear colleagues,\n\nplease find attached the",
    "a  b   c    d     e      f       g",
    "trailing spaces                                ",
    "\n\n\n\n\n\n",
    "                                                                ",
    "中文文本和日本語のテキスト",
    "emoji 😀🎉 and 👩‍👩‍👧 ",
    "combining e\u0301 and a\u0308 ",
    "Ünïcödé naïve café — “quotes” ",
    "שלום עולם and مرحبا ",
    "Привет, мир! ",
    "numbers 1234567890 3.14159 1 000 000 ",
    "<s> looks special </s> <|endoftext|> ",
    "windows\r\nline\r\nendings\r\n",
    "x",
    " ",
    "{\"key\": [1, 2, {\"nested\": null}], \"other\":    ",
]
DRAFTERS = ["tiny-code", "tiny-code-bytes"]
FAST = [5, 17, 19]  # a space run after code, a long space run, emoji
MAX_NEW = 16


@lru_cache(maxsize=None)
def _pair(preset: str) -> hsd.Pair:
    return hsd.load_pair(preset=preset, device="cpu")


def _run_all(indices, temperature):
    torch.set_num_threads(1)
    for preset in DRAFTERS:
        pair = _pair(preset)
        for i in indices:
            prompt = PROMPTS[i]
            res = hsd.generate(pair, prompt, algorithm="slrs", max_new_tokens=MAX_NEW, temperature=temperature, seed=i)
            assert all(r.emitted for r in res.rounds)
            assert len(res.token_ids) == MAX_NEW or res.stop_reason == "eos"
            if temperature == 0:
                ref = hsd.generate(pair, prompt, algorithm="ar", max_new_tokens=MAX_NEW)
                assert res.token_ids == ref.token_ids, (preset, prompt)


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_slrs_default_settings_run_on_hard_prompts(temperature):
    _run_all(FAST, temperature)


@pytest.mark.slow
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_slrs_default_settings_run_on_30_prompts_with_both_drafters(temperature):
    assert len(PROMPTS) == 30
    _run_all(range(len(PROMPTS)), temperature)
