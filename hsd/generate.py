"""The public entry points: :func:`generate` and its streaming form :func:`stream`."""

from __future__ import annotations

import time
from collections.abc import Iterator

import torch

from . import layout, threads
from .algorithms import ALGORITHMS
from .errors import IncompatiblePairError, InvalidSettingError, PromptError
from .loading import Model, Pair
from .metrics import summarize_trace
from .sampling import Rng
from .session import Session
from .settings import MAX_LOOKAHEAD, MAX_NEW_TOKENS, Settings, check_draft_threshold, check_int, settings_of
from .trace import Result, Round
from .verify import Recorder

# the limits and checks live with the settings; these names stay importable from here
__all__ = ["MAX_LOOKAHEAD", "MAX_NEW_TOKENS", "check_draft_threshold", "generate", "open_session", "stream"]
_check_int = check_int


def check_algorithm(pair: Pair, algorithm: str) -> None:
    """Raise a specific error if ``algorithm`` cannot run on ``pair``."""
    if not isinstance(algorithm, str):
        raise InvalidSettingError(f"algorithm must be one name (a str), got {type(algorithm).__name__} {algorithm!r}: "
                                  f"choose one of {', '.join(ALGORITHMS)}.")
    if algorithm not in ALGORITHMS:
        raise InvalidSettingError(f"Unknown algorithm {algorithm!r}: choose one of {', '.join(ALGORITHMS)}.")
    why = ALGORITHMS[algorithm].applies(pair)
    if why is not None:
        raise IncompatiblePairError(why)


def check_shared_noise(noise: str, algorithm: str) -> None:
    """Refuse ``noise="shared"`` for an algorithm whose verification is rejection sampling."""
    if noise == "shared" and not ALGORITHMS[algorithm].shared_noise:
        shared = [name for name, a in ALGORITHMS.items() if a.shared_noise]
        raise InvalidSettingError(
            f"noise='shared' works with {' and '.join(shared)} only, not {algorithm!r}: their "
            "verification keeps the target's own sample whatever was proposed, so drafting from the same noise "
            "stays lossless. The others accept by rejection sampling, whose proof needs every draft drawn "
            "afresh. Use noise='independent' (the default) with them.")


def encode_prompt(model: Model, prompt: str | None, messages: list[dict] | None, fallback_text: str | None = None,
                  parse_special: bool = True):
    """Token ids of the prompt for one model: raw text, or chat ``messages`` through its own template.

    ``parse_special``: text in a raw prompt that spells a special token (``<|endoftext|>``, ``</s>``) becomes
    that token, as Transformers does by default; ``False`` encodes it as the plain text it is. A prompt longer than
    the model's context is encoded without Transformers' warning: the session checks the length itself (the target
    refuses it, a drafter whose context is full stops drafting)."""
    tok = model.tokenizer
    if messages is not None:
        if getattr(tok, "chat_template", None):
            from jinja2 import TemplateError

            try:
                text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            except TemplateError as exc:  # the template's own raise_exception(): a role or order it refuses
                raise PromptError(f"The chat template of {model.name!r} refused these messages: {exc}. Check the "
                                  "roles and their order (most templates take system?, then user/assistant "
                                  "turns).") from None
            return tok(text, add_special_tokens=False, verbose=False)["input_ids"], text
        if fallback_text is None:
            raise PromptError(f"{model.name!r} has no chat template: pass a raw prompt instead of messages, "
                              "or use an instruction-tuned target.")
        return tok(fallback_text, add_special_tokens=False, verbose=False)["input_ids"], fallback_text
    ids = tok(prompt, add_special_tokens=True, split_special_tokens=not parse_special, verbose=False)["input_ids"]
    return ids, prompt


def special_spans(model: Model, prompt: str) -> list[tuple[int, int, str]]:
    """The character spans of a raw ``prompt`` that the model's tokenizer reads as special tokens (with
    ``parse_special=True``, the default): ``(start, end, token)`` each, in order. A front end marks them, so a
    user sees that ``<|endoftext|>`` typed in a prompt became the real end-of-text token."""
    tok = model.tokenizer
    special = set(getattr(tok, "all_special_ids", ())) | {
        i for i, t in getattr(tok, "added_tokens_decoder", {}).items() if getattr(t, "special", False)}
    if getattr(tok, "is_fast", True):
        try:
            enc = tok(prompt, add_special_tokens=False, return_offsets_mapping=True)
            return [(s, e, prompt[s:e]) for i, (s, e) in zip(enc["input_ids"], enc["offset_mapping"])
                    if i in special and e > s]
        except (NotImplementedError, ValueError, TypeError):  # no offsets from this tokenizer: find the texts
            pass
    texts = sorted({tok.convert_ids_to_tokens(i) for i in special} - {None, ""}, key=len, reverse=True)
    spans, at = [], 0
    while at < len(prompt):
        hit = next((t for t in texts if prompt.startswith(t, at)), None)
        if hit:
            spans.append((at, at + len(hit), hit))
        at += len(hit) if hit else 1
    return spans


def _check_unicode(text: str, where: str) -> None:
    """Tokenizers take UTF-8: a lone surrogate (e.g. from a badly decoded file) has no encoding."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PromptError(f"The {where} is not valid Unicode text: character {exc.start} is "
                          f"{text[exc.start:exc.end]!r}, a lone surrogate. Fix the text (or decode its source "
                          "as UTF-8) and try again.") from None


def _check_prompt(prompt, messages) -> None:
    if (prompt is None) == (messages is None):
        raise PromptError("Give either a prompt (raw text) or messages (chat), not both and not neither.")
    if prompt is not None:
        if not isinstance(prompt, str):
            raise PromptError(f"prompt must be a str (got {type(prompt).__name__}); decode bytes first.")
        if not prompt:
            raise PromptError("The prompt is empty: type some text for the model to continue.")
        _check_unicode(prompt, "prompt")
    if messages is not None:
        ok = isinstance(messages, list) and messages and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages)
        if not ok:
            raise PromptError('messages must be a non-empty list of {"role": ..., "content": ...} dicts.')
        for i, m in enumerate(messages):
            _check_unicode(m["role"], f"role of message {i}")
            _check_unicode(m["content"], f"content of message {i}")


def open_session(pair: Pair, prompt: str | None = None, *, messages: list[dict] | None = None,
                 algorithm: str = "slem", settings: Settings | None = None, **changes) -> Session:
    """Check what depends on the pair (the algorithm, its options, the prompt's room) and build the
    :class:`Session` of :func:`stream`, not prefilled yet (:mod:`hsd.lossless` runs one session's first round many
    times). ``settings`` and ``changes`` as in :func:`stream`."""
    settings = settings_of(settings, **changes)
    check_algorithm(pair, algorithm)
    check_shared_noise(settings.noise, algorithm)
    _check_prompt(prompt, messages)
    if not settings.parse_special and messages is not None:
        raise InvalidSettingError("parse_special=False applies to a raw prompt: a chat template's output is made "
                                  "of special tokens. Pass the prompt as text, or leave parse_special on.")
    spec = ALGORITHMS[algorithm]
    for name in ("slrs_max_paths", "slrs_max_forwards"):
        if getattr(settings, name) is not None and name not in spec.options:
            owners = [a for a, other in ALGORITHMS.items() if name in other.options]
            raise InvalidSettingError(f"{name} applies only to algorithm={owners[0]!r}, not {algorithm!r}.")
    prompt_ids, target_text = encode_prompt(pair.target, prompt, messages, parse_special=settings.parse_special)
    if not prompt_ids:
        raise PromptError("The prompt encodes to no tokens and the target adds no BOS token: give some text.")
    limit, wanted = pair.target.context_length, settings.max_new_tokens
    if limit is not None and len(prompt_ids) + wanted > limit:
        raise PromptError(
            f"The prompt is {len(prompt_ids)} target tokens; with max_new_tokens={wanted} it needs "
            f"{len(prompt_ids) + wanted} positions, but the target's context is {limit}. Shorten the "
            "prompt or lower max_new_tokens.")
    drafter_ids = None
    if spec.needs_drafter:
        drafter_ids = spec.drafter_prompt(
            prompt_ids, lambda: encode_prompt(pair.drafter, prompt, messages, fallback_text=target_text,
                                              parse_special=settings.parse_special)[0])
        # A prompt longer than the drafter's context is not refused: the drafter is full from the start, and
        # every round is target-only, as when it fills up mid-run (DrafterContext.full); the output is the same.
    s = Session(pair, settings, prompt_ids, drafter_ids, Rng(settings.seed, settings.noise))
    if settings.record_distributions:
        vocab = pair.target.vocab
        s.recorder = Recorder(vocab.tokens, vocab.special_text, spec.proposal_symbol, settings.record_distributions)
    return s


def stream(pair: Pair, prompt: str | None = None, *, messages: list[dict] | None = None, algorithm: str = "slem",
           settings: Settings | None = None, **changes) -> Iterator[Round | Result]:
    """Run one generation, yielding each :class:`Round` as it completes, then the :class:`Result`.

    ``settings`` (an :class:`hsd.Settings`; default: its defaults) says how to decode; keyword arguments named
    after its fields change it for this call (``stream(pair, "def f(", temperature=0.7)``), checked the same
    way. ``algorithm`` is one of the registry's (``ar``, ``sd``, ``slem``, ``tli``, ``slrs``).

    ``parse_special=False`` reads special-token text in a raw prompt (``<|endoftext|>``) as plain text, for the
    target and the drafter alike; the default, ``True``, is Transformers' (see :func:`special_spans`).

    ``slrs_max_paths`` (drafter paths per ψ; a token needing more is proposed as ⊥) and ``slrs_max_forwards``
    (drafting forwards per round) bound SLRS's cost without ever stopping a run (see ``docs/slrs.md``).
    ``draft_threshold`` (0, off, by default) makes the lookahead dynamic for SD, SLEM and TLI: a round stops
    drafting after a token whose probability under the drafter (at temperature 1) is below it, so a large
    ``lookahead`` drafts far where the drafter is sure and little where it is not (SLRS, whose lookahead counts
    target positions, and AR ignore it). It changes the proposals, never the output's distribution.
    ``noise="shared"`` (AR and SLEM only) draws the target's and the drafter's tokens from one field of Gumbel
    noise keyed by where each token starts in the generated text (:mod:`hsd.noise`, ``docs/coupling.md``): SLEM
    then accepts far more when sampling, and its output is token for token the output of AR with
    ``noise="shared"`` and the same seed, an exact sample of the target either way. The default,
    ``"independent"``, draws every sample from the seeded generator.
    ``record_distributions`` (off by default) keeps, on every verified position, what the rejection-sampling
    picture needs (``Position.dist``, :mod:`hsd.picture`): ``True`` for the target's 20 most probable tokens,
    or a number of tokens. The output is the same either way; SLRS then also evaluates ψ on each verified
    position's whole support, which its ψ counters include.
    """
    n_threads = threads.for_pair(pair)
    threads.apply(n_threads)
    layout.prepare(pair.target.model, pair.drafter.model if pair.drafter else None)  # once a process, untimed
    called = time.perf_counter()  # TTFT counts from the call, as the paper's harness does
    s = open_session(pair, prompt, messages=messages, algorithm=algorithm, settings=settings, **changes)
    settings = s.settings
    spec = ALGORITHMS[algorithm]
    prompt_ids = s.ids[:s.prompt_len]
    s.clock.start = s.clock.mark = called  # prompt encoding counts as prefill
    with torch.inference_mode():
        s.prefill()
        prefill_forwards = {"target": s.target.forwards, "drafter": s.drafter.runner.forwards if s.drafter else 0}
        while not s.done:
            threads.apply(n_threads)  # a streaming consumer may resume this generator on another thread
            spent = _forward_seconds(s)
            rnd = spec.step(s)
            rnd.t_other += s.clock.split()
            rnd.t_end = s.clock.since_start()
            rnd.forward_seconds = _forward_seconds(s) - spent
            s.rounds.append(rnd)
            paused = time.perf_counter()
            yield rnd
            s.clock.exclude(time.perf_counter() - paused)  # a streaming consumer's time is not ours
    token_ids = s.ids[s.prompt_len:]
    metrics = summarize_trace(s.rounds, spec, s.prefill_seconds, prefill_forwards)
    yield Result(
        algorithm=algorithm, prompt_ids=list(prompt_ids), token_ids=token_ids,
        text=bytes(s.generated).decode("utf-8", errors="replace"), rounds=s.rounds, metrics=metrics,
        settings={**settings.to_dict(),
                  **pair.provenance(),  # names, revisions asked for, commits loaded
                  "device": str(pair.target.device), "dtype": str(pair.target.dtype).replace("torch.", "")},
        stop_reason=s.stop_reason, prefill={"seconds": s.prefill_seconds, **prefill_forwards})


def _forward_seconds(s: Session) -> float:
    return s.target.seconds + (s.drafter.runner.seconds if s.drafter else 0.0)


def generate(pair: Pair, prompt: str | None = None, **kwargs) -> Result:
    """Generate with ``algorithm`` in ``ar``, ``sd``, ``slem``, ``tli``, ``slrs`` and the given :class:`Settings`
    (``settings=``) and setting changes; see :func:`stream`."""
    result = None
    for item in stream(pair, prompt, **kwargs):
        result = item
    return result
