"""State shared by every algorithm during one generation: contexts, KV caches, clocks, stopping.

The target's context ``ids`` (prompt + emitted) is the only source of truth. Invariant between
rounds: the target cache holds ``ids[:-1]``, so a round feeds ``[ids[-1]] + proposals`` and gets
``p_1 .. p_{m+1}`` from one forward. The drafter's context is a deterministic function of the
emitted text, kept up to date incrementally (:class:`DrafterContext`).
"""

from __future__ import annotations

import time

import torch

from .lean import drafter_runner
from .loading import Model, Pair
from .retokenize import Retokenizer
from .runner import Runner
from .sampling import OneHot, Rng, Rows, Sampling, argmax_id, pick_at
from .settings import Settings
from .trace import Emitted, Round
from .vocab import IntersectionMaps
from .verify import Recorder


class Clock:
    """Accumulates wall time into named buckets of the current round; syncs CUDA at each split."""

    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self.start = time.perf_counter()
        self.mark = self.start

    def split(self) -> float:
        if self.cuda:
            torch.cuda.synchronize()
        now = time.perf_counter()
        elapsed, self.mark = now - self.mark, now
        return elapsed

    def exclude(self, seconds: float) -> None:
        """Leave time spent outside the generation (a consumer between rounds) out of every bucket."""
        self.start += seconds
        self.mark += seconds

    def since_start(self) -> float:
        return self.mark - self.start


class DrafterContext:
    """The drafter's token sequence for the emitted text, with its KV cache (spec §2, last paragraph).

    ``ids`` = drafter prompt ids + drafter tokens spelling the first ``synced`` bytes of the generated
    text. After each round :meth:`sync` keeps the drafter tokens whose bytes lie inside the emitted
    text, re-encodes only the tail with a look-behind window, and crops the cache to what is unchanged.
    """

    def __init__(self, model: Model, prompt_ids: list[int]):
        self.model = model
        self.runner = drafter_runner(model)  # lean on a CPU where it computes the model exactly (hsd/lean.py)
        self.retok = Retokenizer(model.tokenizer, model.vocab)
        self.ids = list(prompt_ids)
        self.gen_start = len(self.ids)
        self.synced = 0  # bytes of the generated text that ids[gen_start:] spell
        self.spelled = b""  # those bytes

    def prefill(self) -> None:
        if len(self.ids) > 1 and not self.full():  # a prompt that fills the context: target-only rounds
            self.runner.forward(self.ids[:-1], keep=1)

    def next_logits(self) -> torch.Tensor:
        """Logits after ``ids``: feeds whatever the cache does not hold yet (at least one token)."""
        self.runner.sync_to(self.ids)
        if len(self.runner) == len(self.ids):
            self.runner.crop(len(self.ids) - 1)
        return self.runner.forward(self.ids[len(self.runner):], keep=1)[-1]

    def draft(self, k: int, sampling: Sampling, rng: Rng, restrict: IntersectionMaps | None = None,
              threshold: float = 0.0, empties: int = 0):
        """Sample up to ``k`` drafter tokens after ``ids`` (spec §1 step 1, §2 step 1, §3 step 2).

        ``restrict`` (TLI's tables) limits the distribution to the ids it allows, renormalised: TLI's ``q'``.
        Drafting stops early after a special token (EOS), when the drafter's context is full, or after a token whose
        probability under the drafter (at temperature 1, among the allowed tokens) is below ``threshold``: a guess
        the drafter itself doubts is likely rejected, and every token drafted after it would be wasted (a dynamic
        lookahead; the decision uses only the drafter's own state, so the algorithms stay lossless). Returns the
        tokens and the ``[n, V_drafter]`` distributions they were sampled from (a :class:`~hsd.sampling.OneHot` of the
        tokens when the drafter is greedy; on a CPU :class:`~hsd.sampling.Rows` of the rows as drawn from). When
        ``rng`` shares noise (SLEM), a token is drawn from the field at the byte offset where it starts (``synced``
        plus the bytes drafted before it) and ``empties``, the target's count of emitted tokens without bytes
        (:mod:`hsd.noise`).
        """
        tokens: list[int] = []
        rows: list[torch.Tensor | OneHot] = []
        vocab = self.model.vocab
        specials = vocab.special_ids
        offset = self.synced
        for i in range(k):
            if self.full():
                break
            logits = self.next_logits() if i == 0 else self.runner.forward([tokens[-1]], keep=1)[-1]
            if sampling.greedy:  # q is one-hot on the argmax: the token is all there is to keep
                token, logits = (argmax_id(logits.float()), logits) if restrict is None else restrict.best(logits)
            else:
                if restrict is not None:
                    logits = restrict.fill(logits)
                q = sampling.probs(logits.unsqueeze(0))[0]
                token = pick_at(q, sampling, rng, vocab, offset, empties)
                rows.append(q)
            offset += len(vocab.tokens[token] or b"")
            tokens.append(token)
            if token in specials:
                break
            if threshold and i + 1 < k and self._confidence(logits, token, sampling, rows) < threshold:
                break
        if sampling.greedy:  # each q is one-hot on its token
            return tokens, OneHot(tuple(tokens), self.model.n_logits, self.runner.device)
        if not rows:
            return tokens, torch.empty(0, self.model.n_logits, device=self.runner.device)
        return tokens, Rows.built(rows, sampling) if rows[0].is_cpu else torch.stack(rows)

    @staticmethod
    def _confidence(logits: torch.Tensor, token: int, sampling: Sampling, rows: list) -> float:
        """The drafter's probability of ``token`` at temperature 1 among the allowed tokens (``logits`` filled):
        the row just drawn from when the sampling warps nothing."""
        if not sampling.greedy and not sampling.warpers():
            return float(rows[-1][token])
        return float(torch.softmax(logits.float(), -1)[token])

    def rewind(self) -> None:
        """Back to the prompt, as right after :meth:`prefill` (the cache is cropped, never refilled)."""
        del self.ids[self.gen_start:]
        self.synced, self.spelled = 0, b""
        self.runner.crop(max(len(self.ids) - 1, 0))

    def full(self) -> bool:
        limit = self.model.context_length
        return limit is not None and max(len(self.ids), len(self.runner)) + 1 >= limit

    def sync(self, generated: bytes, drafted: list[int], *, fixed: bool = False, target_ids: list[int] | None = None,
             target_start: int = 0) -> tuple[list[str], int]:
        """Bring ``ids`` up to the generated text; return (re-tokenization events, drafter tokens dropped).

        The drafted tokens whose bytes were emitted stay as drafted. ``target_ids`` (a shared vocabulary only:
        the target's emitted ids of the round, whose text starts at byte ``target_start`` of ``generated``)
        continue the context after them as the target's own ids. What is left is re-encoded in context: with
        ``fixed`` the ids kept so far are never rewritten (a merge across the boundary is spelled
        byte-exactly), otherwise the look-behind window may re-tokenize them (the canonical tokenization).
        Either way ``ids`` depends only on what happened before the next draft (docs/design.md, Drafter
        context).
        """
        toks = self.model.vocab.tokens
        if generated[:self.synced] == self.spelled:  # the usual case: the text only grew; O(drafted)
            candidates, keep, pos = drafted, 0, self.synced
            base = self.ids
        else:  # the context spelled a text that was not emitted (SLRS looks ahead): walk it again
            candidates, keep, pos = self.ids[self.gen_start:] + drafted, 0, 0
            base = self.ids[:self.gen_start]
        for tid in candidates:
            b = toks[tid]
            if not b or generated[pos:pos + len(b)] != b:
                break
            pos += len(b)
            keep += 1
        base = base + candidates[:keep]
        offset = target_start
        for tid in target_ids or ():  # the target's ids where the vocabulary is the same
            b = toks[tid] if 0 <= tid < len(toks) else None
            if offset < pos:
                offset += len(b or b"")
                continue
            if offset > pos or not b or generated[pos:pos + len(b)] != b:
                break
            base.append(tid)
            pos += len(b)
            offset += len(b)
        cont = self.retok.continue_ids(base, generated[pos:], rewrite=not fixed)
        self.ids = base[:cont.n_keep] + cont.new_ids
        self.synced = len(generated) - cont.pending
        self.spelled = generated[:self.synced]
        before = len(self.runner)
        self.runner.sync_to(self.ids)
        dropped = before - len(self.runner)
        return [f"drafter:{e}" for e in cont.events], dropped


class Session:
    """One call of :func:`hsd.generate`: the pair, the settings, the contexts and the trace so far."""

    def __init__(self, pair: Pair, settings: Settings, prompt_ids: list[int], drafter_prompt_ids, rng: Rng):
        self.pair = pair
        self.settings = settings
        self.rng = rng
        self.target = Runner(pair.target)
        self.vocab = pair.target.vocab
        self.retok = Retokenizer(pair.target.tokenizer, pair.target.vocab)
        self.prompt_len = len(prompt_ids)
        self.ids = list(prompt_ids)
        self.generated = bytearray()
        self.empties = 0  # emitted tokens without bytes: with the byte offset, where the next token starts
        self.eos = set(pair.target.vocab.eos_ids)
        self.stop_reason: str | None = None
        self.drafter = DrafterContext(pair.drafter, drafter_prompt_ids) if drafter_prompt_ids is not None else None
        self.clock = Clock(pair.target.device)
        self.rounds: list[Round] = []
        self.prefill_seconds = 0.0
        self.recorder: Recorder | None = None  # set when a run records the rejection-sampling picture

    @property
    def n_generated(self) -> int:
        return len(self.ids) - self.prompt_len

    @property
    def done(self) -> bool:
        return self.stop_reason is not None

    def prefill(self) -> None:
        if len(self.ids) > 1:
            self.target.forward(self.ids[:-1], keep=1)
        if self.drafter is not None:
            self.drafter.prefill()
        self.prefill_seconds = self.clock.split()

    def rewind(self, rng: Rng) -> None:
        """Back to the state right after :meth:`prefill`, drawing from ``rng``: nothing generated, no rounds, the
        caches cropped to the prompt. A first round run again needs no new prefill (:mod:`hsd.lossless` draws
        the next token many times so)."""
        del self.ids[self.prompt_len:]
        self.generated = bytearray()
        self.empties = 0
        self.stop_reason = None
        self.rounds = []
        self.rng = rng
        self.target.crop(max(self.prompt_len - 1, 0))
        if self.drafter is not None:
            self.drafter.rewind()

    def target_probs(self, proposal: list[int]) -> torch.Tensor:
        """One target forward over ``[ids[-1]] + proposal``: ``p_1 .. p_{m+1}``, ``[m+1, V]``."""
        logits = self.target.forward([self.ids[-1]] + proposal, keep=len(proposal) + 1)
        return self.settings.sampling.probs(logits)

    def target_rows(self, proposal: list[int]) -> torch.Tensor | OneHot:
        """:meth:`target_probs` as the verification rules read it: at temperature 0 a
        :class:`~hsd.sampling.OneHot` of the target's argmax at each position, nothing built over the vocabulary."""
        logits = self.target.forward([self.ids[-1]] + proposal, keep=len(proposal) + 1)
        return self.settings.sampling.rows(logits)

    def sample_at(self, p: torch.Tensor | OneHot, offset: int, empties: int) -> int:
        """The target's own token from the row ``p`` for a position starting at generated byte ``offset`` after
        ``empties`` byteless tokens: a draw of the shared noise field there, or an independent one."""
        return pick_at(p, self.settings.sampling, self.rng, self.vocab, offset, empties)

    def commit(self, rnd: Round, accepted: list[int], token: int, label: str) -> None:
        """Emit ``accepted`` proposals then ``token``, stopping at EOS or ``max_new_tokens``."""
        base = len(self.ids)
        for tid, lab in [(t, "accepted") for t in accepted] + [(token, label)]:
            if self.done:
                break
            b = self.vocab.tokens[tid] or b""
            self.ids.append(tid)
            self.generated += b
            self.empties += not b
            rnd.emitted.append(Emitted(tid, lab, b))
            if tid in self.eos:
                self.stop_reason = "eos"
            elif self.n_generated >= self.settings.max_new_tokens:
                self.stop_reason = "max_new_tokens"
        # The cache holds base - 1 + len(proposal) positions; keep exactly ids[:-1].
        self.target.crop(min(len(self.ids) - 1, base + len(accepted)))
