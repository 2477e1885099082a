"""Loading layer: models and tokenizers from the Hub or a local directory, devices and dtypes.

Loaded models are cached and never mutated: hsd only runs forward passes on them, each generation with
its own KV caches. (A model hsd loads on the CPU in float32 gets its linear layers laid out before it is
cached: the same values, multiplied in the layout the CPU is fastest in for decoding's few rows, :mod:`hsd.layout`.)
The cache is the only place hsd keeps a model: at most ``MAX_CACHED_MODELS``
(``HSD_MAX_CACHED_MODELS``, default 4, at least 2: one pair) live in it, the least recently used is
evicted *before* a new one loads, and the :class:`Pair` objects :func:`load_pair` reuses are dropped
with their models, so an evicted model is freed once the caller lets go of it.

A Hub model can be pinned to a ``revision`` (branch, tag or commit); :attr:`Model.commit` records the
commit that was loaded. Hub failures are classified by ``huggingface_hub.errors`` type (transformers
re-raises them as ``OSError`` chained to the original) into hsd's own errors, which say what to do.
"""

from __future__ import annotations

import gc
import os
import threading
from collections import OrderedDict
from collections.abc import Collection
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import torch
from huggingface_hub import constants as hub_constants
from huggingface_hub import errors as hub_errors

from .assets import ASSETS
from .errors import (GatedModelError, HsdError, HubAuthError, InvalidSettingError, ModelNotFoundError,
                     NotCausalLMError, RemoteCodeError, RevisionNotFoundError, TokenizerMissingError)
from .layout import use_layout
from .vocab import PairVocab, Vocab

#: the embedded pairs, by the paths of their models as users see and type them ("assets/..."); installed
#: as a package, "assets/" is the package data folder hsd._assets (see hsd/assets.py)
EMBEDDED = {
    "tiny-code": ("assets/tiny-code/target", "assets/tiny-code/drafter"),
    # the same target with the byte-level drafter: one drafter path per string, SLRS's cheap case
    "tiny-code-bytes": ("assets/tiny-code/target", "assets/tiny-code/drafter-bytes"),
    # the same target with a drafter that shares its tokenizer: classic speculative decoding (SD) offline
    "tiny-code-shared": ("assets/tiny-code/target", "assets/tiny-code/drafter-shared"),
    # the same target with a drafter trained on its whole next-token distribution: for sampling with TLI, where
    # the greedy drafter (trained on the target's most probable text) is accepted less
    "tiny-code-sampling": ("assets/tiny-code/target", "assets/tiny-code/drafter-sampling"),
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
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _max_cached_models(value: str) -> int:
    """``HSD_MAX_CACHED_MODELS``: a whole number >= 2, since a pair is two models and both must stay cached."""
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 2:
        raise InvalidSettingError(f"HSD_MAX_CACHED_MODELS={value!r}: use a whole number of at least 2 (a target and "
                                  "a drafter), or unset it for the default 4.")
    return n


#: models kept loaded at once (read at import from HSD_MAX_CACHED_MODELS; may be set at run time). A bad value is
#: reported by the first load, where every front end shows errors, not by the import
try:
    MAX_CACHED_MODELS, _BAD_CACHE_SETTING = _max_cached_models(os.environ.get("HSD_MAX_CACHED_MODELS", "4")), None
except InvalidSettingError as _exc:
    MAX_CACHED_MODELS, _BAD_CACHE_SETTING = 4, _exc


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
    revision: str | None = None  # the revision asked for (branch, tag or commit); None: the default branch
    commit: str | None = None  # the Hub commit that was loaded; None for a local directory or an in-memory model

    @classmethod
    def wrap(cls, model, tokenizer, name: str | None = None, revision: str | None = None,
             commit: str | None = None) -> "Model":
        gen = getattr(model, "generation_config", None)
        eos = getattr(gen, "eos_token_id", None) if gen is not None else None
        eos_ids = eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else None
        if eos_ids is not None and tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in eos_ids:
            eos_ids = list(eos_ids) + [tokenizer.eos_token_id]
        vocab = Vocab.from_tokenizer(tokenizer, eos_ids=eos_ids)
        name = name or getattr(getattr(model, "config", None), "_name_or_path", "model")
        return cls(name, model, tokenizer, vocab, revision, commit)

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

    def provenance(self) -> dict:
        """Each model's name, the revision asked for and the commit loaded (``None`` for local directories):
        what a result needs to say exactly which weights produced it."""
        out = {}
        for role, m in (("target", self.target), ("drafter", self.drafter)):
            out.update({role: m.name if m else None, f"{role}_revision": m.revision if m else None,
                        f"{role}_commit": m.commit if m else None})
        return out


# The one place hsd keeps models: cache key -> Model, least recently used first. _PAIRS holds the Pair of each
# (target key, drafter key) so its vocabulary maps are built once; a pair goes when either of its models goes.
_CACHE: "OrderedDict[tuple, Model]" = OrderedDict()
_PAIRS: dict[tuple, Pair] = {}
_LOCK = threading.RLock()  # one load at a time: a model asked for twice at once is loaded once


def _evict(key: tuple) -> None:
    _CACHE.pop(key, None)
    for pair_key in [k for k in _PAIRS if key in k]:
        del _PAIRS[pair_key]


def _free_memory() -> None:
    """Collect what eviction released (models hold reference cycles) and hand CUDA's cached blocks back."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def release_models(keep: tuple = ()) -> int:
    """Evict every cached model except the cache keys in ``keep``; returns how many went. A model is freed
    once no caller holds it (or a :class:`Pair` of it) any more."""
    with _LOCK:
        gone = [k for k in _CACHE if k not in keep]
        for key in gone:
            _evict(key)
    if gone:
        _free_memory()
    return len(gone)


def clear_cache() -> None:
    """Forget every loaded model and pair."""
    release_models()


def cached_models() -> list[str]:
    """The names of the models in the cache, least recently used first."""
    return [m.name for m in _CACHE.values()]


def is_loaded(name: str, *, device: str = "auto", dtype: str = "auto", device_map: str | None = None,
              trust_remote_code: bool = False, revision: str | None = None) -> bool:
    """Whether :func:`load_model` with these arguments would be answered from the cache."""
    return cache_key(name, revision, device, dtype, device_map, trust_remote_code) in _CACHE


#: what ``device_map`` may say as a string (accelerate's strategies), besides a device name
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")


def model_name(name) -> str:
    """A model's name as given (a Hub id or a directory, a ``str`` or a path object) as a ``str``."""
    if isinstance(name, os.PathLike):
        return os.fspath(name)
    if not isinstance(name, str):
        raise ModelNotFoundError(f"A model is named by a Hub id (owner/name) or a local directory, as a str or a "
                                 f"path; got {type(name).__name__} {name!r}.")
    return name


def check_device_map(device_map) -> None:
    """``None``, one of :data:`DEVICE_MAP_STRATEGIES` or a device name (``cpu``, ``cuda:0``)."""
    if device_map is None:
        return
    if isinstance(device_map, str) and device_map in DEVICE_MAP_STRATEGIES:
        return
    try:
        torch.device(device_map)
        return
    except (RuntimeError, TypeError):
        pass
    raise InvalidSettingError(f"device_map={device_map!r} is not a device map: use 'auto' (spread the model over the "
                              "GPUs, needs accelerate), 'balanced', 'balanced_low_0', 'sequential', or one device such "
                              "as 'cpu' or 'cuda:0'; leave it out to load on one device.")


def cache_key(name, revision=None, device="auto", dtype="auto", device_map=None, trust_remote_code=False, *,
              what: str = "revision") -> tuple:
    """The cache's key for :func:`load_model`'s arguments (``what``: the revision's keyword, for messages)."""
    name = model_name(name)
    name = str(Path(name).expanduser()) if _is_local(name) else name.strip()
    check_device_map(device_map)
    dev = resolve_device(device)
    return (name, _check_revision(name, revision, what), str(dev), str(resolve_dtype(dtype, dev)), device_map,
            trust_remote_code)


def _is_local(name: str) -> bool:
    try:
        return Path(name).expanduser().is_dir()
    except (OSError, ValueError, RuntimeError):  # too long, a NUL byte, an unknown ~user: not a directory
        return False


def _check_revision(name: str, revision, what: str = "revision") -> str | None:
    """``None``/``""``: the default branch. A revision pins a Hub model only: a local directory has one version."""
    if revision is None or isinstance(revision, str) and not revision.strip():
        return None
    if not isinstance(revision, str):
        raise InvalidSettingError(f"{what} must be a str (a branch, tag or commit hash), got {revision!r}.")
    if _is_local(name):
        raise InvalidSettingError(f"{what}={revision!r} was given for {name!r}, a local directory: a revision pins a "
                                  "Hub model (owner/name). Drop it, or pass the Hub id instead of the directory.")
    return revision.strip()


def offline() -> bool:
    """Whether the Hub is off limits: HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE, as huggingface_hub reads them."""
    return hub_constants.is_offline_mode()


_UNREACHABLE = (hub_errors.LocalEntryNotFoundError, hub_errors.OfflineModeIsEnabled,
                hub_errors.RevisionResolutionError)
_HUB_ERRORS = (hub_errors.GatedRepoError, hub_errors.RevisionNotFoundError, hub_errors.RepositoryNotFoundError,
               *_UNREACHABLE, hub_errors.HFValidationError, hub_errors.HfHubHTTPError)


def hub_cause(exc: BaseException | None) -> BaseException | None:
    """The innermost ``huggingface_hub`` error behind ``exc`` along its explicit causes (transformers re-raises
    ``OSError(...) from e``; huggingface_hub wraps a Hub's 403 or 5xx answer in a "not in the cache" error, so the
    innermost one says what happened). An error merely handled on the way (``__context__``, e.g. an optional file
    missing) did not cause the failure and is not followed."""
    found, seen = None, set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, _HUB_ERRORS):
            found = exc
        seen.add(id(exc))
        exc = exc.__cause__
    return found


def hub_error(name: str, exc: BaseException, revision: str | None = None) -> HsdError | None:
    """hsd's error for a Hub failure, by ``huggingface_hub.errors`` type; ``None`` if the Hub is not the cause."""
    cause = hub_cause(exc)
    pinned = f" --revision {revision}" if revision else ""
    at = f" at revision {revision!r}" if revision else ""
    status = getattr(getattr(cause, "response", None), "status_code", None)
    if isinstance(cause, hub_errors.GatedRepoError):  # before RepositoryNotFoundError, its base class
        return GatedModelError(
            f"{name!r} is a gated model: accept its licence on https://huggingface.co/{name} and log in "
            "(`hf auth login`) or set HF_TOKEN with a token of that account, then try again.")
    if isinstance(cause, hub_errors.RevisionNotFoundError):
        return RevisionNotFoundError(
            f"{name!r} has no revision {revision!r}: give a branch, tag or commit hash that exists (see "
            f"https://huggingface.co/{name}/commits/main), or leave the revision out for the default branch.")
    if isinstance(cause, hub_errors.RepositoryNotFoundError):
        return ModelNotFoundError(
            f"Model {name!r} was not found on the Hugging Face Hub or as a local directory. Check the id (owner/name) "
            "or the path; if it is a private repository, log in (`hf auth login`) or set HF_TOKEN.")
    if isinstance(cause, _UNREACHABLE):
        why = " (offline mode: HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set)" if offline() else ""
        return ModelNotFoundError(
            f"Model {name!r}{at} is not available locally and the Hugging Face Hub cannot be reached{why}. On a "
            f"machine with network access run `hf download {name}{pinned}` (it fills the Hugging Face cache, which "
            "you can copy here), or pass the path of a local model directory.")
    if isinstance(cause, hub_errors.HFValidationError):
        return ModelNotFoundError(f"{name!r} is neither a local directory nor a valid Hub id (owner/name).")
    if isinstance(cause, hub_errors.EntryNotFoundError):
        return ModelNotFoundError(f"{name!r}{at} lacks a file transformers needs ({str(cause).splitlines()[0][:200]}): "
                                  "is it a transformers model repository?")
    if status in (401, 403):
        why = "invalid, expired or revoked" if status == 401 else "it lacks permission for this repository"
        return HubAuthError(
            f"The Hugging Face Hub refused the access token while loading {name!r} ({status}: {why}). Log in "
            "again (`hf auth login`) or set HF_TOKEN to a valid token with read access from "
            "https://huggingface.co/settings/tokens; for a public model, unset HF_TOKEN.")
    if isinstance(cause, hub_errors.HfHubHTTPError):
        return ModelNotFoundError(
            f"The Hugging Face Hub answered {status or 'with an error'} while loading {name!r}{at}: try again in "
            f"a while, or run `hf download {name}{pinned}` and load from the cache.")
    return None


def _load_error(name: str, exc: Exception, what: str, revision: str | None = None) -> HsdError:
    """Turn a transformers / huggingface_hub loading failure into a message that says what to do."""
    hub = hub_error(name, exc, revision)
    if hub is not None:
        return hub
    text = f"{type(exc).__name__}: {exc}"
    if "trust_remote_code" in text or "contains custom code" in text:  # transformers' ValueError; it has no type
        return RemoteCodeError(
            f"{name!r} needs its own Python code (from its repository) to load, and hsd does not run it unless "
            "you turn that on. Only if you trust its authors: pass trust_remote_code=True to hsd.load_pair / "
            "hsd.load_model, or --trust-remote-code on the command line.")
    if what == "tokenizer":
        return TokenizerMissingError(
            f"No tokenizer could be loaded from {name!r} ({text.splitlines()[0][:200]}). hsd needs the "
            "model's tokenizer files (tokenizer.json or tokenizer.model) in the same directory or repository.")
    if _is_local(name):
        return ModelNotFoundError(f"{name!r} is a directory but not a loadable model: {text.splitlines()[0][:300]}")
    return ModelNotFoundError(f"{name!r} could not be loaded: {text.splitlines()[0][:300]}")


def load_model(name: str, *, device: str = "auto", dtype: str = "auto", device_map: str | None = None,
               trust_remote_code: bool = False, revision: str | None = None, token: str | None = None) -> Model:
    """Load (or reuse from the cache) a causal LM and its tokenizer from a Hub id or a directory.

    ``revision`` pins a Hub model to a branch, tag or commit (``Model.commit`` says which commit loaded).
    ``device_map="auto"`` spreads a model that does not fit one GPU over several (needs accelerate).
    """
    if _BAD_CACHE_SETTING is not None:
        raise _BAD_CACHE_SETTING
    if isinstance(name, str) and not name.strip() or name is None:
        raise ModelNotFoundError("No model given: pass a Hugging Face Hub id (owner/name) or a local directory.")
    key = cache_key(name, revision, device, dtype, device_map, trust_remote_code)
    with _LOCK:
        if key in _CACHE:
            _CACHE.move_to_end(key)
            return _CACHE[key]
        evicted = False
        while len(_CACHE) >= MAX_CACHED_MODELS:  # make room first: the new model never lives beside the cap
            _evict(next(iter(_CACHE)))
            evicted = True
        if evicted:
            _free_memory()
        loaded = _load(*key, token=token)
        _CACHE[key] = loaded
        return loaded


def _load(name, revision, device, dtype, device_map, trust_remote_code, token) -> Model:
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    dev, torch_dtype = torch.device(device), DTYPES[dtype.replace("torch.", "")]
    pinned = _resolve_commit(name, revision, token)
    common = dict(revision=pinned, trust_remote_code=trust_remote_code, token=token)
    try:
        config = AutoConfig.from_pretrained(name, **common)
    except Exception as exc:  # transformers raises OSError/ValueError/HF errors for every failure mode
        raise _load_error(name, exc, "model", revision) from exc
    if config.model_type not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES and not trust_remote_code:
        raise NotCausalLMError(
            f"{name!r} is a {config.model_type!r} model, not a causal language model: hsd needs a decoder-only "
            "text-generation model (AutoModelForCausalLM), for both the target and the drafter.")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **common)
    except Exception as exc:
        raise _load_error(name, exc, "tokenizer", revision) from exc
    try:
        model = AutoModelForCausalLM.from_pretrained(name, dtype=torch_dtype, device_map=device_map, **common)
    except ValueError as exc:
        if "Unrecognized configuration class" in str(exc):
            raise NotCausalLMError(f"{name!r} is not a causal language model: {exc}") from exc
        raise _load_error(name, exc, "model", revision) from exc
    except Exception as exc:
        raise _load_error(name, exc, "model", revision) from exc
    if device_map is None:
        model.to(dev)
    model.eval()
    if device_map is None:
        use_layout(model)  # hsd's own copy, before anyone sees it: the same values, faster kernels (hsd/layout.py)
    return Model.wrap(model, tokenizer, name, revision, getattr(pinned, "resolved", None))


#: the files transformers reads to load a causal LM and its tokenizer from safetensors
PREFETCH_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken", "tokenizer*"]


def prefetch(name: str, revision: str | None = None, token: str | None = None) -> bool:
    """Download a Hub model's files into the Hugging Face cache without taking any of hsd's locks, so that the
    load after it (which holds them) reads from disk, and one download never stalls another request's load;
    huggingface_hub reports its progress through tqdm. Returns whether it downloaded or checked anything: not for
    a local directory, offline, or a name the Hub refuses (the load then says why, as it always does)."""
    if _is_local(name) or offline():
        return False
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(name, revision=revision, token=token, allow_patterns=PREFETCH_PATTERNS)
    except Exception:  # noqa: BLE001 - the load's own error message is the one users see
        return False
    return True


def _resolve_commit(name: str, revision: str | None, token: str | None):
    """A Hub model's revision resolved to its commit once, so config, tokenizer and weights all come from that
    commit (huggingface_hub's ``ResolvedRevision``, a ``str``); offline, from the cache's refs. ``None`` for a
    local directory."""
    if _is_local(name):
        return None
    from huggingface_hub import HfApi

    try:
        return HfApi().resolve_revision(name, revision=revision, local_files_only=offline(), token=token)
    except Exception as exc:  # noqa: BLE001 - classified by type; anything else is reported as it is
        raise _load_error(name, exc, "model", revision) from exc


def load_pair(target: str | None = None, drafter: str | None = None, *, preset: str | None = None,
              device: str = "auto", dtype: str = "auto", device_map: str | None = None,
              trust_remote_code: bool | Collection[str] = False, token: str | None = None,
              target_revision: str | None = None, drafter_revision: str | None = None) -> Pair:
    """Load a target and a drafter. With no arguments: the embedded ``tiny-code`` pair in ``assets/``.

    ``drafter=None`` with a ``target`` gives a target-only pair, enough for ``algorithm="ar"``.
    ``target_revision`` / ``drafter_revision`` pin each Hub model to a branch, tag or commit hash.
    ``trust_remote_code``: ``True`` runs both models' repository code, a collection of names only those models'.
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
    if drafter_revision and not drafter:
        raise InvalidSettingError(f"drafter_revision={drafter_revision!r} was given but there is no drafter: pass "
                                  "drafter='<hub id>' too.")
    if isinstance(trust_remote_code, str):
        raise InvalidSettingError("trust_remote_code must be True, False, or a set of the model names to trust.")
    trust = ((lambda name: trust_remote_code) if isinstance(trust_remote_code, bool)
             else (lambda name: name in trust_remote_code))
    kw, tkw, dkw = dict(device=device, dtype=dtype), dict(trust_remote_code=trust(target)), dict(
        trust_remote_code=trust(drafter))
    keys = (cache_key(target, target_revision, device_map=device_map, what="target_revision", **kw, **tkw),
            cache_key(drafter, drafter_revision, what="drafter_revision", **kw, **dkw) if drafter else None)  # checked first
    with _LOCK:
        t = load_model(target, device_map=device_map, revision=target_revision, token=token, **kw, **tkw)
        d = load_model(drafter, revision=drafter_revision, token=token, **kw, **dkw) if drafter else None
        if keys in _PAIRS:  # the same loaded models give the same Pair, so its vocabulary maps are built once
            return _PAIRS[keys]
        pair = Pair(t, d)
        if all(k is None or k in _CACHE for k in keys):  # never keep a pair whose model the cache let go
            _PAIRS[keys] = pair
        return pair
