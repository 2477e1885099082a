"""Loading layer: models and tokenizers from the Hub or a local directory, devices and dtypes.

Loaded models are cached (least recently used evicted) and never mutated: hsd only runs forward
passes on them, each generation with its own KV caches.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch

from .assets import ASSETS
from .errors import (GatedModelError, HsdError, InvalidSettingError, ModelNotFoundError, NotCausalLMError,
                     RemoteCodeError, TokenizerMissingError)
from .vocab import PairVocab, Vocab

#: the embedded pairs, by the paths of their models as users see and type them ("assets/..."); installed
#: as a package, "assets/" is the package data folder hsd._assets (see hsd/assets.py)
EMBEDDED = {
    "tiny-code": ("assets/tiny-code/target", "assets/tiny-code/drafter"),
    # the same target with the byte-level drafter: one drafter path per string, SLRS's cheap case
    "tiny-code-bytes": ("assets/tiny-code/target", "assets/tiny-code/drafter-bytes"),
}


def embedded_path(name: str) -> Path | None:
    """``assets/...`` as users type it, resolved to the embedded folder wherever hsd runs from (a
    checkout, an installed package, a Space); ``None`` for any other name or a folder that is not there."""
    if not name.startswith("assets/"):
        return None
    path = ASSETS / name[len("assets/"):]
    return path if path.is_dir() else None


PRESETS: dict[str, tuple[str, str]] = {name: (str(ASSETS / t.removeprefix("assets/")),
                                              str(ASSETS / d.removeprefix("assets/")))
                                       for name, (t, d) in EMBEDDED.items()}
DEFAULT_PRESET = "tiny-code"
#: the pairs an interactive front end offers, label -> (target, drafter): the embedded ones first (they work
#: offline on a CPU), then the paper's pairs and two controls; an empty pair for the user's own names
GALLERY: dict[str, tuple[str, str]] = {
    "tiny-code (embedded, offline, CPU)": EMBEDDED["tiny-code"],
    "tiny-code-bytes (embedded target, byte-level drafter: SLRS at its cheapest)": EMBEDDED["tiny-code-bytes"],
    "gemma-2-9b-it ← vicuna-68m (paper, text)": ("google/gemma-2-9b-it", "double7/vicuna-68m"),
    "CodeLlama-13b-Instruct ← tiny_starcoder_py (paper, code)": ("codellama/CodeLlama-13b-Instruct-hf",
                                                                 "bigcode/tiny_starcoder_py"),
    "phi-4 ← Qwen2.5-0.5B-Instruct (paper)": ("microsoft/phi-4", "Qwen/Qwen2.5-0.5B-Instruct"),
    "DeepSeek-R1-Distill-Qwen-14B ← vicuna-68m (paper, reasoning)": ("deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
                                                                     "double7/vicuna-68m"),
    "gemma-2-9b-it ← gemma-2-2b-it (same-vocabulary control)": ("google/gemma-2-9b-it", "google/gemma-2-2b-it"),
    "Llama-3.1-8B-Instruct ← Qwen2.5-0.5B-Instruct (bad drafter)": ("meta-llama/Llama-3.1-8B-Instruct",
                                                                    "Qwen/Qwen2.5-0.5B-Instruct"),
    "Qwen2.5-1.5B-Instruct ← SmolLM2-135M-Instruct (CPU classroom)": ("Qwen/Qwen2.5-1.5B-Instruct",
                                                                      "HuggingFaceTB/SmolLM2-135M-Instruct"),
    "Custom (type Hub ids or local directories)": ("", ""),
}
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
MAX_CACHED_MODELS = int(os.environ.get("HSD_MAX_CACHED_MODELS", "4"))


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` picks cuda, then mps, then cpu."""
    if device in (None, "auto"):
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise InvalidSettingError(f"Unknown device {device!r}: use auto, cpu, cuda, cuda:N or mps.") from exc
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InvalidSettingError("device='cuda' was asked for but no CUDA GPU is available: use device='cpu'.")
    return dev


def resolve_dtype(dtype: str = "auto", device: torch.device | None = None) -> torch.dtype:
    """``auto``: float32 on CPU (fastest and exact there), bfloat16 on CUDA when supported, else float16."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        if device is None or device.type == "cpu":
            return torch.float32
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float16
    if dtype not in DTYPES:
        raise InvalidSettingError(f"Unknown dtype {dtype!r}: use auto, float32, bfloat16 or float16.")
    return DTYPES[dtype]


@dataclass
class Model:
    """A loaded causal LM with its tokenizer and the derived vocabulary tables."""

    name: str
    model: torch.nn.Module
    tokenizer: object
    vocab: Vocab = field(repr=False)

    @classmethod
    def wrap(cls, model, tokenizer, name: str | None = None) -> "Model":
        gen = getattr(model, "generation_config", None)
        eos = getattr(gen, "eos_token_id", None) if gen is not None else None
        eos_ids = eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else None
        if eos_ids is not None and tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in eos_ids:
            eos_ids = list(eos_ids) + [tokenizer.eos_token_id]
        vocab = Vocab.from_tokenizer(tokenizer, eos_ids=eos_ids)
        return cls(name or getattr(getattr(model, "config", None), "_name_or_path", "model"), model, tokenizer, vocab)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    @cached_property
    def n_logits(self) -> int:
        """Logits that belong to real tokens: a padded embedding matrix is cut to the tokenizer."""
        config = getattr(self.model, "config", None)
        size = getattr(config, "vocab_size", None) or len(self.vocab)
        return min(int(size), len(self.vocab))

    @cached_property
    def context_length(self) -> int | None:
        config = getattr(self.model, "config", None)
        for attr in ("max_position_embeddings", "n_positions", "seq_length", "max_sequence_length"):
            value = getattr(config, attr, None)
            if isinstance(value, int) and value > 0:
                return value
        return None

    @cached_property
    def n_params(self) -> int:
        return sum(p.numel() for p in self.model.parameters())


@dataclass
class Pair:
    """A target and (optionally) a drafter. ``pair.target.model``, ``pair.drafter.tokenizer``..."""

    target: Model
    drafter: Model | None = None

    @classmethod
    def from_models(cls, target_model, target_tokenizer, drafter_model=None, drafter_tokenizer=None) -> "Pair":
        """A pair from objects already in memory (they are used, never modified)."""
        drafter = Model.wrap(drafter_model, drafter_tokenizer) if drafter_model is not None else None
        return cls(Model.wrap(target_model, target_tokenizer), drafter)

    @cached_property
    def vocab(self) -> PairVocab:
        if self.drafter is None:
            raise HsdError("This pair has no drafter: load one with hsd.load_pair(target=..., drafter=...).")
        return PairVocab.build(self.target.vocab, self.drafter.vocab)


_CACHE: "OrderedDict[tuple, Model]" = OrderedDict()


_PAIRS: "OrderedDict[tuple[int, int], Pair]" = OrderedDict()


def clear_cache() -> None:
    _CACHE.clear()
    _PAIRS.clear()


def is_loaded(name: str, *, device: str = "auto", dtype: str = "auto", device_map: str | None = None,
              trust_remote_code: bool = False, revision: str | None = None) -> bool:
    """Whether :func:`load_model` with these arguments would be answered from the cache."""
    return _cache_key(name, revision, device, dtype, device_map, trust_remote_code) in _CACHE


def _cache_key(name, revision, device, dtype, device_map, trust_remote_code) -> tuple:
    name = str(Path(name).expanduser()) if _is_local(name) else name.strip()
    dev = resolve_device(device)
    return (name, revision, str(dev), str(resolve_dtype(dtype, dev)), device_map, trust_remote_code)


def _is_local(name: str) -> bool:
    return Path(name).expanduser().is_dir()


def _load_error(name: str, exc: Exception, what: str) -> HsdError:
    """Turn a transformers / huggingface_hub loading failure into a message that says what to do."""
    text = f"{type(exc).__name__}: {exc}"
    kind = type(exc).__name__
    if "Gated" in kind or "gated" in text or "401" in text and "Client Error" in text:
        return GatedModelError(
            f"{name!r} is a gated model: accept its licence on huggingface.co/{name} and log in "
            "(`hf auth login`) or set HF_TOKEN, then try again.")
    if "trust_remote_code" in text or "contains custom code" in text:
        return RemoteCodeError(
            f"{name!r} needs its own Python code (from its repository) to load, and hsd does not run it unless "
            "you turn that on. Only if you trust its authors: pass trust_remote_code=True to hsd.load_pair / "
            "hsd.load_model, or --trust-remote-code on the command line.")
    if _is_local(name):
        if what == "tokenizer":
            return TokenizerMissingError(
                f"No tokenizer could be loaded from {name!r} ({text.splitlines()[0][:200]}). hsd needs the "
                "model's tokenizer files (tokenizer.json or tokenizer.model) in the same directory.")
        return ModelNotFoundError(f"{name!r} is a directory but not a loadable model: {text.splitlines()[0][:300]}")
    offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False")
    if offline or "connect" in text.lower() or "offline" in text.lower() or "LocalEntryNotFound" in kind:
        return ModelNotFoundError(
            f"Model {name!r} is not available locally and the Hugging Face Hub cannot be reached"
            f"{' (HF_HUB_OFFLINE is set)' if offline else ''}. On a machine with network access run "
            f"`hf download {name}` (it fills the Hugging Face cache, which you can copy here), or pass "
            "the path of a local model directory.")
    if "RepositoryNotFound" in kind or "is not a valid model identifier" in text or "404" in text:
        return ModelNotFoundError(
            f"Model {name!r} was not found on the Hugging Face Hub or as a local directory. Check the id "
            "(owner/name) or the path.")
    if what == "tokenizer":
        return TokenizerMissingError(f"The tokenizer of {name!r} could not be loaded: {text.splitlines()[0][:300]}")
    return ModelNotFoundError(f"{name!r} could not be loaded: {text.splitlines()[0][:300]}")


def load_model(name: str, *, device: str = "auto", dtype: str = "auto", device_map: str | None = None,
               trust_remote_code: bool = False, revision: str | None = None, token: str | None = None) -> Model:
    """Load (or reuse from the cache) a causal LM and its tokenizer from a Hub id or a directory.

    ``device_map="auto"`` spreads a model that does not fit one GPU over several (needs accelerate).
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if not isinstance(name, str) or not name.strip():
        raise ModelNotFoundError("No model given: pass a Hugging Face Hub id (owner/name) or a local directory.")
    key = _cache_key(name, revision, device, dtype, device_map, trust_remote_code)
    name, dev = key[0], resolve_device(device)
    torch_dtype = resolve_dtype(dtype, dev)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    common = dict(revision=revision, trust_remote_code=trust_remote_code, token=token)
    try:
        config = AutoConfig.from_pretrained(name, **common)
    except Exception as exc:  # transformers raises OSError/ValueError/HF errors for every failure mode
        raise _load_error(name, exc, "model") from exc
    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not trust_remote_code:
        raise NotCausalLMError(
            f"{name!r} is a {config.model_type!r} model, not a causal language model: hsd needs a decoder-only "
            "text-generation model (AutoModelForCausalLM), for both the target and the drafter.")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **common)
    except Exception as exc:
        raise _load_error(name, exc, "tokenizer") from exc
    try:
        model = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype, device_map=device_map, **common)
    except ValueError as exc:
        if "Unrecognized configuration class" in str(exc):
            raise NotCausalLMError(f"{name!r} is not a causal language model: {exc}") from exc
        raise _load_error(name, exc, "model") from exc
    except Exception as exc:
        raise _load_error(name, exc, "model") from exc
    if device_map is None:
        model.to(dev)
    model.eval()
    loaded = Model.wrap(model, tokenizer, name)
    _CACHE[key] = loaded
    while len(_CACHE) > MAX_CACHED_MODELS:
        _CACHE.popitem(last=False)
    return loaded


def load_pair(target: str | None = None, drafter: str | None = None, *, preset: str | None = None,
              device: str = "auto", dtype: str = "auto", device_map: str | None = None,
              trust_remote_code: bool = False, token: str | None = None) -> Pair:
    """Load a target and a drafter. With no arguments: the embedded ``tiny-code`` pair in ``assets/``.

    ``drafter=None`` with a ``target`` gives a target-only pair, enough for ``algorithm="ar"``.
    """
    if preset is None and target is None and drafter is None:
        preset = DEFAULT_PRESET
    if preset is not None:
        if preset not in PRESETS:
            raise ModelNotFoundError(f"Unknown preset {preset!r}; known presets: {', '.join(PRESETS)}.")
        preset_target, preset_drafter = PRESETS[preset]
        target = target or preset_target
        drafter = drafter or preset_drafter
    if target is None:
        raise ModelNotFoundError("No target model given: pass target='<hub id or directory>'.")
    kw = dict(device=device, dtype=dtype, trust_remote_code=trust_remote_code, token=token)
    t = load_model(target, device_map=device_map, **kw)
    d = load_model(drafter, **kw) if drafter else None
    key = (id(t), id(d))  # the same loaded models give the same Pair, so its vocabulary maps are built once
    if key not in _PAIRS or _PAIRS[key].target is not t or _PAIRS[key].drafter is not d:
        _PAIRS[key] = Pair(t, d)
    _PAIRS.move_to_end(key)
    while len(_PAIRS) > MAX_CACHED_MODELS:
        _PAIRS.popitem(last=False)
    return _PAIRS[key]
