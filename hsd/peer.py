"""The peer: Transformers' own heterogeneous assisted generation, timed the way hsd is timed.

``target.generate(assistant_model=..., tokenizer=..., assistant_tokenizer=...)`` routes greedy decoding to
its SLEM ("Universal Assisted Generation") and sampling to its TLI ("Universal Speculative Decoding");
plain ``generate`` is its AR (``GenerationMixin._get_candidate_generator`` in ``transformers/generation/utils.py``;
docs/benchmarks.md, *What is measured*). Transformers reports no drafted or accepted counts, so TTFT and
per-round token counts come from a streamer and the drafted count per round from a wrapper around the candidate
generator's ``get_candidates``.

Transformers mutates the drafter it is handed (TLI prunes its LM head in place) and caches its
vocabulary translator on the tokenizer objects alone, so :class:`Peer` gives each of its algorithms a
deep copy of the drafter *and* of both tokenizers; hsd's own model objects are never passed to it. The
counting wrapper sits on a shallow copy of the target (same weights, its own attributes), so hsd's cached
target model is never patched either.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field

import torch

from .loading import Pair
from .metrics import Counts, Metrics, summarize


def runs_at(label: str, temperature: float) -> bool:
    """Whether Transformers runs the peer row ``label`` at ``temperature``: it routes greedy decoding to its SLEM
    and sampling to its TLI (``_get_candidate_generator``), and its AR runs at any. Which hsd algorithm a row
    stands for is that algorithm's :attr:`Algorithm.peer <hsd.algorithms.contract.Algorithm>`."""
    return {"hf-slem": temperature == 0, "hf-tli": temperature > 0}.get(label, True)


#: peer rows a Transformers release is known to crash on, with what runs them instead (checked on the embedded pair)
KNOWN_FAILURES = {
    ("5.25.0", "hf-slem"): "a bug of transformers 5.25.0's universal assisted generation (greedy, different "
                           "tokenizers), in the assistant's attention; 5.24.0 runs this row: pip install "
                           "transformers==5.24.0 to compare with it",
}


def version() -> str:
    """The Transformers version the peer runs."""
    import transformers

    return transformers.__version__


def failure_note(label: str, exc: BaseException) -> str:
    """A peer row's note when Transformers raised: its version, the error, and what is known about it."""
    text = str(exc).splitlines()[0][:200] if str(exc) else ""
    known = KNOWN_FAILURES.get((version(), label))
    return f"Transformers {version()} raised {type(exc).__name__}: {text}" + (f" ({known})" if known else "")


class PeerUnavailable(Exception):
    """Transformers refused this configuration; the message says why (it becomes the row's note)."""


class _Streamer:
    """Records when each chunk of tokens arrives: ``_assisted_decoding`` puts one chunk per round (the accepted
    drafts and one target token); the first ``put`` is the prompt."""

    def __init__(self):
        self.start = time.perf_counter()
        self.times: list[float] = []
        self.sizes: list[int] = []
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.times.append(time.perf_counter() - self.start)
        self.sizes.append(int(value.numel()))

    def end(self) -> None:
        pass


@dataclass
class PeerResult:
    """What one peer ``generate`` call did, in the shape :mod:`hsd.bench` aggregates."""

    token_ids: list[int]
    metrics: Metrics
    rounds: list[Counts] = field(default_factory=list)


class Peer:
    """Transformers' generate on copies of a pair's models, with the same prompts, lookahead and seeds."""

    def __init__(self, pair: Pair, lookahead: int):
        self.pair = pair
        self.lookahead = lookahead
        self._drafters: dict[str, tuple] = {}
        self._drafted: list[int] = []  # candidates per round of the current call, appended by the wrapper
        # A shallow copy shares the weights but not the attributes: the counting wrapper goes on it.
        self._target = copy.copy(pair.target.model)
        self._target._get_candidate_generator = _counting(self._target._get_candidate_generator, self._drafted)

    def check(self, algorithm: str) -> None:
        """Raise :class:`PeerUnavailable` if Transformers will refuse ``algorithm`` on this pair (it raises
        ``ValueError`` for an ``assistant_tokenizer`` when both configs have the same ``vocab_size``)."""
        if algorithm == "hf-ar":
            return
        if self.pair.drafter is None:
            raise PeerUnavailable("no drafter")
        vt = self.pair.target.model.config.get_text_config().vocab_size
        vd = self.pair.drafter.model.config.get_text_config().vocab_size
        if vt == vd:
            raise PeerUnavailable(
                f"Transformers refuses assistant_tokenizer when both configs have vocab_size {vt} "
                "(it treats equal sizes as one vocabulary)")

    def _drafter(self, algorithm: str):
        if algorithm not in self._drafters:
            d = self.pair.drafter
            model = copy.deepcopy(d.model)
            gc = model.generation_config
            gc.num_assistant_tokens = self.lookahead
            gc.num_assistant_tokens_schedule = "constant"
            gc.assistant_confidence_threshold = 0.0
            self._drafters[algorithm] = (model, copy.deepcopy(self.pair.target.tokenizer), copy.deepcopy(d.tokenizer))
        return self._drafters[algorithm]

    def generate(self, algorithm: str, prompt_ids: list[int], *, max_new_tokens: int, temperature: float,
                 seed: int) -> PeerResult:
        self.check(algorithm)
        if algorithm != "hf-ar":
            self._drafter(algorithm)  # its deep copy is made outside inference mode: plain tensors, as loaded
        return self._generate(algorithm, prompt_ids, max_new_tokens=max_new_tokens, temperature=temperature,
                              seed=seed)

    @torch.inference_mode()
    def _generate(self, algorithm: str, prompt_ids: list[int], *, max_new_tokens: int, temperature: float,
                  seed: int) -> PeerResult:
        device = self.pair.target.device
        inputs = torch.tensor([prompt_ids], device=device)
        kwargs = dict(input_ids=inputs, attention_mask=torch.ones_like(inputs), max_new_tokens=max_new_tokens,
                      pad_token_id=self.pair.target.tokenizer.pad_token_id or self.pair.target.vocab.eos_ids[0])
        if temperature > 0:
            kwargs.update(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_k=None, top_p=None)
        if algorithm != "hf-ar":
            model, tok_t, tok_d = self._drafter(algorithm)
            kwargs.update(assistant_model=model, tokenizer=tok_t, assistant_tokenizer=tok_d)
        torch.manual_seed(seed)
        streamer = _Streamer()
        self._drafted.clear()
        try:
            out = self._target.generate(**kwargs, streamer=streamer)
        except ValueError as exc:
            if "assistant_tokenizer" in str(exc):
                raise PeerUnavailable(str(exc).splitlines()[0]) from exc
            raise
        if device.type == "cuda":
            torch.cuda.synchronize()
        total = time.perf_counter() - streamer.start
        tokens = out[0, len(prompt_ids):].tolist()
        drafted = list(self._drafted) if algorithm != "hf-ar" else []
        rounds = _rounds(streamer, drafted, self.lookahead if algorithm == "hf-slem" else None)
        # its drafter runs up to num_assistant_tokens steps per round inside assistant_model.generate()
        metrics = summarize(rounds, total_s=total, target_forwards=len(rounds) + 1, drafter_forwards=None)
        return PeerResult(tokens, metrics, rounds)


def _counting(original, drafted: list[int]):
    """Wrap ``_get_candidate_generator`` so each ``get_candidates`` call records its candidate count."""

    def wrapper(*args, **kwargs):
        generator = original(*args, **kwargs)
        inner = generator.get_candidates

        def get_candidates(input_ids, *a, **kw):
            out = inner(input_ids, *a, **kw)
            drafted.append(int(out[0].shape[1] - input_ids.shape[1]))
            return out

        generator.get_candidates = get_candidates
        return generator

    return wrapper


def _rounds(streamer: _Streamer, drafted: list[int], drafter_steps: int | None) -> list[Counts]:
    """The counts of each round. TLI drafts one drafter token per target candidate; SLEM runs
    ``num_assistant_tokens`` drafter steps, whatever number of target candidates they spell. Transformers
    reports no acceptance: a round that emitted ``e`` tokens accepted ``min(e - 1, proposed)``."""
    if not drafted:  # AR: one token per target forward
        return [Counts(0, 0, 0, s, t) for s, t in zip(streamer.sizes, streamer.times)]
    return [Counts((drafter_steps if d else 0) if drafter_steps else d, d, min(s - 1, d), s, t)
            for d, s, t in zip(drafted, streamer.sizes, streamer.times)]
