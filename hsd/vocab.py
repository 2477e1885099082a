"""Vocabulary layer: the byte string of every token, special roles, and how two vocabularies relate.

Spec §0: text is compared as bytes, never as per-token ``decode()`` output. Each tokenizer family
writes bytes differently in its token strings:

* byte-level BPE (GPT-2, Llama-3, Qwen2, StarCoder...): every byte is one printable character of
  GPT-2's ``bytes_to_unicode`` alphabet (``Ġ`` = space, ``Ċ`` = newline);
* SentencePiece (Llama-1/2, Mistral, Gemma...): ``▁`` marks a space, ``<0xNN>`` is the raw byte NN
  (byte fallback), everything else is UTF-8;
* WordPiece (BERT-style): ``##x`` continues a word, other tokens start a new word (a space before).

A :class:`Vocab` is computed once per loaded tokenizer; a :class:`PairVocab` once per pair (§3).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import cached_property

import torch

from .sampling import argmax_id

_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable character table."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(printable, chars)}


BYTE_DECODER = {c: b for b, c in _bytes_to_unicode().items()}
# Fast path for byte-level tokens: translate each alphabet character to the Latin-1 character of its
# byte, then encode as Latin-1; a token with a character outside the alphabet has no bytes.
_BYTELEVEL_TRANSLATE = {ord(c): b for c, b in BYTE_DECODER.items()}
_BYTELEVEL_TOKEN = re.compile("[" + re.escape("".join(BYTE_DECODER)) + "]+")


def _component_types(node) -> set[str]:
    """All ``type`` names in a tokenizers JSON component (decoders can be nested Sequences)."""
    if node is None:
        return set()
    if isinstance(node, list):
        return set().union(*(_component_types(n) for n in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node.get("type", "")}
    for key in ("decoders", "pretokenizers", "normalizers", "decoder", "pre_tokenizer"):
        found |= _component_types(node.get(key))
    return found


def _component_spec(component) -> dict | None:
    """The JSON description of one tokenizers component (decoder, pre-tokenizer, normalizer, model).

    Serializes only that component: ``backend.to_str()`` would serialize the whole vocabulary and
    merges too, seconds for a 150k vocabulary.
    """
    if component is None:
        return None
    try:
        return json.loads(component.__getstate__())
    except Exception:  # noqa: BLE001 - an exotic component without JSON state
        return {"type": type(component).__name__}


def detect_scheme(tokenizer) -> tuple[str, str]:
    """Return ``(scheme, space_marker)``, scheme in ``bytelevel``, ``sentencepiece``, ``wordpiece``, ``plain``."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        vocab = tokenizer.get_vocab()
        return ("sentencepiece", "▁") if any("▁" in t for t in list(vocab)[:2000]) else ("plain", "")
    decoder_types = _component_types(_component_spec(backend.decoder))
    pre_types = _component_types(_component_spec(backend.pre_tokenizer))
    model_type = type(backend.model).__name__
    if "ByteLevel" in decoder_types or ("ByteLevel" in pre_types and "Metaspace" not in decoder_types):
        return "bytelevel", "Ġ"
    if model_type == "WordPiece" or "WordPiece" in decoder_types:
        return "wordpiece", ""
    if decoder_types & {"Metaspace", "ByteFallback", "Replace"} or "Metaspace" in pre_types:
        return "sentencepiece", "▁"
    return "plain", ""


def _token_to_bytes(token: str, scheme: str, marker: str) -> bytes | None:
    if scheme == "bytelevel":
        if not _BYTELEVEL_TOKEN.fullmatch(token):
            return b"" if token == "" else None
        return token.translate(_BYTELEVEL_TRANSLATE).encode("latin-1")
    if scheme == "sentencepiece":
        m = _BYTE_FALLBACK.match(token)
        if m:
            return bytes([int(m.group(1), 16)])
        return token.replace(marker, " ").encode("utf-8")
    if scheme == "wordpiece":
        return token[2:].encode("utf-8") if token.startswith("##") else (" " + token).encode("utf-8")
    return token.encode("utf-8")


def _bytelevel_bulk(strings: list[str | None], skip) -> list[bytes | None] | None:
    """Byte-level bytes of every string at once (``_token_to_bytes`` per token costs ~1 s for 150k).

    One alphabet character is one byte, so the translated concatenation is cut at the cumulative
    character lengths. Returns ``None`` when some string is not in the alphabet (then convert one
    by one, which marks exactly those tokens undetermined).
    """
    present = ["" if s is None or i in skip else s for i, s in enumerate(strings)]
    joined = "".join(present)
    if joined and not _BYTELEVEL_TOKEN.fullmatch(joined):
        return None
    data = joined.translate(_BYTELEVEL_TRANSLATE).encode("latin-1")
    out: list[bytes | None] = []
    pos = 0
    for s, text in zip(strings, present):
        end = pos + len(text)
        out.append(None if s is None else data[pos:end])
        pos = end
    return out


def _token_strings(tokenizer, n: int) -> list[str | None]:
    """The token string of every id below ``n`` (``None`` for a gap), like ``convert_ids_to_tokens``.

    For a fast tokenizer, two bulk calls into the Rust backend instead of one call per id (which
    costs about a second for a 150k vocabulary). Added tokens override the model's entry for their
    id, as ``id_to_token`` does.
    """
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return tokenizer.convert_ids_to_tokens(list(range(n)))
    strings: list[str | None] = [None] * n
    for token, i in backend.get_vocab(with_added_tokens=False).items():
        if 0 <= i < n:
            strings[i] = token
    for i, added in backend.get_added_tokens_decoder().items():
        if 0 <= i < n:
            strings[i] = added.content
    return strings


@dataclass
class Vocab:
    """Byte strings and special roles of one tokenizer, indexed by token id.

    ``tokens[i]`` is ``None`` for special tokens (they have no text) and for the rare token whose bytes
    cannot be determined; ``coverage`` counts the latter.
    """

    tokens: list[bytes | None]
    special_ids: frozenset[int]
    eos_ids: tuple[int, ...]
    bos_id: int | None
    pad_id: int | None
    scheme: str
    undetermined: int = 0
    special_text: dict[int, str] = field(default_factory=dict)

    @classmethod
    def from_tokenizer(cls, tokenizer, eos_ids=None) -> "Vocab":
        scheme, marker = detect_scheme(tokenizer)
        n = len(tokenizer)
        strings = _token_strings(tokenizer, n)
        added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
        special = set(int(i) for i in tokenizer.all_special_ids if i is not None and 0 <= i < n)
        special |= {int(i) for i, tok in added.items() if getattr(tok, "special", False) and i < n}
        tokens: list[bytes | None] = []
        undetermined = 0
        converted = _bytelevel_bulk(strings, special | set(added)) if scheme == "bytelevel" else None
        for i, s in enumerate(strings):
            if i in special:
                tokens.append(None)
            elif i in added:
                tokens.append(added[i].content.encode("utf-8"))
            elif s is None:
                tokens.append(None)
                undetermined += 1
            else:
                b = converted[i] if converted is not None else _token_to_bytes(s, scheme, marker)
                undetermined += b is None
                tokens.append(b)
        if eos_ids is None:
            eos_ids = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []
        eos = tuple(dict.fromkeys(int(e) for e in eos_ids if e is not None and 0 <= e < n))
        special |= set(eos)
        for e in eos:
            tokens[e] = None
        special_text = {i: strings[i] for i in special if strings[i] is not None}
        return cls(tokens, frozenset(special), eos, tokenizer.bos_token_id, tokenizer.pad_token_id, scheme,
                   undetermined, special_text)

    def __len__(self) -> int:
        return len(self.tokens)

    @cached_property
    def bytes_to_id(self) -> dict[bytes, int]:
        """Canonical id of each byte string: the lowest id that spells it (spec §3, step 1)."""
        table: dict[bytes, int] = {}
        for i, b in enumerate(self.tokens):
            if b and b not in table:
                table[b] = i
        return table

    @cached_property
    def max_token_bytes(self) -> int:
        return max((len(b) for b in self.tokens if b), default=1)

    def text_of(self, ids) -> bytes:
        """Concatenated bytes of ``ids`` (special tokens contribute nothing)."""
        toks = self.tokens
        return b"".join(toks[i] or b"" for i in ids)

    def greedy_encode(self, data: bytes) -> tuple[list[int], int]:
        """Longest-match encoding of raw bytes; returns ``(ids, n_bytes_encoded)``.

        A byte-exact fallback for text the tokenizer itself would alter (normalisation) or cannot
        take (a cut inside a UTF-8 character). Stops at the first byte no token spells.
        """
        table, longest = self.bytes_to_id, self.max_token_bytes
        ids, pos = [], 0
        while pos < len(data):
            for length in range(min(longest, len(data) - pos), 0, -1):
                tid = table.get(data[pos:pos + length])
                if tid is not None:
                    ids.append(tid)
                    pos += length
                    break
            else:
                break
        return ids, pos


@dataclass(frozen=True)
class IntersectionMaps:
    """Which drafter ids TLI may draft (``allowed``, the intersection plus the mapped EOS), and the scatter
    of the drafter's ``q'`` into target ids: drafter ids ``src`` add into target ids ``dst``."""

    allowed: torch.Tensor  # (n_drafter,) bool
    blocked: torch.Tensor  # the drafter ids that are not allowed
    penalty: torch.Tensor  # (n_drafter,) float32: 0 where allowed, -inf where blocked
    src: torch.Tensor  # drafter ids in the intersection
    dst: torch.Tensor  # their target ids
    drafter_to_target: list[int]  # every drafter id's target id, -1 where blocked
    target_to_drafter: dict[int, tuple[int, ...]]  # every target id in ``dst``: the ids of ``src`` it gets, in order

    def fill(self, logits: torch.Tensor) -> torch.Tensor:
        """``logits`` (one drafter row) with every blocked id at -inf: ``q'`` before it is renormalised."""
        return logits.index_fill(0, self.blocked, float("-inf"))

    def best(self, logits: torch.Tensor) -> tuple[int, torch.Tensor]:
        """The greedy drafter's token under ``q'`` and the row it was read from (:meth:`fill`'s values wherever a
        logit is finite). Adding :attr:`penalty` is one pass over the row whatever the number of blocked ids, where
        an ``index_fill`` of 10k-100k ids costs several times more per drafted token. The sum differs from the fill
        only where a blocked id's logit is +inf or NaN: it is NaN there, the argmax (NaN counts as the maximum)
        finds it, and the fill decides instead."""
        row = logits.float() + self.penalty
        token = argmax_id(row)
        if self.drafter_to_target[token] < 0:
            row = self.fill(logits).float()
            token = argmax_id(row)
        return token, row


@dataclass
class PairVocab:
    """How a drafter vocabulary relates to a target vocabulary (spec §1 'shared', §3 intersection)."""

    shared: bool
    drafter_to_target: torch.Tensor  # (len(drafter),) long, -1 outside the intersection
    intersection_size: int
    target_size: int
    drafter_size: int
    special_map: dict[str, tuple[int | None, int | None]]  # role -> (target id, drafter id)

    _maps: dict = field(default_factory=dict, repr=False, compare=False)

    def intersection_maps(self, n_drafter: int, n_target: int, drafter_device, target_device) -> "IntersectionMaps":
        """TLI's tables (spec §3) for drafter and target logits cut to ``n_drafter`` / ``n_target``, on the
        models' devices; built once per pair and devices."""
        key = (n_drafter, n_target, str(drafter_device), str(target_device))
        if key not in self._maps:
            d2t = self.drafter_to_target[:n_drafter]
            allowed = (d2t >= 0) & (d2t < n_target)
            src = allowed.nonzero().squeeze(-1)
            groups: dict[int, tuple[int, ...]] = {}
            for d, t in zip(src.tolist(), d2t[src].tolist()):
                groups[t] = groups.get(t, ()) + (d,)
            penalty = torch.zeros(len(allowed)).masked_fill_(~allowed, float("-inf"))
            self._maps[key] = IntersectionMaps(allowed.to(drafter_device),
                                               (~allowed).nonzero().squeeze(-1).to(drafter_device),
                                               penalty.to(drafter_device), src.to(drafter_device),
                                               d2t[src].to(target_device), torch.where(allowed, d2t, -1).tolist(), groups)
        return self._maps[key]

    @classmethod
    def build(cls, target: Vocab, drafter: Vocab) -> "PairVocab":
        shared = (target.tokens == drafter.tokens and target.special_text == drafter.special_text
                  and target.eos_ids == drafter.eos_ids)
        d2t = torch.full((len(drafter),), -1, dtype=torch.long)
        t_ids = target.bytes_to_id
        for d, b in enumerate(drafter.tokens):
            if b:
                t = t_ids.get(b)
                if t is not None:
                    d2t[d] = t
        intersection = int((d2t >= 0).sum())
        t_eos = target.eos_ids[0] if target.eos_ids else None
        d_eos = drafter.eos_ids[0] if drafter.eos_ids else None
        if t_eos is not None:
            for e in drafter.eos_ids:  # every drafter EOS ends the draft as the target's EOS would
                d2t[e] = t_eos
        special_map = {
            "eos": (t_eos, d_eos),
            "bos": (target.bos_id, drafter.bos_id),
            "pad": (target.pad_id, drafter.pad_id),
        }
        return cls(shared, d2t, intersection, len(target), len(drafter), special_map)
