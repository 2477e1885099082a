"""Soft labels from the target for a drafter with another vocabulary (``train_pair.py resume --distill-logits``).

A drafter trained on text learns what the text does; a drafter is worth what it predicts of *its target*. On a
shared vocabulary, distillation trains the drafter on the target's whole next-token distribution. Across
vocabularies the two models cut the text differently, so the target's distribution is usable only where both
cut at the same byte (an *aligned* position: a drafter token and a target token end there), and it must be
carried into the drafter's vocabulary. Each target token is carried to the drafter token its text starts with
(the first piece of the drafter's encoding of that text; a token both vocabularies hold maps to itself):

    y(d) = sum of p_target(t) over the target tokens t whose text the drafter starts with d

``y`` is the target's distribution over the drafter's next token, up to the drafter tokens that would cross the
end of the target's next token (on the embedded pair's held-out text, the first piece of the target's actual next
token was the drafter's actual next token at 96% of the aligned positions). Its most probable token is what SLEM
needs of a drafter (the most probable next text); on the shared tokens it is close to what TLI's ``q'`` should be
(``p`` restricted to the intersection), save the mass of longer target tokens carried onto their shared first
piece. Training mixes it with the text's own next token: ``(1 - w) * CE(text) + w * CE(y)``.

With ``positions="all"`` the drafter positions that end *inside* a target token are labelled too (on the
embedded pair about 31% of the positions, which the aligned labels leave to the text's hard label). There the
target has already written the first ``m`` bytes of its token; the label is the target's distribution at that
token's start, conditioned on the tokens that spell those ``m`` bytes and go on, each carried to the drafter token
the rest of its text starts with:

    y(d) ∝ sum of p_target(t) over the target tokens t with t[:m] = the m bytes and the drafter starting t[m:] with d

(a target token that is exactly the ``m`` bytes ends there, and what follows it needs another forward: it is left
out, and the others renormalised). This is the target's next-text distribution at that byte given its token
goes on, the one its walk reads the byte noise with there (docs/coupling.md). Measured on the embedded pair
(docs/benchmarks.md): a drafter trained on them gets far closer to them and yet accepts less than one trained on
the aligned labels only, so ``"aligned"`` is the default; ``heldout_soft_loss`` scores the two kinds of position
apart.

Windows are cut from the drafter's packed stream; each run of text between the ``<s>``/``</s>`` markers of a
window (a file, or one of the target's own continuations) is encoded by the target on its own, and the runs are
read sorted by length, ``chunk`` at a time (float32, no gradients: on a Zen 4 CPU shared with another job, float32
reads 16 windows in 0.85 s where bf16 autocast takes 1.9 s; ``bf16=True`` for a GPU). A marker's own position, and
runs whose bytes are not UTF-8, keep the text's label.
"""

from __future__ import annotations

import bisect
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from hsd.vocab import Vocab  # noqa: E402


def _first_piece(drafter_tok, vd: Vocab, b: bytes) -> int | None:
    """The drafter token the text ``b`` starts with (its encoding's first piece with bytes), or ``None``."""
    try:
        ids = drafter_tok.encode(b.decode("utf-8"), add_special_tokens=False)
    except UnicodeDecodeError:  # a byte-level piece of a character: spell it with the drafter's bytes
        ids = vd.greedy_encode(b)[0]
    ids = [i for i in ids if vd.tokens[i]]
    return ids[0] if ids else None


def first_piece_map(target_tok, drafter_tok) -> tuple[torch.Tensor, int]:
    """For every target id, the drafter id its text starts with (-1 for specials); and how many map exactly
    (the target token's text *is* that drafter token's)."""
    vt, vd = Vocab.from_tokenizer(target_tok), Vocab.from_tokenizer(drafter_tok)
    n_target = max(len(target_tok), len(vt.tokens))
    first = torch.full((n_target,), -1, dtype=torch.long)
    exact = 0
    for t, b in enumerate(vt.tokens):
        d = _first_piece(drafter_tok, vd, b) if b else None
        if d is not None:
            first[t] = d
            exact += vd.tokens[d] == b
    eos_t, eos_d = target_tok.eos_token_id, drafter_tok.eos_token_id
    if eos_t is not None and eos_d is not None:
        first[eos_t] = eos_d
    return first, exact


POSITIONS = ("aligned", "all")


def inside_map(target_tok, drafter_tok, n_logits: int) -> dict[bytes, tuple[torch.Tensor, torch.Tensor]]:
    """For every proper prefix ``u`` of a target token's text: the target ids whose text starts with ``u`` and
    goes on, and for each the drafter token the rest of its text starts with (the inner labels' sparse map)."""
    vt, vd = Vocab.from_tokenizer(target_tok), Vocab.from_tokenizer(drafter_tok)
    pairs: dict[bytes, list[tuple[int, int]]] = {}
    for t, b in enumerate(vt.tokens[:n_logits]):
        for m in range(1, len(b or b"")):
            d = _first_piece(drafter_tok, vd, b[m:])
            if d is not None:
                pairs.setdefault(b[:m], []).append((t, d))
    return {u: (torch.tensor([t for t, _ in v]), torch.tensor([d for _, d in v])) for u, v in pairs.items()}


class SoftLabeler:
    """The target's next-token distribution carried into the drafter's vocabulary, at aligned positions (and with
    ``positions="all"`` inside the target's tokens, module docstring).

    ``temperature`` is the target's sampling temperature the labels are taken at (1: its own distribution; 0.7:
    the sharper one SLEM at T = 0.7 samples, which with shared noise the drafter should be close to,
    docs/coupling.md). A drafter trained on labels at T then drafts at drafter temperature 1."""

    def __init__(self, target_dir, drafter_tok, device: str = "cpu", bf16: bool = False, chunk: int = 32,
                 temperature: float = 1.0, positions: str = "aligned"):
        if not temperature > 0:
            raise ValueError(f"the soft labels' temperature must be > 0, got {temperature!r}")
        if positions not in POSITIONS:
            raise ValueError(f"positions must be one of {POSITIONS}, got {positions!r}")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.tok_t = AutoTokenizer.from_pretrained(target_dir)
        self.target = AutoModelForCausalLM.from_pretrained(target_dir, dtype=torch.float32).to(device).eval()
        self.target.requires_grad_(False)
        self.n_drafter = len(drafter_tok)
        self.first, self.exact = first_piece_map(self.tok_t, drafter_tok)
        self.first = self.first[:self.target.config.vocab_size]
        self.keep = self.first >= 0
        vd = Vocab.from_tokenizer(drafter_tok)
        self.d_bytes = [b or b"" for b in vd.tokens] + [b""] * max(0, self.n_drafter - len(vd.tokens))
        self.special = torch.tensor([not b for b in self.d_bytes], dtype=torch.bool)
        self.device, self.bf16, self.chunk, self.temperature = device, bf16, chunk, float(temperature)
        self.positions = positions
        self.inside = inside_map(self.tok_t, drafter_tok, self.target.config.vocab_size) if positions == "all" else {}

    def _segments(self, row: list[int]):
        """Each run of text tokens between the window's ``<s>``/``</s>`` markers (a file, or one of the target's
        continuations): where it starts in the row, its bytes, and each drafter token's end (bytes from its start)."""
        start = 0
        for i in range(len(row) + 1):
            if i < len(row) and not self.special[row[i]]:
                continue
            if i - start >= 2:
                ends, pos = [], 0
                for t in row[start:i]:
                    pos += len(self.d_bytes[t])
                    ends.append(pos)
                yield start, b"".join(self.d_bytes[t] for t in row[start:i]), ends
            start = i + 1

    @torch.no_grad()
    def labels(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, float]:
        """For drafter windows ``x`` (B x (seq+1)): the flat indices (into B x seq) of the labelled positions (the
        aligned ones; with ``positions="all"`` also those inside a target token), their soft labels (N x drafter
        vocab), and the share of positions labelled."""
        from train_common import autocast_ctx

        B, L = x.shape[0], x.shape[1] - 1
        rows, texts = [], []
        for b, row in enumerate(x.tolist()):
            for seg in self._segments(row):
                try:
                    text = seg[1].decode("utf-8")
                except UnicodeDecodeError:
                    continue
                rows.append((b, seg))
                texts.append(text)
        if not rows:
            self.last_aligned = torch.zeros(0, dtype=torch.bool)
            return torch.zeros(0, dtype=torch.long), torch.zeros(0, self.n_drafter), 0.0
        encs = self.tok_t.backend_tokenizer.encode_batch(texts, add_special_tokens=False)
        # runs of similar length together, so that little of the forward is padding
        logits = [None] * len(encs)
        order = sorted(range(len(encs)), key=lambda i: len(encs[i].ids))
        for c in range(0, len(order), self.chunk):
            chunk = order[c:c + self.chunk]
            ids = torch.zeros(len(chunk), len(encs[chunk[-1]].ids), dtype=torch.long)
            for r, i in enumerate(chunk):
                ids[r, :len(encs[i].ids)] = torch.tensor(encs[i].ids)
            with autocast_ctx(self.device, enabled=self.bf16):
                out = self.target(input_ids=ids.to(self.device)).logits
            for r, i in enumerate(chunk):
                logits[i] = out[r, :len(encs[i].ids)]
        flat, src = [], []
        for i, ((b, (start, data, ends)), text, e) in enumerate(zip(rows, texts, encs)):
            if len(data) == len(text):  # ASCII: character offsets are byte offsets
                t_ends = [o[1] for o in e.offsets]
            else:
                cum = [0]
                for ch in text:
                    cum.append(cum[-1] + len(ch.encode("utf-8")))
                t_ends = [cum[o[1]] for o in e.offsets]
            at = {end: j for j, end in enumerate(t_ends)}
            for k, end in enumerate(ends[:-1]):  # drafter position start+k predicts token start+k+1
                pos = start + k
                j = at.get(end)
                if j is not None:
                    flat.append(b * L + pos)
                    src.append((i, j, None))
                elif self.inside:  # inside target token j + 1 (bisect: the first target token ending after it)
                    j = bisect.bisect_right(t_ends, end) - 1
                    if j < 0:
                        continue  # inside the run's first target token: no position of the target predicts it
                    hit = self.inside.get(data[t_ends[j]:end])
                    if hit is not None:
                        flat.append(b * L + pos)
                        src.append((i, j, hit))
        if not flat:
            self.last_aligned = torch.zeros(0, dtype=torch.bool)
            return torch.zeros(0, dtype=torch.long), torch.zeros(0, self.n_drafter), 0.0
        probs = torch.softmax(torch.stack([logits[i][j] for i, j, _ in src]).float() / self.temperature, dim=-1)
        y = torch.zeros(len(src), self.n_drafter, device=probs.device)
        aligned = torch.tensor([hit is None for _, _, hit in src], device=probs.device)
        if aligned.any():
            p = probs[aligned][:, self.keep]
            y[aligned] = torch.zeros(p.shape[0], self.n_drafter, device=p.device).index_add_(
                1, self.first[self.keep].to(p.device), p / p.sum(-1, keepdim=True))
        inner = [(r, hit) for r, (_, _, hit) in enumerate(src) if hit is not None]
        if inner:  # one flat list of (row, target token, drafter token) triples for every inner position
            dev = probs.device
            row_of = torch.cat([torch.full((len(hit[0]),), r, dtype=torch.long) for r, hit in inner]).to(dev)
            tids = torch.cat([hit[0] for _, hit in inner]).to(dev)
            dids = torch.cat([hit[1] for _, hit in inner]).to(dev)
            mass = probs[row_of, tids]
            total = torch.zeros(len(src), device=dev).index_add_(0, row_of, mass)
            y.index_put_((row_of, dids), mass / total[row_of].clamp_min(1e-30), accumulate=True)
            total = total.cpu()
            dead = [r for r, _ in inner if not total[r] > 0]  # every continuing token has probability 0 here
            if dead:
                keep = torch.ones(len(src), dtype=torch.bool)
                keep[dead] = False
                flat = [f for f, k in zip(flat, keep.tolist()) if k]
                y = y[keep.to(y.device)]
                aligned = aligned[keep.to(aligned.device)]
        self.last_aligned = aligned.cpu()  # which of the rows just returned are aligned positions
        return torch.tensor(flat), y, len(flat) / (B * L)


def soft_loss(logits: torch.Tensor, idx: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the drafter's ``logits`` (B x seq x V) against soft labels ``y`` at flat positions ``idx``."""
    logq = torch.log_softmax(logits.float().reshape(-1, logits.size(-1))[idx.to(logits.device)], dim=-1)
    return -(y.to(logq.device) * logq).sum(-1).mean()


@torch.no_grad()
def heldout_soft_loss(model, labeler: SoftLabeler, stream: torch.Tensor, seq: int, device: str = "cpu",
                      max_windows: int = 64, batch: int = 16) -> dict:
    """The drafter's cross-entropy against the target's soft labels on held-out windows (the first
    ``max_windows`` non-overlapping windows of ``stream``): how close it is to the target it serves, in nats per
    labelled position. Lower is closer; the labels' own entropy is the floor (``entropy``). With
    ``positions="all"`` the aligned positions and those inside a target token are also scored apart
    (``soft_ce_aligned``, ``soft_ce_inside``, with their entropies and counts)."""
    was_training = model.training
    model.eval()
    n = min(max_windows, (stream.numel() - 1) // seq)
    sums = {part: [0.0, 0.0, 0] for part in ("", "_aligned", "_inside")}  # CE, entropy, positions
    for i in range(0, n, batch):
        x = torch.stack([stream[s * seq:s * seq + seq + 1] for s in range(i, min(n, i + batch))])
        idx, y, _ = labeler.labels(x)
        if not idx.numel():
            continue
        logits = model(input_ids=x[:, :-1].to(device)).logits
        logq = torch.log_softmax(logits.float().reshape(-1, logits.size(-1))[idx.to(logits.device)], -1).cpu()
        y = y.cpu()  # the labels come from the labeler's device, the scores from the model's
        ce = -(y * logq).sum(-1)
        h = -(y * torch.log(y.clamp_min(1e-12))).sum(-1)
        for part, rows in (("", slice(None)), ("_aligned", labeler.last_aligned),
                           ("_inside", ~labeler.last_aligned)):
            sums[part][0] += ce[rows].sum().item()
            sums[part][1] += h[rows].sum().item()
            sums[part][2] += int(ce[rows].numel())
    model.train(was_training)
    out = {}
    for part, (ce, h, k) in sums.items():
        if part and (labeler.positions == "aligned" or not k):
            continue
        out.update({f"soft_ce{part}": round(ce / max(k, 1), 5), f"entropy{part}": round(h / max(k, 1), 5),
                    f"positions{part}": int(k)})
    return out
