"""What the embedded pair's training scripts share: building, rounding and saving a model, bf16 where the
hardware has it, prompts cut from the corpus, greedy sample completions, the machine line. ``train_pair.py``,
``resumable.py``, ``grow.py``, ``soft_labels.py`` and ``gpu_drafters.py`` import it; it imports none of them."""

from __future__ import annotations

import functools
import json
import random
import re
from pathlib import Path

import torch

from hsd.machine import host_info as machine_info  # noqa: F401  (the training logs' machine line)

SAMPLE_PROMPTS = [
    "def fibonacci(n):",
    "import os\nimport sys\n\n\ndef main(argv):",
    "class Stack:\n    \"\"\"A simple LIFO stack.\"\"\"\n\n    def __init__(self):",
]


def make_model(vocab_size, layers, hidden, bos, eos, pad, max_pos):
    from transformers import LlamaConfig, LlamaForCausalLM

    heads = max(2, hidden // 64)
    inter = int(round(hidden * 8 / 3 / 32)) * 32
    cfg = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=max_pos,
        rope_theta=10000.0, rms_norm_eps=1e-5, tie_word_embeddings=True, attention_dropout=0.0,
        bos_token_id=bos, eos_token_id=eos, pad_token_id=pad, use_cache=True,
    )
    try:
        cfg._attn_implementation = "sdpa"
    except Exception:
        pass
    return LlamaForCausalLM(cfg)


@functools.lru_cache(maxsize=None)
def bf16_is_fast(device: str) -> bool:
    """bf16 autocast pays on GPUs and on CPUs with native bf16 (AVX512-BF16, AMX); elsewhere it is
    emulated: on an AVX2-only EPYC a training step takes 10x longer than in float32."""
    if device.startswith("cuda"):
        return torch.cuda.is_bf16_supported()
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def autocast_ctx(device: str, enabled: bool = True):
    """bf16 autocast where the hardware has bf16 (see ``bf16_is_fast``), else a no-op (float32)."""
    return torch.autocast(device_type="cuda" if device.startswith("cuda") else "cpu",
                          dtype=torch.bfloat16, enabled=enabled and bf16_is_fast(device))


def round_to_fp16_(model):
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.half().float())


@functools.lru_cache(maxsize=65536)
def _line_starts(text: str) -> tuple[int, ...]:
    return (0, *(m.end() for m in re.finditer(r"\n", text[:-1])))


def make_prompts_batched(docs, hf_tok, n, lengths, rng: random.Random):
    """Prompts as in :func:`make_prompts` (exactly L tokens, cut at line starts), drawn for all ``n`` at once and
    tokenized in one batch: thousands per GPU generate call. The same ``rng`` gives the same prompts; they are
    not :func:`make_prompts`' prompts for that ``rng``."""
    def at_a_line(text: str, L: int) -> str:
        starts = _line_starts(text)  # cached: a batch of thousands of prompts revisits the same files
        s = starts[rng.randrange(len(starts))] if rng.random() > 0.15 else 0
        return text[s:s + 12 * L]

    return _prompts_batched(docs, hf_tok, n, lengths, rng, at_a_line, tries=20, last=False)


@functools.lru_cache(maxsize=65536)
def _docstring_ends(text: str) -> tuple[int, ...]:
    """Character offsets just past the docstring of each function of ``text`` that ``build_prompts`` would make an
    evaluation prompt of (a docstring of a few words, a body after it): where such a prompt ends."""
    from build_prompts import docstring_prompts

    starts = _line_starts(text)
    ends = []
    for line, prompt in docstring_prompts(text):
        start = starts[line - 1]
        if text.startswith(prompt, start):
            ends.append(start + len(prompt))
    return tuple(ends)


def make_function_prompts_batched(docs, hf_tok, n, lengths, rng: random.Random):
    """``n`` prompts of exactly L tokens (as :func:`make_prompts_batched`) that end where a function's docstring
    ends, as the evaluation prompts do (``scripts/build_prompts.py``): the text before it in its file, cut to its
    last L tokens. What the target writes after them is a function's body, what a visitor's prompt asks for."""
    def before_a_body(text: str, L: int) -> str | None:
        ends = _docstring_ends(text)
        if not ends:
            return None
        end = ends[rng.randrange(len(ends))]
        return text[max(0, end - 12 * L):end]

    return _prompts_batched(docs, hf_tok, n, lengths, rng, before_a_body, tries=40, last=True)


def _prompts_batched(docs, hf_tok, n, lengths, rng: random.Random, cut, tries: int, last: bool):
    """``n`` prompts of ``lengths[i % len(lengths)]`` tokens: ``cut(text, L)`` takes a text from a random document
    (``None``: this one has none), and its first L tokens (``last``: its last L) are the prompt; a text shorter than
    L tokens is drawn again, up to ``tries`` times, with every pending prompt tokenized in one batch."""
    out: dict[int, tuple[int, list[int]]] = {}
    pending = list(range(n))
    for _ in range(tries):
        if not pending:
            break
        cands = []
        for i in pending:
            L = lengths[i % len(lengths)]
            text = cut(docs[rng.randrange(len(docs))][1], L)
            if text is not None:
                cands.append((i, L, text))
        encs = hf_tok.backend_tokenizer.encode_batch([c[2] for c in cands], add_special_tokens=False)
        for (i, L, _), enc in zip(cands, encs):
            if len(enc.ids) >= L:
                out[i] = (L, enc.ids[-L:] if last else enc.ids[:L])
        pending = [i for i in pending if i not in out]
    return [out[i] for i in sorted(out)]


def save_model_dir(model, hf_tok, path: Path):
    from transformers import GenerationConfig

    path.mkdir(parents=True, exist_ok=True)
    m16 = model.to("cpu").half()
    m16.generation_config = GenerationConfig(
        bos_token_id=hf_tok.bos_token_id, eos_token_id=hf_tok.eos_token_id, pad_token_id=hf_tok.pad_token_id,
        do_sample=False)
    m16.save_pretrained(path, safe_serialization=True)
    model.float()
    # weights are stored in float16 (half the size); config dtype float32 so that a plain
    # from_pretrained(dir) (dtype="auto") loads and runs them in float32 on CPU.
    cfg_path = path / "config.json"
    cfg = json.loads(cfg_path.read_text())
    for key in ("dtype", "torch_dtype"):
        if key in cfg:
            cfg[key] = "float32"
    cfg.setdefault("dtype", "float32")
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    hf_tok.save_pretrained(path)
    # transformers records how *this* process loaded the tokenizer ("is_local", "local_files_only");
    # those say nothing about the model and would change the shipped file on every export.
    tc_path = path / "tokenizer_config.json"
    tc = json.loads(tc_path.read_text())
    if [tc.pop(key) for key in ("is_local", "local_files_only") if key in tc]:
        tc_path.write_text(json.dumps(tc, indent=2, ensure_ascii=False) + "\n")


@torch.no_grad()
def sample_completions(model, tok, max_new):
    outs = []
    for p in SAMPLE_PROMPTS:
        enc = tok(p, return_tensors="pt")
        out = model.generate(**enc, max_new_tokens=max_new, do_sample=False, pad_token_id=tok.pad_token_id)
        outs.append(dict(prompt=p, completion=tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)))
    return outs
