"""Model pairs the engine tests run on, built once per session from local text."""

from __future__ import annotations

import copy
from functools import lru_cache

import torch

import hsd
from builders import byte_tokenizer, bytelevel_tokenizer, correlated_bigrams, sentencepiece_tokenizer, tiny_llama

PROMPTS = [
    "def fib(n):",
    "    return x",
    "  leading spaces",
    "trailing spaces   ",
    "repeated     spaces  in   between",
    "\tindented\twith\ttabs",
    "windows\r\nline\r\nendings\r\n",
    "import os\n\nclass A:\n    def f(self):\n        pass\n",
    "中文文本和日本語のテキスト",
    "emoji 😀🎉 and 👩‍👩‍👧",
    "combining e\u0301 and a\u0308",
    "Ünïcödé naïve café",
    "numbers 1234567890 3.14159 1 000 000",
    "שלום עולם and مرحبا",
    "<s> looks special </s>",
    "<|endoftext|> not really",
    "x",
    " ",
    "\n",
    "if a == b:\n\treturn {'k': [1, 2, 3]}",
    "a  b   c    d     e",
    "end with newline\n",
]


@lru_cache(maxsize=None)
def heterogeneous(kind: str) -> hsd.Pair:
    """``bpe<-sp``: byte-level BPE target, SentencePiece-style drafter; ``sp<-bpe``: the reverse."""
    bpe, sp = bytelevel_tokenizer(), sentencepiece_tokenizer()
    if kind == "bpe<-sp":
        return hsd.Pair.from_models(tiny_llama(bpe, 0, layers=2), bpe, tiny_llama(sp, 1), sp)
    if kind == "sp<-bpe":
        return hsd.Pair.from_models(tiny_llama(sp, 2, layers=2), sp, tiny_llama(bpe, 3), bpe)
    raise KeyError(kind)


@lru_cache(maxsize=None)
def shared_padded() -> hsd.Pair:
    """Same tokenizer; the drafter is a noisy copy of the target with 64 padding rows in its vocabulary."""
    tok = bytelevel_tokenizer()
    target = tiny_llama(tok, 4, layers=2)
    drafter = tiny_llama(tok, 4, layers=2, vocab_size=len(tok) + 64)
    with torch.no_grad():
        state = copy.deepcopy(target.state_dict())
        for name, tensor in drafter.state_dict().items():
            src = state[name]
            tensor[: src.shape[0]].copy_(src * (1 + 0.05 * torch.randn_like(src)))
            if tensor.shape[0] > src.shape[0]:
                tensor[src.shape[0]:].copy_(src[:64] * 3)  # padding rows that would win if not cut
    return hsd.Pair.from_models(target, tok, drafter, tok)


@lru_cache(maxsize=None)
def bigram(kind: str = "bpe<-sp", pad: int = 0) -> hsd.Pair:
    """Peaked bigram models whose drafter agrees with the target on shared tokens."""
    bpe, sp = bytelevel_tokenizer(), sentencepiece_tokenizer()
    t_tok, d_tok = (bpe, sp) if kind == "bpe<-sp" else (sp, bpe) if kind == "sp<-bpe" else (bpe, bpe)
    target, drafter = correlated_bigrams(t_tok, d_tok, seed=7, pad=pad)
    return hsd.Pair.from_models(target, t_tok, drafter, d_tok)


@lru_cache(maxsize=None)
def byte_pair(kind: str = "llama") -> hsd.Pair:
    """A byte-level drafter (one token per byte: SLRS's cheapest case) for a byte-level BPE target:
    random tiny Llamas (``llama``) or peaked bigram models (``bigram``)."""
    bpe, tok = bytelevel_tokenizer(), byte_tokenizer()
    if kind == "bigram":
        target, drafter = correlated_bigrams(bpe, tok, seed=7)
        return hsd.Pair.from_models(target, bpe, drafter, tok)
    return hsd.Pair.from_models(tiny_llama(bpe, 0, layers=2), bpe, tiny_llama(tok, 5), tok)
