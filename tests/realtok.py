"""Real tokenizers and tiny real-vocabulary models for tests, without Hub access.

The vocabularies come from the vocab-only GGUF files that llama.cpp ships (and
llama-cpp-python's source distribution on PyPI vendors); ``scripts/fetch_vocabs.py``
puts them in ``$HSD_CACHE/gguf-vocabs`` (``HSD_CACHE`` defaults to ``~/.cache/hsd``).
See docs/real-tokenizers.md.

Everything built here is cached under ``$HSD_CACHE/realtok/<name>/`` and reused:

* ``tokenizer/``  the GGUF vocabulary converted once by transformers, saved as a
  normal tokenizer directory (``AutoTokenizer.from_pretrained(dir)``).
* ``model/``      a tiny random-weight ``LlamaForCausalLM`` over that vocabulary,
  saved with the tokenizer and a generation config, loadable offline like a Hub
  model directory.
* ``model-v<N>/`` the same, with the embedding/LM head padded to ``N`` rows (a
  model whose ``config.vocab_size`` is larger than ``len(tokenizer)``, as real
  checkpoints often are).

This module is a fixture library, not a test file; it imports torch and
transformers lazily so that importing it is cheap.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import tempfile
import zlib
from pathlib import Path
from typing import NamedTuple

__all__ = [
    "CACHE", "VOCAB_DIR", "REALTOK_DIR", "FETCH_COMMAND", "USABLE_THRESHOLD",
    "available", "has_reference", "reference_cases", "reference_agreement",
    "reference_disagreements", "usable", "usable_names", "load_tokenizer",
    "tokenizer_dir", "tiny_model_dir", "load_tiny_model", "padded_vocab_size",
    "Pair", "PAIRS", "ADVERSARIAL_PROMPTS",
]

CACHE = Path(os.environ.get("HSD_CACHE") or Path.home() / ".cache" / "hsd").expanduser()
VOCAB_DIR = CACHE / "gguf-vocabs"
REALTOK_DIR = CACHE / "realtok"
FETCH_COMMAND = "python scripts/fetch_vocabs.py"

# A tokenizer is "usable" for engine tests when transformers' conversion of the
# GGUF reproduces the reference tokenization of at least this share of the
# reference cases (see docs/real-tokenizers.md for why a few cases differ).
USABLE_THRESHOLD = 0.90

_CASE_SEP = "\n__ggml_vocab_test__\n"
# Bump when what is saved under REALTOK_DIR changes shape, to force a rebuild.
_BUILD_FORMAT = 1
# Bump when the tiny models' recipe changes.
_MODEL_FORMAT = 1


def _build_key(name: str) -> str:
    import transformers
    fix = _FIXES.get(name)
    return (f"format={_BUILD_FORMAT} transformers={transformers.__version__} "
            f"fix={fix.__name__ if fix else None}")


def _gguf_path(name: str) -> Path:
    return VOCAB_DIR / f"ggml-vocab-{name}.gguf"


def available() -> list[str]:
    """Names of the fetched vocabularies (``llama-spm``, ``qwen2``, ...); [] if not fetched."""
    if not VOCAB_DIR.is_dir():
        return []
    return sorted(p.name[len("ggml-vocab-"):-len(".gguf")] for p in VOCAB_DIR.glob("ggml-vocab-*.gguf"))


def has_reference(name: str) -> bool:
    """Whether llama.cpp ships reference tokenizations (.inp/.out) for this vocabulary."""
    p = _gguf_path(name)
    return Path(f"{p}.inp").exists() and Path(f"{p}.out").exists()


# --------------------------------------------------------------------------- reference


@functools.lru_cache(maxsize=None)
def reference_cases(name: str) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The (text, token ids) pairs of llama.cpp's reference tokenizations.

    ``.inp`` holds the texts, each followed by a ``__ggml_vocab_test__`` marker line;
    ``.out`` holds one line of space-separated ids per text. The ids were produced by
    the original Hugging Face tokenizer with ``add_special_tokens=False`` (llama.cpp's
    ``convert_hf_to_gguf_update.py``).
    """
    p = _gguf_path(name)
    inp = Path(f"{p}.inp").read_text(encoding="utf-8")
    out = Path(f"{p}.out").read_text(encoding="utf-8")
    texts = inp.split(_CASE_SEP)
    if texts and texts[-1] == "":
        texts.pop()
    lines = out.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(texts) != len(lines):
        raise ValueError(f"{name}: {len(texts)} reference texts but {len(lines)} id lines")
    return tuple((t, tuple(int(x) for x in line.split())) for t, line in zip(texts, lines))


def reference_disagreements(name: str) -> list[tuple[str, tuple[int, ...], tuple[int, ...]]]:
    """(text, reference ids, our ids) for every reference case we tokenize differently."""
    tok = load_tokenizer(name)
    bad = []
    for text, ref in reference_cases(name):
        ours = tuple(tok.encode(text, add_special_tokens=False))
        if ours != ref:
            bad.append((text, ref, ours))
    return bad


@functools.lru_cache(maxsize=None)
def reference_agreement(name: str) -> tuple[int, int]:
    """(cases tokenized exactly like the reference, number of cases)."""
    n = len(reference_cases(name))
    return n - len(reference_disagreements(name)), n


def usable(name: str) -> bool:
    """Loads, and agrees with its reference tokenizations on >= USABLE_THRESHOLD of cases."""
    if not has_reference(name):
        return False
    try:
        agree, total = reference_agreement(name)
    except Exception:
        return False
    return total > 0 and agree / total >= USABLE_THRESHOLD


def usable_names() -> list[str]:
    return [n for n in available() if usable(n)]


# --------------------------------------------------------------------------- tokenizers


def _atomic_build(final: Path, key: str, build) -> None:
    """Run ``build(tmpdir)`` and move the result to ``final`` (safe against partial builds
    and against two processes building the same thing)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        build(tmp)
        (tmp / ".built").write_text(key + "\n")
        if final.exists():
            shutil.rmtree(final)
        try:
            tmp.rename(final)
        except OSError:  # someone else finished first
            if not _is_built(final, key):
                raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _is_built(d: Path, key: str) -> bool:
    m = d / ".built"
    return m.exists() and m.read_text().strip() == key


def _require_vocab(name: str) -> Path:
    p = _gguf_path(name)
    if not p.exists():
        have = ", ".join(available()) or "none fetched"
        raise FileNotFoundError(f"no vocabulary {name!r} in {VOCAB_DIR} ({have}); run `{FETCH_COMMAND}`")
    return p


def tokenizer_dir(name: str) -> Path:
    """A normal tokenizer directory for ``name`` (built from the GGUF on first use)."""
    d = REALTOK_DIR / name / "tokenizer"
    key = _build_key(name)
    if not _is_built(d, key):
        gguf = _require_vocab(name)

        def build(tmp: Path) -> None:
            tok = _tokenizer_from_gguf(gguf)
            fix = _FIXES.get(name)
            if fix is not None:
                fix(tok.backend_tokenizer)
            tok.save_pretrained(str(tmp))
            if fix is not None:
                # Model-specific classes (Qwen2Tokenizer, ...) rebuild their own normalizer and
                # pre-tokenizer on load, undoing the fix; the generic class loads tokenizer.json as is.
                cfg_path = tmp / "tokenizer_config.json"
                cfg = json.loads(cfg_path.read_text())
                cfg["tokenizer_class"] = "TokenizersBackend"
                cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False))

        _atomic_build(d, key, build)
    return d


def _tokenizer_from_gguf(gguf: Path):
    """transformers' own GGUF tokenizer conversion.

    ``AutoTokenizer.from_pretrained(dir, gguf_file=...)`` first builds a model config
    from the GGUF, which fails for architectures transformers has no GGUF config
    mapping for (baichuan, mpt, refact, gpt-neox, command-r, bert, ...) even though
    the tokenizer part is generic. For those, fall back to the generic fast tokenizer
    class, which runs the same ``get_gguf_tokenizer``/``convert_gguf_tokenizer``
    conversion without a config.
    """
    from transformers import AutoTokenizer, PreTrainedTokenizerFast
    try:
        return AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    except Exception as auto_error:  # noqa: BLE001 - retried below, re-raised if that fails too
        try:
            return PreTrainedTokenizerFast.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        except Exception:
            raise auto_error


def _sentencepiece_legacy(backend) -> None:
    """Llama-1/2 ("legacy") SentencePiece: always prepend U+2581 and map every space to it
    (the normalizer of the original tokenizer.json). transformers' conversion uses a
    ``Metaspace(prepend_scheme="first")`` pre-tokenizer, which does not prepend when the
    text already starts with a space: `" Hello"` became `["▁Hello"]` instead of the
    reference `["▁", "▁Hello"]`, and `" "` became `["▁"]` instead of `["▁▁"]`."""
    from tokenizers import normalizers
    backend.normalizer = normalizers.Sequence(
        [normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    backend.pre_tokenizer = None


def _falcon_pretokenizer(backend) -> None:
    """Falcon's tokenizer.json pre-tokenizer: punctuation runs isolated, GPT-2 byte-level
    split, then digit runs cut into groups of three (`"3333"` -> `["333", "3"]`). The GGUF
    only names it ``falcon``, which transformers does not map, so it got plain GPT-2."""
    from tokenizers import Regex, pre_tokenizers
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Punctuation("contiguous"),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
        pre_tokenizers.Digits(individual_digits=False),
        pre_tokenizers.Split(Regex("[0-9][0-9][0-9]"), behavior="isolated"),
    ])


def _ignore_merges(backend) -> None:
    """Llama-3's BPE has ``ignore_merges``: a pre-token that is itself in the vocabulary is
    one token even when no merge path reaches it (`" Việt"`). Not recorded in the GGUF."""
    backend.model.ignore_merges = True


def _no_normalizer(backend) -> None:
    """Qwen3.5 does not NFC-normalize (reference keeps `e` + U+0301 as two tokens), but
    transformers builds it with Qwen2's NFC normalizer."""
    backend.normalizer = None


# Per-vocabulary corrections of transformers' GGUF conversion, to match the original
# Hugging Face tokenizers that produced llama.cpp's reference tokenizations.
_FIXES = {
    "llama-spm": _sentencepiece_legacy,
    "llama-bpe": _ignore_merges,
    "falcon": _falcon_pretokenizer,
    "qwen35": _no_normalizer,
}


@functools.lru_cache(maxsize=None)
def load_tokenizer(name: str):
    """The transformers (fast) tokenizer for vocabulary ``name``, loaded from its saved
    tokenizer directory, so it is exactly what ``tiny_model_dir(name)`` carries."""
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(tokenizer_dir(name)))


# --------------------------------------------------------------------------- tiny models

TINY_CONFIG = dict(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
    intermediate_size=64, max_position_embeddings=2048, tie_word_embeddings=False,
)
# Init stds. The defaults (0.02) give near-uniform next-token distributions; with
# unit-std embeddings and LM head the top token gets ~30-50% of the mass, greedy
# decoding produces 30 distinct tokens in 30 steps, and sampling still varies.
_LM_HEAD_STD = 1.0
_EMBED_STD = 1.0
_HIDDEN_STD = 0.1


def init_random_weights(model, gen) -> None:
    """Draw ``model``'s weights from the torch generator ``gen`` at the stds above (matrices, then the embedding,
    then the head), so that a tiny random model over a real vocabulary has peaked, varied next-token
    distributions."""
    import torch

    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, _HIDDEN_STD, generator=gen)
        model.get_input_embeddings().weight.normal_(0.0, _EMBED_STD, generator=gen)
        model.get_output_embeddings().weight.normal_(0.0, _LM_HEAD_STD, generator=gen)


def padded_vocab_size(name: str, extra: int = 64) -> int:
    """``len(tokenizer) + extra``: the vocab_size of the padded shared-tokenizer control."""
    return len(load_tokenizer(name)) + extra


def _seed(name: str, vocab_size: int | None) -> int:
    return zlib.crc32(f"hsd-realtok:{name}:{vocab_size}".encode())


def tiny_model_dir(name: str, vocab_size: int | None = None) -> Path:
    """A directory with a tiny random-weight ``LlamaForCausalLM`` over vocabulary ``name``,
    its tokenizer and a ``generation_config.json``; loadable offline with
    ``AutoModelForCausalLM.from_pretrained`` / ``AutoTokenizer.from_pretrained``.

    ``vocab_size`` defaults to ``len(tokenizer)``; a larger value pads the embedding and
    LM head (rows past the tokenizer are never produced by the tokenizer but do get
    probability mass, as in real padded checkpoints). Weights are seeded from
    ``(name, vocab_size)``, so the padded model is a *different* model from the
    unpadded one. Built once and reused.
    """
    tok_len = len(load_tokenizer(name))
    if vocab_size is None or vocab_size == tok_len:
        vocab_size, sub = tok_len, "model"
    else:
        if vocab_size < tok_len:
            raise ValueError(f"vocab_size {vocab_size} < len(tokenizer) {tok_len} for {name}")
        sub = f"model-v{vocab_size}"
    d = REALTOK_DIR / name / sub
    key = _build_key(name) + f" model={_MODEL_FORMAT}"
    if not _is_built(d, key):
        _atomic_build(d, key, lambda tmp: _build_tiny_model(name, vocab_size, tmp))
    return d


def _build_tiny_model(name: str, vocab_size: int, out: Path) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    tok = load_tokenizer(name)
    special = dict(bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                   pad_token_id=tok.pad_token_id)
    config = LlamaConfig(vocab_size=vocab_size, dtype="float32", **TINY_CONFIG, **special)
    gen = torch.Generator().manual_seed(_seed(name, vocab_size))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(_seed(name, vocab_size))
        model = LlamaForCausalLM(config)
    init_random_weights(model, gen)
    model = model.to(torch.float32).eval()
    model.save_pretrained(str(out))
    tok.save_pretrained(str(out))
    eos = tok.eos_token_id
    GenerationConfig(bos_token_id=tok.bos_token_id, eos_token_id=eos,
                     pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else eos,
                     do_sample=False).save_pretrained(str(out))
    (out / "realtok.json").write_text(json.dumps(
        {"vocab": name, "vocab_size": vocab_size, "len_tokenizer": len(tok),
         "seed": _seed(name, vocab_size), "source": str(_gguf_path(name).name)}, indent=1))


def load_tiny_model(name: str, vocab_size: int | None = None):
    """(fresh model, shared cached tokenizer) for ``tiny_model_dir(name, vocab_size)``.

    The tokenizer is ``load_tokenizer(name)`` (same files as the model dir carries; reusing
    it saves seconds per call on large vocabularies)."""
    from transformers import AutoModelForCausalLM
    d = tiny_model_dir(name, vocab_size)
    return AutoModelForCausalLM.from_pretrained(str(d)).eval(), load_tokenizer(name)


# --------------------------------------------------------------------------- pairs, prompts


class Pair(NamedTuple):
    target: str
    drafter: str
    description: str
    # vocab_size of the target / drafter model (None = len(tokenizer)); only the
    # shared-tokenizer control pads one side.
    target_vocab_size: int | None = None
    drafter_vocab_size: int | None = None
    # -1 means "len(tokenizer) + 64" resolved lazily by padded_vocab_size().

    def target_dir(self) -> Path:
        return tiny_model_dir(self.target, _resolve(self.target, self.target_vocab_size))

    def drafter_dir(self) -> Path:
        return tiny_model_dir(self.drafter, _resolve(self.drafter, self.drafter_vocab_size))

    @property
    def id(self) -> str:
        pad = "+pad" if (self.target_vocab_size or self.drafter_vocab_size) else ""
        return f"{self.target}<-{self.drafter}{pad}"


PADDED = -1


def _resolve(name: str, vocab_size: int | None) -> int | None:
    return padded_vocab_size(name) if vocab_size == PADDED else vocab_size


PAIRS: list[Pair] = [
    # The paper's pairs (target <- drafter), by tokenizer family.
    Pair("qwen2", "llama-spm", "DeepSeek-R1-Distill-Qwen (Qwen2 BPE) <- vicuna-68m (Llama SentencePiece)"),
    Pair("llama-spm", "starcoder", "CodeLlama (Llama SentencePiece) <- tiny_starcoder_py (StarCoder BPE)"),
    Pair("phi-3", "qwen2", "Phi-3-medium (Phi-3 SentencePiece) <- Qwen2-0.5B (Qwen2 BPE)"),
    Pair("llama-bpe", "qwen2", "Llama-3.1 (Llama-3 tiktoken-style BPE) <- Qwen2.5-0.5B (Qwen2 BPE)"),
    # Extra pairs.
    Pair("gpt-2", "falcon", "GPT-2 BPE <- Falcon BPE (both byte-level, different merges/specials)"),
    Pair("deepseek-coder", "starcoder", "DeepSeek-coder BPE <- StarCoder BPE (code models, different digit/space splits)"),
    Pair("deepseek-llm", "phi-3", "DeepSeek-LLM byte-level BPE <- Phi-3 SentencePiece (byte fallback)"),
    # Shared-tokenizer control: identical tokenizer, drafter's vocab_size padded by 64.
    Pair("qwen2", "qwen2", "control: same Qwen2 tokenizer, drafter vocab_size = len(tokenizer)+64",
         drafter_vocab_size=PADDED),
]


ADVERSARIAL_PROMPTS: list[str] = [
    " leading space",
    "trailing space ",
    "  two leading spaces",
    "repeated    spaces   inside",
    "   ",
    " ",
    "\t",
    "\n",
    "\n\n\n",
    " \t \n ",
    "tabs\tbetween\twords\t",
    "windows\r\nline\r\nendings\r\n",
    "mixed \r\n\n\r endings",
    "1 000 000 and 3 . 14 and 12 34 56",
    "31415926535897932384626433832795028841971693993751",
    "-0.000001e+10 +1,234,567.89 0x7fffffff",
    "def f(x):\n    if x:\n        return [i ** 2 for i in range(x)]\n    return None\n",
    "\tint main() {\n\t\treturn 0;\n\t}\n",
    "class A:\n  pass\n\n\n  # trailing indent   \n",
    "日本語のテキストと中文文本和한국어",
    "emoji 🦙🐍🚀 and 👨‍👩‍👧‍👦 family and flags 🇯🇵",
    "𝕳𝖊𝖑𝖑𝖔 𝔀𝓸𝓻𝓵𝓭 (4-byte math letters)",
    "cafe\u0301 vs caf\u00e9, n\u0303, a\u0300\u0301\u0302 stacked marks",
    "مرحبا بالعالم",
    "שלום עולם",
    "mixed العربية and English and עברית 123",
    "<s> not a bos </s> not an eos",
    "<|endoftext|>",
    "text <|im_start|>user\nhi<|im_end|> more",
    "<unk><pad>[CLS][SEP]<|begin_of_text|><|eot_id|>",
    "Ελληνικά, Русский, हिन्दी, ไทย",
    "zero\u200bwidth\u200djoiner\ufeffbom",
    "I've been 'told he's there, 'RE you sure? 'M not",
    "''''''```````\"\"\"\"......!!!!!!??????",
    "a" * 200,
    "ab " * 60,
    "Ｆｕｌｌｗｉｄｔｈ　ｓｐａｃｅ　and\u00a0nbsp",
    "🙂",
]


def main(argv: list[str] | None = None) -> int:
    """``python tests/realtok.py``: measure agreement per vocabulary (for the docs table)."""
    names = argv or available()
    if not names:
        print(f"no vocabularies fetched; run `{FETCH_COMMAND}`")
        return 1
    print(f"| vocabulary | tokenizer class | len(tokenizer) | agreement | usable |")
    print(f"|---|---|---|---|---|")
    for n in names:
        try:
            tok = load_tokenizer(n)
            size, cls = len(tok), type(tok).__name__
        except Exception as e:  # report, do not stop
            print(f"| {n} | load failed: {type(e).__name__}: {str(e)[:120]} | | | no |")
            continue
        if has_reference(n):
            a, t = reference_agreement(n)
            agr = f"{a}/{t} ({100 * a / t:.0f}%)"
        else:
            agr = "no reference"
        print(f"| {n} | {cls} | {size} | {agr} | {'yes' if usable(n) else 'no'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
