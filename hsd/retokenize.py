"""Text → tokens in context: the look-behind re-tokenization of spec §2, step 2.

Tokenizers are not injective and a string tokenized on its own starts differently from the same
string inside a text (SentencePiece's dummy prefix space, merges across the boundary). So new text
is tokenized together with a window of known context in front, and only what follows the context
is kept. The result is always *byte-exact*: the returned tokens spell exactly the new bytes
(minus an incomplete UTF-8 character at the end, which is held back as ``pending``). When the
tokenizer would alter the text (normalisation) or a token would straddle the boundary, the
affected part falls back to a longest-match encoding over the vocabulary's bytes, and the event
is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .vocab import Vocab

#: how many known tokens to tokenize in front of new text
LOOKBEHIND = 8
#: how much further back to look for a token that starts with a space (a clean word boundary)
MAX_EXTRA_LOOKBEHIND = 16


@dataclass
class Continuation:
    """``ids[:n_keep] + new_ids`` spells ``bytes(ids) + new[:len(new) - pending]``."""

    n_keep: int
    new_ids: list[int]
    pending: int
    events: list[str] = field(default_factory=list)


def incomplete_utf8_tail(data: bytes) -> int:
    """Number of bytes at the end of ``data`` that start a UTF-8 character without finishing it."""
    for back in range(1, min(4, len(data)) + 1):
        b = data[-back]
        if b & 0xC0 == 0x80:  # continuation byte: keep looking for the lead byte
            continue
        need = 2 if b & 0xE0 == 0xC0 else 3 if b & 0xF0 == 0xE0 else 4 if b & 0xF8 == 0xF0 else 1
        return back if need > back else 0
    return 0


#: strings on which the Rust tokenizer called directly must agree with ``tokenizer.encode`` before it is used:
#: leading and inner spaces, a tab and newlines, code, non-ASCII letters, an emoji, a special token's text
PROBES = ("", " ", "hello world", "  def f(x):\n\treturn x  # ok\n\n", "Ünïcödé, 日本語 😀",
          "a<|endoftext|>b</s><s>[INST]")


class Retokenizer:
    """Encodes text continuing a known token sequence, for one tokenizer."""

    def __init__(self, tokenizer, vocab: Vocab, lookbehind: int = LOOKBEHIND):
        self.tokenizer = tokenizer
        self.vocab = vocab
        self.lookbehind = lookbehind
        self._rust = _direct_backend(tokenizer)

    def encode(self, text: str) -> list[int]:
        """Plain encoding of text: no special tokens added, none parsed from the text.

        Where transformers' ``encode`` is only a wrapper around the Rust tokenizer (checked on :data:`PROBES`), the
        Rust tokenizer is called directly: a third of the time per call inside the decoding loop. It is asked for
        what ``encode(..., split_special_tokens=True)`` asks of it, and only while nobody has switched on
        truncation or padding on it; otherwise the call goes through transformers."""
        b = self._rust
        if b is not None and b.truncation is None and b.padding is None:
            b.encode_special_tokens = True  # as transformers' own encode sets it for split_special_tokens=True
            return b.encode(text, add_special_tokens=False).ids
        return self.tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)


    def _window_start(self, ids: list[int]) -> int:
        """Where the look-behind window starts: ``lookbehind`` tokens back, moved to a word start.

        Never crosses a special token (it has no text) and never starts inside a UTF-8 character.
        A window that begins with a space keeps SentencePiece-style tokenizers from inventing one.
        """
        toks = self.vocab.tokens
        limit = max(0, len(ids) - self.lookbehind - MAX_EXTRA_LOOKBEHIND)
        floor = len(ids)
        while floor > limit and toks[ids[floor - 1]] is not None:
            floor -= 1
        start = max(floor, len(ids) - self.lookbehind)
        for probe in range(min(start, len(ids) - 1), floor - 1, -1):
            if toks[ids[probe]].startswith(b" "):
                start = probe
                break
        while start > floor and start < len(ids) and toks[ids[start]][:1] and toks[ids[start]][0] & 0xC0 == 0x80:
            start -= 1
        return start

    def continue_ids(self, ids: list[int], new: bytes, *, rewrite: bool = False) -> Continuation:
        """Tokens that spell ``new`` after ``ids``, tokenized in context.

        With ``rewrite=False`` the known ``ids`` are fixed (emitted target tokens): only tokens after
        them are returned, and a merge across the boundary is an event. With ``rewrite=True`` (the
        drafter's own context) the window may be re-tokenized; ``n_keep`` says how many old ids stay.
        """
        if not new:
            return Continuation(len(ids), [], 0)
        start = self._window_start(ids)
        window = self.vocab.text_of(ids[start:])
        whole = window + new
        pending = incomplete_utf8_tail(whole)
        if pending >= len(new):
            return Continuation(len(ids), [], len(new))
        whole = whole[:len(whole) - pending]
        events: list[str] = []
        try:
            encoded = self.encode(whole.decode("utf-8"))
        except UnicodeDecodeError:
            encoded = None
            events.append("invalid-utf8")
        shift = self._prefix_shift(encoded, whole) if encoded is not None else None
        if shift is None:
            if encoded is not None:
                events.append("normalized")
            return self._fallback(ids, new[:len(new) - pending], pending, events)
        starts = self._starts(encoded)  # byte offset of each token in the encoding, and the end
        if rewrite and shift in starts:
            first = starts.index(shift)  # the invented leading space is a token of its own: skip it
            encoded, old, common = encoded[first:], ids[start:], 0
            while common < min(len(old), len(encoded)) and old[common] == encoded[common]:
                common += 1
            return Continuation(start + common, encoded[common:], pending, events)
        # Fixed context: keep the tokens after the window's end.
        boundary = shift + len(window)
        if boundary in starts:
            return Continuation(len(ids), encoded[starts.index(boundary):], pending, events)
        # A token straddles the boundary: spell its new part byte-exactly, keep what follows.
        events.append("boundary-merge")
        j = next(i for i, pos in enumerate(starts) if pos > boundary)
        head, n = self.vocab.greedy_encode(new[:starts[j] - boundary])
        if n < starts[j] - boundary:
            return Continuation(len(ids), head, len(new) - n, events + ["unrepresentable"])
        return Continuation(len(ids), head + encoded[j:], pending, events)

    def _starts(self, ids: list[int]) -> list[int]:
        toks, out, pos = self.vocab.tokens, [], 0
        for tid in ids:
            out.append(pos)
            pos += len(toks[tid])
        out.append(pos)
        return out

    def _prefix_shift(self, encoded: list[int], whole: bytes) -> int | None:
        """How many spaces the tokenizer invented in front of ``whole`` (SentencePiece's dummy prefix).

        ``None`` when the encoding does not spell ``whole`` after them (normalisation changed the text).
        """
        if any(self.vocab.tokens[i] is None for i in encoded):
            return None
        spelled = self.vocab.text_of(encoded)
        shift = len(spelled) - len(whole)
        if shift < 0 or spelled[shift:] != whole or spelled[:shift].strip(b" "):
            return None
        return shift

    def _fallback(self, ids, new: bytes, pending: int, events: list[str]) -> Continuation:
        out, n = self.vocab.greedy_encode(new)
        if n < len(new):
            events.append("unrepresentable")
        return Continuation(len(ids), out, pending + len(new) - n, events)


def _direct_backend(tokenizer):
    """The Rust tokenizer behind a fast tokenizer whose ``encode`` adds nothing to it, else ``None``.

    Both paths are run on :data:`PROBES` (they leave the backend with ``encode_special_tokens`` on, as hsd's
    encodings always have); one disagreement and every call keeps going through transformers."""
    try:
        from transformers.tokenization_utils_base import PreTrainedTokenizerBase
        from transformers.tokenization_utils_tokenizers import TokenizersBackend
    except ImportError:  # another transformers layout: the plain path
        return None
    cls = type(tokenizer)
    if not (isinstance(tokenizer, TokenizersBackend) and cls._encode_plus is TokenizersBackend._encode_plus
            and cls.encode is PreTrainedTokenizerBase.encode):
        return None
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or backend.truncation is not None or backend.padding is not None:
        return None
    try:
        for text in PROBES:
            plain = tokenizer.encode(text, add_special_tokens=False, split_special_tokens=True)
            backend.encode_special_tokens = True
            if backend.encode(text, add_special_tokens=False).ids != list(plain):
                return None
    except Exception:  # noqa: BLE001 - any failure of the shortcut leaves the plain path, which works
        return None
    return backend
