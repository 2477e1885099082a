"""Tokenizers and tiny models the tests build from local text, so the suite needs no download.

* ``bytelevel_tokenizer``: a GPT-2-style byte-level BPE;
* ``sentencepiece_tokenizer``: a SentencePiece-style BPE (``▁`` word marker, ``<0xNN>`` byte fallback);
* ``tiny_llama``: a random-weight ``LlamaForCausalLM`` for a tokenizer (peaky logits so greedy
  decoding wanders instead of repeating one token);
* ``tiny_windowed``: the same for architectures with sliding-window, chunked or recurrent layers
  (Mistral, Qwen2, Gemma-2, Gemma-3, Llama-4, LFM2), with a small window;
* ``BigramLM``: a hand-set next-token table with the causal-LM call signature, for exact
  distribution tests (its distribution is known in closed form);
* ``RowsLM``: the same for a vocabulary too large for a table, each row made when a token asks for it
  (``peaked_rows``, ``correlated_rows``: rows like ``correlated_bigrams``' over real vocabularies).
"""

from __future__ import annotations

import inspect
import sysconfig
from functools import lru_cache
from pathlib import Path
from types import SimpleNamespace

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast


@lru_cache(maxsize=1)
def corpus() -> list[str]:
    """A small, fixed slice of the Python standard library plus some non-ASCII text."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = [(stdlib / name).read_text(encoding="utf-8") for name in ("textwrap.py", "heapq.py", "bisect.py", "colorsys.py")]
    texts.append("Ünïcödé テキスト 中文 😀 é e\u0301 שלום مرحبا\t\r\n 12345 67 890\n" * 20)
    return texts


@lru_cache(maxsize=None)
def bytelevel_tokenizer(vocab_size: int = 600) -> PreTrainedTokenizerFast:
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(corpus(), trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tk, bos_token="<|endoftext|>", eos_token="<|endoftext|>")


@lru_cache(maxsize=None)
def sentencepiece_tokenizer(vocab_size: int = 500) -> PreTrainedTokenizerFast:
    """Like Llama-2's: specials at 0-2, the 256 byte-fallback tokens as ordinary tokens at 3-258."""
    specials = ["<unk>", "<s>", "</s>"]
    normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    trainer = trainers.BpeTrainer(vocab_size=vocab_size - 256, special_tokens=specials, show_progress=False,
                                  max_token_length=8)
    draft = Tokenizer(models.BPE(unk_token="<unk>"))
    draft.normalizer = normalizer
    draft.train_from_iterator(corpus(), trainer)
    trained = sorted(draft.get_vocab().items(), key=lambda kv: kv[1])
    vocab = {tok: i for i, (tok, _) in enumerate(trained[:3])}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    for tok, _ in trained[3:]:
        vocab.setdefault(tok, len(vocab))
    import json
    merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m)
              for m in json.loads(draft.to_str())["model"]["merges"]]
    tk = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True))
    tk.normalizer = normalizer
    tk.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                    decoders.Strip(" ", 1, 0)])
    tk.add_special_tokens(specials)
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>", eos_token="</s>")


def tiny_llama(tokenizer, seed: int, vocab_size: int | None = None, layers: int = 1, hidden: int = 32,
               scale: float = 8.0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=vocab_size or len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                         max_position_embeddings=512, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return model


WINDOWED = ("mistral", "qwen2", "gemma2", "gemma3", "llama4", "lfm2")


def tiny_windowed(kind: str, tokenizer, seed: int, window: int = 16, layers: int = 2, hidden: int = 32,
                  scale: float = 8.0):
    """A random-weight model of architecture ``kind`` whose cache is not plain full attention:

    * ``mistral``: every layer a sliding window of ``window`` tokens;
    * ``qwen2``: ``use_sliding_window``, the layers from ``max_window_layers`` = 1 on slide;
    * ``gemma2``, ``gemma3``: sliding and global layers alternating (Gemma-2 runs eager attention);
    * ``llama4``: chunked attention (chunks of ``window`` tokens) alternating with global layers;
    * ``lfm2``: a short-convolution layer (a recurrent state that cannot be cropped) then a global one.
    """
    import transformers as tf

    torch.manual_seed(seed)
    common = dict(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                  num_hidden_layers=layers, num_attention_heads=2, num_key_value_heads=2,
                  max_position_embeddings=512, bos_token_id=tokenizer.bos_token_id,
                  eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=False)
    alternating = [("sliding_attention", "full_attention")[i % 2] for i in range(layers)]
    if kind == "mistral":
        model = tf.MistralForCausalLM(tf.MistralConfig(sliding_window=window, **common))
    elif kind == "qwen2":
        model = tf.Qwen2ForCausalLM(tf.Qwen2Config(use_sliding_window=True, sliding_window=window,
                                                   max_window_layers=1, **common))
    elif kind == "gemma2":
        model = tf.Gemma2ForCausalLM(tf.Gemma2Config(sliding_window=window, head_dim=hidden // 2,
                                                     layer_types=alternating, **common))
    elif kind == "gemma3":
        model = tf.Gemma3ForCausalLM(tf.Gemma3TextConfig(sliding_window=window, head_dim=hidden // 2,
                                                         layer_types=alternating, **common))
    elif kind == "llama4":
        model = tf.Llama4ForCausalLM(tf.Llama4TextConfig(attention_chunk_size=window, head_dim=hidden // 2,
                                                         intermediate_size_mlp=2 * hidden, num_local_experts=2,
                                                         no_rope_layer_interval=2, **common))
    elif kind == "lfm2":
        model = tf.Lfm2ForCausalLM(tf.Lfm2Config(layer_types=["conv"] + ["full_attention"] * (layers - 1), **common))
    else:
        raise KeyError(kind)
    model.eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(scale)
    return model


class BigramLM(torch.nn.Module):
    """Next-token logits depend only on the current token: ``logits[pos] = table[input_ids[pos]]``.

    Behaves like a transformers causal LM for hsd (``input_ids``, a cache argument, ``logits_to_keep``),
    so the exact distribution of any continuation is a product of table rows.
    """

    def __init__(self, table: torch.Tensor, eos_token_id: int | None = None):
        super().__init__()
        self.table = torch.nn.Parameter(table.float(), requires_grad=False)
        self.config = SimpleNamespace(vocab_size=table.shape[1], max_position_embeddings=4096)
        self.generation_config = SimpleNamespace(eos_token_id=eos_token_id)

    def forward(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        logits = self.table[input_ids]
        if logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return SimpleNamespace(logits=logits)


assert "cache" in inspect.signature(BigramLM.forward).parameters


class RowsLM(torch.nn.Module):
    """:class:`BigramLM` whose next-token logits after token ``i`` are ``row(i)``, made on demand (a table over a
    150k-entry vocabulary would hold 2e10 numbers)."""

    def __init__(self, row, vocab_size: int, eos_token_id: int | None = None):
        super().__init__()
        self.row = row
        self.anchor = torch.nn.Parameter(torch.zeros(1), requires_grad=False)  # the device and dtype hsd reads
        self.config = SimpleNamespace(vocab_size=vocab_size, max_position_embeddings=4096)
        self.generation_config = SimpleNamespace(eos_token_id=eos_token_id)

    def forward(self, input_ids, cache=None, use_cache=True, logits_to_keep=0):
        ids = input_ids[:, -logits_to_keep:] if logits_to_keep else input_ids
        return SimpleNamespace(logits=torch.stack([torch.stack([self.row(int(i)) for i in r]) for r in ids]))


def peaked_rows(vocab, seed: int, per_row: int = 4, among=None):
    """``row(i)``: almost all mass on ``per_row`` ordinary tokens (of ``among`` if given) drawn from ``(seed, i)``, as
    ``_sparse_rows``."""
    ordinary = torch.tensor([i for i in (range(len(vocab)) if among is None else among) if vocab.tokens[i]])

    @lru_cache(maxsize=None)
    def row(i: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed * 1_000_003 + i)
        out = torch.full((len(vocab),), -30.0)
        out[ordinary[torch.randint(len(ordinary), (per_row,), generator=gen)]] = (
            torch.tensor([3.0, 2.2, 1.6, 1.0][:per_row]) + torch.rand(per_row, generator=gen))
        return out

    return row


def correlated_rows(target_row, target_vocab, drafter_vocab, seed: int, reverse: bool = False):
    """A drafter's ``row(d)`` that roughly agrees with ``target_row`` where the two vocabularies share bytes, as
    ``correlated_bigrams`` builds its drafter table; ``reverse``: on the same tokens, the least likely first."""
    import hsd

    d2t = hsd.PairVocab.build(target_vocab, drafter_vocab).drafter_to_target.tolist()
    t2d = {t: d for d, t in enumerate(d2t) if t >= 0 and drafter_vocab.tokens[d]}
    fallback = peaked_rows(drafter_vocab, seed)

    @lru_cache(maxsize=None)
    def row(d: int) -> torch.Tensor:
        gen = torch.Generator().manual_seed(seed * 1_000_003 + d)
        out = torch.full((len(drafter_vocab),), -30.0)
        t = d2t[d]
        if t >= 0 and drafter_vocab.tokens[d]:
            target = target_row(t)
            for col in target.topk(4).indices.tolist():
                if col in t2d:
                    value = 4.5 - target[col] if reverse else target[col]
                    out[t2d[col]] = value * 0.7 + float(torch.rand(1, generator=gen))
        return out if out.max() > 0 else fallback(d)

    return row


def _sparse_rows(n_rows: int, columns: list[int], width: int, gen: torch.Generator, per_row: int = 4) -> torch.Tensor:
    """Each row puts almost all mass on ``per_row`` random columns (a peaked, known distribution)."""
    table = torch.full((n_rows, width), -30.0)
    cols = torch.tensor(columns)
    for r in range(n_rows):
        pick = cols[torch.randperm(len(cols), generator=gen)[:per_row]]
        table[r, pick] = torch.tensor([3.0, 2.2, 1.6, 1.0][:per_row]) + torch.rand(per_row, generator=gen)
    return table


def correlated_bigrams(target_tok, drafter_tok, seed: int = 0, pad: int = 0):
    """A peaked target bigram table and a drafter table that roughly agrees with it where the two
    vocabularies share bytes (so drafts are often, not always, accepted).

    Returns ``(target_model, drafter_model)``; ``pad`` extra drafter logits (a padded vocabulary)
    get a *high* value so a missing cut to the real vocabulary would show.
    """
    import hsd

    gen = torch.Generator().manual_seed(seed)
    tv, dv = hsd.Vocab.from_tokenizer(target_tok), hsd.Vocab.from_tokenizer(drafter_tok)
    pv = hsd.PairVocab.build(tv, dv)
    d2t = pv.drafter_to_target.tolist()
    t2d = {t: d for d, t in enumerate(d2t) if t >= 0 and dv.tokens[d]}
    ordinary = [i for i, b in enumerate(tv.tokens) if b]
    target = _sparse_rows(len(tv), ordinary, len(tv), gen)
    for e in tv.eos_ids:  # EOS is reachable but rare
        target[:, e] = 0.0
    drafter = torch.full((len(dv), len(dv) + pad), -30.0)
    drafter[:, len(dv):] = 50.0
    d_ordinary = [i for i, b in enumerate(dv.tokens) if b]
    for d in range(len(dv)):
        t = d2t[d]
        if t >= 0 and dv.tokens[d]:
            row = target[t]
            for col in row.topk(4).indices.tolist():
                if col in t2d:
                    drafter[d, t2d[col]] = row[col] * 0.7 + float(torch.rand(1, generator=gen))
        if drafter[d, :len(dv)].max() < 0:
            drafter[d] = torch.cat([_sparse_rows(1, d_ordinary, len(dv), gen)[0], drafter[d, len(dv):]])
    return BigramLM(target, tv.eos_ids[0]), BigramLM(drafter, dv.eos_ids[0])


@lru_cache(maxsize=1)
def byte_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level drafter tokenizer: specials ``<unk> <s> </s>`` then the 256 ``<0xNN>`` tokens, nothing
    else (like the embedded ``drafter-bytes``). Every text is one token per UTF-8 byte."""
    specials = ["<unk>", "<s>", "</s>"]
    vocab = {tok: i for i, tok in enumerate(specials)}
    vocab.update({f"<0x{b:02X}>": 3 + b for b in range(256)})
    tk = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>", byte_fallback=True))
    tk.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse()])
    tk.add_special_tokens(specials)
    return PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="<unk>", bos_token="<s>", eos_token="</s>")
