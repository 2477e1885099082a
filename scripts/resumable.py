"""Resumable training of one model of the embedded pair: stop at any time, continue any day.

    python scripts/train_pair.py resume --role target --work ~/.cache/hsd-train --minutes 60
    python scripts/train_pair.py resume --role target --work ~/.cache/hsd-train --status
    python scripts/train_pair.py export --role target --work ~/.cache/hsd-train --out assets/tiny-code
    python scripts/train_pair.py distill --work ~/.cache/hsd-train --target assets/tiny-code/target --minutes 30
    python scripts/train_pair.py resume --role drafter --work ~/.cache/hsd-train \
        --distill-from assets/tiny-code/target --distill-mix 0.4 --minutes 60
    python scripts/train_pair.py resume --role drafter-shared --work ~/.cache/hsd-train \
        --distill-from assets/tiny-code/target --distill-mix 0.4 --minutes 75

``--unlikelihood FRAC`` (target only) makes that share of a segment's steps sequence-level unlikelihood steps
(Welleck et al., ICLR 2020, "Neural Text Generation with Unlikelihood Training", section 5.2): the target
continues corpus prefixes greedily and is trained to lower the probability of every token of a 4-gram it
repeats, so that its greedy text stops looping; the other steps are the usual next-token loss. Such a
segment is a fine-tune of trained weights, with a lower ``--peak-lr`` (e.g. 3e-4):

    python scripts/train_pair.py resume --role target --work ~/.cache/hsd-train-ul --unlikelihood 0.5 \
        --peak-lr 3e-4 --minutes 60
    python scripts/train_pair.py export --role target --work ~/.cache/hsd-train-ul --out DIR --force

(``--force``: its held-out loss is a little higher than the shipped weights', which export otherwise refuses.)

``blend`` then trades the fine-tune's effect against its cost by weight interpolation (WiSE-FT): a 30-minute
unlikelihood segment at share 0.75 that loops little but lost held-out loss, moved 70% of the way back to the
checkpoint it continued from (copied aside before that segment):

    cp ~/.cache/hsd-train-ul/ckpt/target.pt ~/before-ul75.pt
    python scripts/train_pair.py resume --role target --work ~/.cache/hsd-train-ul --unlikelihood 0.75 \
        --unlikelihood-tokens 96 --unlikelihood-prefix 64 --peak-lr 2e-4 --warmup 20 --minutes 30
    python scripts/train_pair.py blend --role target --work ~/.cache/hsd-train-ul --with ~/before-ul75.pt --share 0.7

``--distill-greedy`` (drafters) reads only the continuations the target decoded greedily (60% of a
``distill`` set): greedy SLEM, SLEM with a greedy drafter and SLRS at T = 0 accept a proposal exactly when the
drafter's choice is the target's most probable token, so a drafter spends its few parameters on that:

    python scripts/train_pair.py resume --role drafter --work ~/.cache/hsd-train \
        --distill-from assets/tiny-code/target --distill-mix 0.875 --distill-greedy --peak-lr 1e-3 --minutes 30

``--distill-logits TARGET_DIR`` (drafters) trains on the target's whole next-token distribution, not only on text:
the target reads the first ``--soft-windows`` windows of each batch, and wherever a drafter token and a target
token end at the same byte, its distribution, carried to the drafter token each target token starts with
(``scripts/soft_labels.py``), makes ``--soft-weight`` of the loss. It needs no ``distill`` texts; ``export
--distill-logits TARGET_DIR`` scores the checkpoint and the shipped drafter on those labels of the held-out split:

    python scripts/train_pair.py resume --role drafter --work ~/.cache/hsd-train \
        --distill-logits assets/tiny-code/target --peak-lr 5e-4 --minutes 60

With ``--role target``, ``--distill-logits TEACHER_DIR`` is self-distillation from a teacher with the target's own
tokenizer (refused otherwise): every position is labelled with the teacher's next-token distribution. It is for a
target grown deeper (``train_pair.py grow``) whose new layers must learn without the grown model drifting from the
target it was grown from, on whose text the drafters were distilled:

    python scripts/train_pair.py resume --role target --work ~/.cache/hsd-deep-work --init ~/.cache/hsd-deep/target \
        --distill-logits assets/tiny-code/target --soft-windows 16 --soft-weight 0.5 --peak-lr 1e-3 --minutes 240

``drafter-shared`` has no shipped weights to start from: its first resume initialises the drafter's
shape with the target's tokenizer (``FRESH``), and its first export writes ``assets/tiny-code/drafter-shared``.

``drafter-sampling`` begins as the shipped drafter (``DERIVED``: its weights, tokenizer and training history) and
is trained on the target's distribution for sampling with TLI; its export writes
``assets/tiny-code/drafter-sampling`` and leaves the greedy drafter as it was:

    python scripts/train_pair.py resume --role drafter-sampling --work ~/.cache/hsd-train \
        --distill-from assets/tiny-code/target --distill-mix 0.875 --distill-logits assets/tiny-code/target \
        --soft-windows 32 --soft-weight 0.5 --peak-lr 3e-4 --minutes 45

State lives in ``WORK`` (outside the repository):

* ``corpus/``: the texts ``scripts/build_corpus.py`` wrote (built on first use if missing);
* ``packed/ROLE-{train,heldout}.u16``: the corpus tokenized by the role's tokenizer, as uint16, each
  file followed by the tokenizer's end-of-text (drafters: ``<s>`` before each file too);
* ``packed/ROLE-evaluation.u16``: the evaluation packages, packed the same way but only scored
  (``pack_split``, for ``scripts/pair/pair_goals.py``'s bits per character), never trained on;
* ``distill/DIGEST/{train,heldout}.jsonl``: continuations written by the target whose weights hash to
  ``DIGEST`` (``distill``), mixed into drafter segments (``--distill-from``) and scoring their export;
* ``ckpt/ROLE.pt``: float32 weights, AdamW state, the data position, the learning-rate segment and
  the running totals (steps, tokens, seconds). Written atomically every ``--checkpoint-minutes``,
  at the end of a segment and on SIGINT/SIGTERM, so ``kill`` loses at most a few minutes.

Training runs in *segments*: each ``resume --minutes M`` (or ``--steps N``) that finds no
unfinished segment starts one of that length, with a short warmup and a cosine decay to 10% of the
peak learning rate over the segment; a segment cut short by a kill continues where it stopped. The
data order is a fixed permutation of non-overlapping windows per epoch (seeded by the epoch), so
the position is two integers.

If the checkpoint is lost, the shipped half-precision weights in ``assets/tiny-code/ROLE`` are the
starting point (``--init``, the default): the optimizer state starts fresh, and the totals start
from the shipped ``train_log.json``. A machine lent for one session keeps no work folder, so at a session's end
``snapshot`` writes the checkpoint's weights, unjudged, where the repository keeps them (``training/``), and the
next session resumes from them in a fresh work folder (the totals carry over, from ``training.json``):

    python scripts/train_pair.py snapshot --role target --work ~/.cache/hsd-train --out training
    python scripts/train_pair.py resume --role target --work ~/.cache/hsd-train --init training/target --minutes 120
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
LN2 = math.log(2.0)
HYPER = {  # per role: batch x seq windows and peak learning rate (train_pair.py's cpu preset)
    "target": dict(batch=16, seq=256, lr=2e-3),
    "drafter": dict(batch=32, seq=256, lr=3e-3),
    "drafter-bytes": dict(batch=16, seq=512, lr=3e-3),
    "drafter-shared": dict(batch=32, seq=256, lr=3e-3),
    "drafter-sampling": dict(batch=32, seq=256, lr=3e-3),
}
#: sequence-level unlikelihood steps (``--unlikelihood``): prompts of ``prefix`` corpus tokens, ``continuation``
#: greedy tokens each, ``batch`` prompts per step; tokens of a repeated ``n``-gram are penalised
UNLIKELIHOOD = dict(batch=16, prefix=32, continuation=64, n=4)
# Roles with no shipped weights to start from: a fresh model of another role's shape, with another
# role's tokenizer (both read from the init folder's siblings, e.g. assets/tiny-code/drafter and
# assets/tiny-code/target). ``drafter-shared`` is the drafter's shape with the *target's* tokenizer:
# a same-vocabulary drafter, so that classic speculative decoding runs on the embedded target.
FRESH = {
    "drafter-shared": dict(shape="drafter", tokenizer="target"),
}
# Roles that begin as a copy of another role's shipped weights (its shape, tokenizer and training history):
# ``drafter-sampling`` is the drafter trained further on the target's whole distribution (``--distill-logits``),
# for sampling with TLI, where what counts is how much of the target's distribution a drafter's samples share,
# not whether its first choice is the target's (what greedy SLEM needs of ``drafter``).
DERIVED = {
    "drafter-sampling": "drafter",
}


def own_weights(init_dir: Path, role: str) -> Path:
    """The folder ``role``'s weights start from: ``init_dir``, or for a ``DERIVED`` role with no weights of its
    own yet, the sibling folder of the role it derives from."""
    init_dir = Path(init_dir)
    if role in DERIVED and not (init_dir / "config.json").is_file():
        return init_dir.parent / DERIVED[role]
    return init_dir


def bos_first(role: str) -> bool:
    """Whether ``role``'s packed files start with its tokenizer's ``<s>``: the drafters with their own
    SentencePiece-style or byte tokenizer add it to every prompt; the target's tokenizer adds nothing,
    so neither the target nor a drafter that shares its tokenizer sees one."""
    return role not in ("target", "drafter-shared")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# Packed data and its position
# ---------------------------------------------------------------------------------------------
def tokenizer_digest(tok) -> str:
    return hashlib.sha256(tok.backend_tokenizer.to_str().encode()).hexdigest()[:16]


def pack(tok, docs: list[dict], path: Path, drafter: bool) -> dict:
    """Tokenize ``docs`` into one uint16 stream at ``path``; return its metadata."""
    assert len(tok) <= 65536, "uint16 packing needs a vocabulary of at most 65,536 tokens"
    bos, eos = tok.bos_token_id, tok.eos_token_id
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    n_tokens = 0
    with tmp.open("wb") as f:
        for i in range(0, len(docs), 256):
            texts = [d["text"] for d in docs[i:i + 256]]
            for enc in tok.backend_tokenizer.encode_batch(texts, add_special_tokens=False):
                ids = ([bos] if drafter else []) + enc.ids + [eos]
                np.asarray(ids, dtype=np.uint16).tofile(f)
                n_tokens += len(ids)
    tmp.replace(path)
    return dict(tokens=n_tokens, chars=sum(len(d["text"]) for d in docs), files=len(docs))


def load_stream(path: Path) -> torch.Tensor:
    return torch.from_numpy(np.fromfile(path, dtype=np.uint16).astype(np.int64))


class Windows:
    """Non-overlapping windows of ``seq + 1`` tokens in a per-epoch random order.

    Position = (epoch, index): ``state_dict`` is all a checkpoint needs to continue the same order."""

    def __init__(self, stream: torch.Tensor, seq: int, batch: int, seed: int):
        if stream.numel() < 2 * seq + 1:  # too short for a window at every epoch's offset: repeat it
            stream = stream.repeat(-(-(2 * seq + 1) // max(1, stream.numel())))
        self.stream, self.seq, self.batch, self.seed = stream, seq, batch, seed
        self.epoch, self.index = 0, 0
        self._order = None

    def _starts(self) -> torch.Tensor:
        if self._order is None:
            offset = (self.epoch * 97) % self.seq  # shift the grid each epoch so cuts move
            n = (self.stream.numel() - offset - 1) // self.seq
            g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
            order = torch.randperm(n, generator=g)
            if n < self.batch:  # a stream shorter than one batch (a small distillation set): repeat it
                order = order.repeat(-(-self.batch // n))
            self._order = offset + order * self.seq
        return self._order

    def __len__(self) -> int:
        return (self.stream.numel() - 1) // self.seq

    def next_batch(self) -> torch.Tensor:
        starts = self._starts()
        if self.index + self.batch > starts.numel():
            self.epoch, self.index, self._order = self.epoch + 1, 0, None
            starts = self._starts()
        picked = starts[self.index:self.index + self.batch]
        self.index += self.batch
        return self.stream[picked[:, None] + torch.arange(self.seq + 1)[None, :]]

    def state_dict(self) -> dict:
        return dict(epoch=self.epoch, index=self.index, seed=self.seed, seq=self.seq, batch=self.batch)

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.index, self._order = state["epoch"], state["index"], None


# ---------------------------------------------------------------------------------------------
# Evaluation
# ---------------------------------------------------------------------------------------------
@torch.no_grad()
def heldout_loss(model, stream: torch.Tensor, chars: int | None, seq: int, device: str, bf16: bool,
                 max_windows: int | None = None, batch: int = 16) -> dict:
    """Nats per token and bits per character over consecutive windows of ``stream``."""
    from train_common import autocast_ctx

    was_training = model.training
    model.eval()
    seq = min(seq, stream.numel() - 1)  # a held-out set shorter than one window is scored whole
    n = (stream.numel() - 1) // seq
    if max_windows:
        n = min(n, max_windows)
    nats, count = 0.0, 0
    for i in range(0, n, batch):
        rows = torch.arange(i, min(n, i + batch)) * seq
        x = stream[rows[:, None] + torch.arange(seq + 1)[None, :]].to(device)
        with autocast_ctx(device, bf16):
            logits = model(input_ids=x[:, :-1]).logits.float()
        nats += torch.nn.functional.cross_entropy(logits.transpose(1, 2), x[:, 1:], reduction="sum").item()
        count += x[:, 1:].numel()
    model.train(was_training)
    covered = count / max(1, stream.numel() - 1)
    rec = dict(nats_per_token=round(nats / max(count, 1), 5), tokens=count)
    if chars and not max_windows:  # bits per character only over (nearly) the whole text
        rec["bits_per_char"] = round(nats / LN2 / (chars * covered), 5)
    return rec


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------
def save_checkpoint(path: Path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def shipped_totals(init_dir: Path, role: str) -> dict:
    """Steps, tokens and seconds of the run that produced the shipped weights (its train_log.json), or of the
    sessions before a :func:`snapshot` (its training.json), so a history carried across machines stays whole."""
    snap = init_dir / "training.json"
    if snap.is_file():
        return dict(json.loads(snap.read_text())["totals"])
    logf = init_dir.parent / "train_log.json"
    if not logf.is_file() or (role in FRESH and not (init_dir / "config.json").is_file()):
        return dict(steps=0, tokens=0, seconds=0.0, sessions=[])
    role = own_weights(init_dir, role).name if role in DERIVED else role  # a derived role's history begins as its base's
    run = json.loads(logf.read_text())
    if "totals" in run.get(role, {}):
        return dict(run[role]["totals"])
    tr = run.get(role, {}).get("training", {})
    return dict(steps=tr.get("steps", 0), tokens=tr.get("tokens_seen", 0), seconds=tr.get("seconds", 0.0),
                sessions=[dict(what="train_pair.py from scratch", steps=tr.get("steps", 0),
                               tokens=tr.get("tokens_seen", 0), seconds=tr.get("seconds", 0.0),
                               command=run.get("command"))])


class Stop:
    """SIGINT/SIGTERM set a flag; the loop checkpoints and exits at the next step."""

    def __init__(self):
        self.requested = False
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, self._handler)

    def _handler(self, signum, frame):
        log(f"signal {signum}: checkpointing and stopping after this step")
        self.requested = True


# ---------------------------------------------------------------------------------------------
# Distillation text: what the target writes, for the drafters to imitate
# ---------------------------------------------------------------------------------------------
def weights_digest(model_dir: Path) -> str:
    """sha256 (16 hex) of a model folder's weight files: names the target a distillation set came from."""
    h = hashlib.sha256()
    for f in sorted(Path(model_dir).glob("*.safetensors")) + sorted(Path(model_dir).glob("*.bin")):
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def distill_dir(work: Path, target_dir: Path) -> Path:
    return work / "distill" / weights_digest(target_dir)


def _append_jsonl(path: Path, rows: list[dict]) -> None:
    with path.open("a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


def _count_lines(path: Path) -> int:
    if not path.is_file():
        return 0
    with path.open("rb") as f:
        return sum(1 for _ in f)


def distill(args) -> int:
    """Append target continuations of corpus prompts to WORK/distill/DIGEST/train.jsonl.

    Resumable by construction: every batch is appended as soon as it is generated, and the prompt
    sampler of batch ``b`` is seeded by ``(seed, b)``, so a killed run continues with new prompts.
    The held-out set (greedy continuations of held-out prompts: what export scores drafters on) is
    written once, before the first training batch."""
    import random

    import build_corpus

    work = Path(args.work).expanduser()
    target_dir = Path(args.target or ROOT / "assets" / "tiny-code" / "target")
    torch.set_num_threads(args.threads)
    model, tok = load_init(target_dir)
    model.to(args.device).eval()
    out = distill_dir(work, target_dir)
    out.mkdir(parents=True, exist_ok=True)
    meta_path = out / "meta.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else dict(
        target=str(target_dir), digest=out.name, batches=0, samples=0, generated_tokens=0, seconds=0.0,
        new_tokens=args.new_tokens, greedy_frac=args.greedy_frac, prompt_lengths=[8, 16, 32, 64, 128], runs=[])
    corpus = work / "corpus"
    if not (corpus / "manifest.json").is_file():
        build_corpus.main(["--work", str(work)])
    stop = Stop()
    if not (out / "heldout.jsonl").is_file():
        held = [(d["path"], d["text"]) for d in build_corpus.read_jsonl(corpus / "heldout.jsonl")]
        rows, _ = _generate(model, tok, held, args.heldout_samples, args.batch, meta["new_tokens"], args.device,
                            random.Random(args.seed), greedy=True, lengths=[16, 32, 64])
        tmp = out / "heldout.tmp"
        tmp.unlink(missing_ok=True)
        _append_jsonl(tmp, rows)
        tmp.replace(out / "heldout.jsonl")
        log(f"distill: {len(rows)} greedy held-out continuations written")
    docs = [(d["path"], d["text"]) for d in build_corpus.read_jsonl(corpus / "train.jsonl")]
    t_run, tokens_run, samples_run = time.time(), 0, 0
    # a batch is complete only once its rows are in train.jsonl: count lines, not the meta
    meta["samples"] = _count_lines(out / "train.jsonl")
    while not stop.requested and (args.samples is None or samples_run < args.samples):
        if args.minutes is not None and time.time() - t_run >= args.minutes * 60:
            break
        b = meta["batches"]
        rng = random.Random(args.seed * 1_000_003 + b)
        greedy = rng.random() < meta["greedy_frac"]
        t0 = time.time()
        length = rng.choice(meta["prompt_lengths"])  # one prompt length per batch: one generate call
        functions = args.function_prompts > 0 and rng.random() < args.function_prompts
        if functions:
            length = max(length, 32)  # a docstring and a few lines before it
        rows, n_tok = _generate(model, tok, docs, args.batch, args.batch, meta["new_tokens"], args.device, rng,
                                greedy=greedy, lengths=[length], functions=functions)
        _append_jsonl(out / "train.jsonl", rows)
        meta.update(batches=b + 1, samples=meta["samples"] + len(rows),
                    generated_tokens=meta["generated_tokens"] + n_tok, seconds=meta["seconds"] + time.time() - t0)
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        tokens_run += n_tok
        samples_run += len(rows)
        log(f"distill: batch {b + 1} ({'greedy' if greedy else 'T=1'}{', after docstrings' if functions else ''}), "
            f"{meta['samples']:,} samples, "
            f"{tokens_run / (time.time() - t_run):.0f} generated tok/s this run")
    meta["runs"].append(dict(finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"), samples=samples_run,
                             generated_tokens=tokens_run, seconds=round(time.time() - t_run, 1),
                             command="python " + " ".join(sys.argv), machine=_machine()))
    meta_path.write_text(json.dumps(meta, indent=1) + "\n")
    log(f"distill: {out} holds {meta['samples']:,} continuations ({meta['generated_tokens']:,} tokens)")
    return 0


def _machine() -> dict:
    from train_common import machine_info

    return machine_info()


@torch.no_grad()
def _generate(model, tok, docs, n, batch, new_tokens, device, rng, greedy: bool, lengths,
              functions: bool = False) -> tuple[list[dict], int]:
    """``n`` continuations of prompts cut from ``docs`` (one prompt length per generate call); ``functions``:
    prompts that end where a function's docstring does (:func:`train_common.make_function_prompts_batched`)."""
    from train_common import make_function_prompts_batched, make_prompts_batched

    eos = tok.eos_token_id
    prompts = (make_function_prompts_batched if functions else make_prompts_batched)(docs, tok, n, lengths, rng)
    by_len: dict[int, list] = {}
    for L, ids in prompts:
        by_len.setdefault(L, []).append(ids)
    rows, n_tok = [], 0
    for L, lst in sorted(by_len.items()):
        for i in range(0, len(lst), batch):
            x = torch.tensor(lst[i:i + batch], dtype=torch.long, device=device)
            kw = dict(do_sample=False) if greedy else dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0)
            out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=new_tokens,
                                 min_new_tokens=1, eos_token_id=eos, pad_token_id=eos, **kw)
            for row, p in zip(out.tolist(), lst[i:i + batch]):
                cont = row[len(p):]
                if eos in cont:
                    cont = cont[:cont.index(eos)]
                n_tok += len(cont)
                rows.append(dict(prompt=tok.decode(p), continuation=tok.decode(cont), greedy=greedy,
                                 **({"after_docstring": True} if functions else {})))
    return rows, n_tok


def pack_distill(work: Path, role: str, tok, source: Path, split: str,
                 greedy_only: bool = False, docstrings_only: bool = False) -> tuple[torch.Tensor, dict]:
    """The distillation texts of ``source`` tokenized for ``role`` (cached; rebuilt when the file grew);
    ``greedy_only``: only the continuations the target decoded greedily (``--distill-greedy``); ``docstrings_only``:
    only those of prompts that end where a function's docstring does (``--distill-docstrings``)."""
    src = source / f"{split}.jsonl"
    key = dict(source=source.name, split=split, bytes=src.stat().st_size, tokenizer=tokenizer_digest(tok))
    if greedy_only:
        key["greedy_only"] = True
    if docstrings_only:
        key["docstrings_only"] = True
    suffix = ("-greedy" if greedy_only else "") + ("-docstrings" if docstrings_only else "")
    path = work / "packed" / f"{role}-distill-{source.name}-{split}{suffix}.u16"
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if meta.get("key") != key or not path.is_file():
        import build_corpus

        docs = [dict(text=r["prompt"] + r["continuation"]) for r in build_corpus.read_jsonl(src)
                if (r.get("greedy") or not greedy_only) and (r.get("after_docstring") or not docstrings_only)]
        if not docs:
            raise SystemExit(f"no {'greedy ' if greedy_only else ''}continuations"
                             f"{' after docstrings' if docstrings_only else ''} in {src} (`distill "
                             "--function-prompts FRAC` writes those)")
        meta = dict(key=key, **pack(tok, docs, path, drafter=bos_first(role)), samples=len(docs))
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        log(f"packed {meta['samples']:,} {'greedy ' if greedy_only else ''}distillation texts"
            f"{' after docstrings' if docstrings_only else ''} for {role}: "
            f"{meta['tokens']:,} tokens")
    return load_stream(path), meta


# ---------------------------------------------------------------------------------------------
# Unlikelihood: greedy text that does not loop
# ---------------------------------------------------------------------------------------------
def repeated_ngram_mask(seq: list[int], n: int) -> list[bool]:
    """True at every token of an ``n``-gram that already occurred earlier in ``seq`` (Welleck et al.'s
    candidates for sequence-level unlikelihood: the tokens of each repeat)."""
    mask, seen = [False] * len(seq), set()
    for i in range(len(seq) - n + 1):
        gram = tuple(seq[i:i + n])
        if gram in seen:
            mask[i:i + n] = [True] * n
        seen.add(gram)
    return mask


def unlikelihood_loss(model, stream: torch.Tensor, gen: torch.Generator, device: str,
                      spec: dict = UNLIKELIHOOD) -> tuple[torch.Tensor, float, int]:
    """One sequence-level unlikelihood batch: greedy continuations of random corpus prefixes (drawn with
    ``gen``), then ``-mean log(1 - p(token))`` over the tokens of repeated n-grams. Returns the loss, the
    share of continuation tokens that were in a repeat, and the tokens the forward read."""
    from train_common import autocast_ctx

    P, C = spec["prefix"], spec["continuation"]
    starts = torch.randint(0, stream.numel() - P - 1, (spec["batch"],), generator=gen)
    prompts = stream[starts[:, None] + torch.arange(P)[None, :]].to(device)
    model.eval()
    with torch.no_grad(), autocast_ctx(device):
        full = model.generate(prompts, attention_mask=torch.ones_like(prompts), do_sample=False, max_new_tokens=C,
                              min_new_tokens=C, pad_token_id=model.config.eos_token_id or 0)
    model.train()
    cont = full[:, P:]
    mask = torch.tensor([repeated_ngram_mask(row, spec["n"]) for row in cont.tolist()], dtype=torch.float32,
                        device=device)
    with autocast_ctx(device):
        logits = model(input_ids=full[:, :-1]).logits
    p = logits[:, P - 1:].float().softmax(-1).gather(-1, cont.unsqueeze(-1)).squeeze(-1)
    loss = -(torch.log((1 - p).clamp(min=1e-5)) * mask).sum() / mask.sum().clamp(min=1)
    return loss, float(mask.mean()), full[:, :-1].numel()


# ---------------------------------------------------------------------------------------------
# Resume
# ---------------------------------------------------------------------------------------------
def prepare_data(work: Path, role: str, tok) -> dict:
    """Corpus texts and packed streams for ``role``; rebuilt when the corpus or tokenizer changed."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import build_corpus

    corpus = work / "corpus"
    if not (corpus / "manifest.json").is_file():
        log("no corpus in the work folder yet: building it (scripts/build_corpus.py)")
        build_corpus.main(["--work", str(work)])
    manifest = json.loads((corpus / "manifest.json").read_text())
    key = dict(corpus=manifest["sha256"], tokenizer=tokenizer_digest(tok))
    meta_path = work / "packed" / f"{role}.json"
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if meta.get("key") != key:
        t0 = time.time()
        meta = dict(key=key)
        for split in ("train", "heldout"):
            docs = build_corpus.read_jsonl(corpus / f"{split}.jsonl")
            meta[split] = pack(tok, docs, work / "packed" / f"{role}-{split}.u16", drafter=bos_first(role))
            del docs
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        log(f"packed {role}: {meta['train']['tokens']:,} train tokens, {meta['heldout']['tokens']:,} held-out "
            f"tokens in {time.time() - t0:.0f}s")
    meta["manifest"] = manifest
    return meta


def pack_split(work: Path, role: str, tok, split: str) -> dict:
    """``WORK/corpus/SPLIT.jsonl`` (e.g. ``evaluation``: the packages the pair's goals are measured on) packed for
    scoring only, like the held-out split, into ``WORK/packed/ROLE-SPLIT.u16``: its metadata (tokens, chars,
    files) and ``path``. Repacked when the corpus or the tokenizer changed; train and heldout are
    :func:`prepare_data`'s, which training reads."""
    import build_corpus

    if split in ("train", "heldout"):
        raise ValueError(f"{split} is packed by prepare_data (training reads it), not by pack_split")
    corpus = work / "corpus"
    manifest = json.loads((corpus / "manifest.json").read_text())
    key = dict(corpus=manifest["sha256"], tokenizer=tokenizer_digest(tok))
    path = work / "packed" / f"{role}-{split}.u16"
    meta_path = path.with_suffix(".json")
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    if meta.get("key") != key or not path.is_file():
        meta = dict(key=key, **pack(tok, build_corpus.read_jsonl(corpus / f"{split}.jsonl"), path, bos_first(role)))
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        log(f"packed {role} {split}: {meta['tokens']:,} tokens of {meta['files']} files")
    return dict(meta, path=path)


def load_init(init_dir: Path, role: str | None = None, seed: int = 1234):
    """The model and tokenizer in ``init_dir``; for a ``FRESH`` role whose folder holds no model yet,
    a newly initialised model (seeded) of the ``shape`` role's configuration with the ``tokenizer``
    role's tokenizer, both read from ``init_dir``'s sibling folders; for a ``DERIVED`` role with none yet, the
    model of the role it derives from."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    init_dir = own_weights(init_dir, role) if role else Path(init_dir)
    if role in FRESH and not (init_dir / "config.json").is_file():
        spec = FRESH[role]
        shape_dir, tok_dir = init_dir.parent / spec["shape"], init_dir.parent / spec["tokenizer"]
        for d in (shape_dir, tok_dir):
            if not (d / "config.json").is_file():
                raise SystemExit(f"{role} starts from the shape of {shape_dir} and the tokenizer of {tok_dir}, "
                                 f"but {d} holds no model")
        tok = AutoTokenizer.from_pretrained(tok_dir)
        cfg = AutoConfig.from_pretrained(shape_dir)
        cfg.vocab_size = len(tok)
        cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id = tok.bos_token_id, tok.eos_token_id, tok.pad_token_id
        cfg.dtype = "float32"
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        return model, tok
    tok = AutoTokenizer.from_pretrained(init_dir)
    model = AutoModelForCausalLM.from_pretrained(init_dir, dtype=torch.float32)
    return model, tok


def make_optimizer(model, lr: float):
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                             lr=lr, betas=(0.9, 0.95), eps=1e-8)


def segment_lr(seg: dict, peak: float) -> float:
    """Warmup then cosine to 10% of ``peak`` over the segment (by steps, or by seconds)."""
    done = seg["steps_done"] / seg["steps"] if seg.get("steps") else seg["seconds_done"] / seg["seconds"]
    warm = min(1.0, (seg["steps_done"] + 1) / seg["warmup"])
    return peak * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, done))))


def segment_finished(seg: dict | None) -> bool:
    if seg is None:
        return True
    if seg.get("steps"):
        return seg["steps_done"] >= seg["steps"]
    return seg["seconds_done"] >= seg["seconds"]


def _load_state(args, role: str, init_dir: Path, ckpt_path: Path, model) -> dict:
    """The checkpoint's state (its weights loaded into ``model``), or a first state that records where ``role``
    starts from."""
    if ckpt_path.is_file():
        state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
        model.load_state_dict(state["model"])
        log(f"resumed {role} from {ckpt_path}: {state['totals']['tokens']:,} tokens so far")
        return state
    state = dict(totals=shipped_totals(init_dir, role), segment=None, segments=[], evals=[],
                 data=None, optimizer=None, hyper=dict(HYPER[role]), init=str(init_dir))
    state["totals"]["sessions"] = list(state["totals"].get("sessions", []))
    if role in FRESH and not (init_dir / "config.json").is_file():
        state["seed"] = args.seed  # export rebuilds these initial weights to compare with
        state["init"] = (f"fresh (seed {args.seed}): the shape of {init_dir.parent / FRESH[role]['shape']}, "
                         f"the tokenizer of {init_dir.parent / FRESH[role]['tokenizer']}")
    if role in DERIVED and own_weights(init_dir, role) != init_dir:
        state["init"] = str(own_weights(init_dir, role))  # the base role's shipped weights
    log(f"first resume of {role}: starting from {state['init']}")
    return state


def _new_segment(args, role: str, tok, work: Path, hp: dict) -> dict:
    """A segment of ``--minutes``/``--steps`` with the flags that shape it (checked here, once)."""
    from train_common import bf16_is_fast, machine_info

    device = args.device
    seg = dict(started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), steps=args.steps, seconds=(args.minutes or 0) * 60,
               autocast="bf16" if bf16_is_fast(device) else "none (float32)",
               warmup=args.warmup, steps_done=0, seconds_done=0.0, tokens_done=0, command="python " + " ".join(sys.argv),
               machine=machine_info(), device=device, threads=args.threads)
    for flag, given in (("--distill-greedy", args.distill_greedy), ("--distill-docstrings", args.distill_docstrings)):
        if given and not args.distill_from:
            raise SystemExit(f"{flag} picks continuations of a distillation set: pass --distill-from TARGET_DIR "
                             "too (the target whose `distill` texts to read)")
    if args.distill_from:
        if role == "target":
            raise SystemExit("--distill-from is for the drafters: the target trains on the corpus")
        source = distill_dir(work, Path(args.distill_from))
        if not (source / "train.jsonl").is_file():
            raise SystemExit(f"no distillation texts in {source}: run `train_pair.py distill --target "
                             f"{args.distill_from}` first")
        seg["distill"] = dict(source=source.name, target=str(args.distill_from), mix=args.distill_mix)
        if args.distill_greedy:
            seg["distill"]["greedy_only"] = True
        if args.distill_docstrings:
            seg["distill"]["docstrings_only"] = True
    if args.unlikelihood:
        if role != "target" or not 0 < args.unlikelihood <= 1:
            raise SystemExit("--unlikelihood is the share (0 < FRAC <= 1) of a target segment's steps that are "
                             "unlikelihood steps; the drafters imitate the target instead")
        spec = dict(UNLIKELIHOOD, **{k: v for k, v in (("prefix", args.unlikelihood_prefix),
                                                       ("continuation", args.unlikelihood_tokens)) if v})
        seg["unlikelihood"] = dict(spec, share=args.unlikelihood, steps=0, repeat_share=None)
    if args.distill_logits:
        from transformers import AutoTokenizer

        if role == "target" and AutoTokenizer.from_pretrained(args.distill_logits).get_vocab() != tok.get_vocab():
            raise SystemExit("--distill-logits with --role target is self-distillation from a teacher with the "
                             "target's own tokenizer (a grown target from the one it was grown from); "
                             f"{args.distill_logits} has another vocabulary")
        seg["soft"] = dict(target=str(args.distill_logits), weight=args.soft_weight,
                           windows=args.soft_windows, positions=0, temperature=args.soft_temperature,
                           where=args.soft_positions, inside_weight=args.soft_inside_weight)
    if args.peak_lr:
        seg["peak_lr"] = args.peak_lr
    if args.train_batch:
        seg["batch"] = args.train_batch
    log(f"new segment: {args.steps or 0} steps / {args.minutes or 0} min, warmup {args.warmup}, peak lr "
        f"{seg.get('peak_lr', hp['lr'])}, {seg.get('batch', hp['batch'])} windows of {hp['seq']} tokens per step"
        + (f", {args.distill_mix:.0%} of each batch from target text" if args.distill_from else "")
        + (" (its greedy continuations only)" if args.distill_greedy else "")
        + (" (its continuations after docstrings only)" if args.distill_docstrings else "")
        + (f", {args.unlikelihood:.0%} of the steps unlikelihood steps" if args.unlikelihood else ""))
    return seg


def _note_unused_flags(args, seg: dict) -> None:
    log(f"continuing the unfinished segment ({seg['steps_done']} steps, {seg['seconds_done'] / 60:.1f} min done)")
    unused = [flag for flag, given in (("--distill-from", args.distill_from), ("--distill-greedy", args.distill_greedy),
                                       ("--distill-docstrings", args.distill_docstrings),
                                       ("--distill-logits", args.distill_logits),
                                       ("--unlikelihood", args.unlikelihood), ("--peak-lr", args.peak_lr),
                                       ("--train-batch", args.train_batch)) if given]
    if unused:
        log(f"note: {', '.join(unused)} only shape a new segment; the unfinished one keeps the settings it "
            f"started with")


class Segment:
    """One segment's training: the data it reads (corpus windows, the target's texts, soft labels), its steps, its
    quick evaluations and its checkpoints."""

    def __init__(self, args, work: Path, role: str, tok, model, opt, state: dict, ckpt_path: Path):
        self.args, self.role, self.model, self.opt, self.state = args, role, model, opt, state
        self.ckpt_path, self.device = ckpt_path, args.device
        self.seg, self.hp = state["segment"], state["hyper"]
        self.held = load_stream(work / "packed" / f"{role}-heldout.u16")
        self.mix, self.ul = self.seg.get("distill"), self.seg.get("unlikelihood")
        batch = self.seg.get("batch", self.hp["batch"])  # a GPU segment takes more windows per step (--train-batch)
        n_dist = int(round(batch * self.mix["mix"])) if self.mix else 0
        self.train = Windows(load_stream(work / "packed" / f"{role}-train.u16"), self.hp["seq"], batch - n_dist,
                             args.seed)
        if state["data"] is not None:
            self.train.load_state_dict(state["data"])
        self.dist = self.dist_held = self.dmeta = None
        if n_dist:
            self._open_distill(work, tok, n_dist)
        if role != "target":
            source = None
            if self.mix:
                source = work / "distill" / self.mix["source"]
            elif args.distill_from:
                source = distill_dir(work, Path(args.distill_from))
            if source is not None and (source / "heldout.jsonl").is_file():
                self.dist_held = pack_distill(work, role, tok, source, "heldout")[0]
        self.soft, self.labeler = self.seg.get("soft"), None
        if self.soft:
            self._open_labeler(tok)
        self.ema = None

    def _open_distill(self, work: Path, tok, n_dist: int) -> None:
        source = work / "distill" / self.mix["source"]
        stream, self.dmeta = pack_distill(work, self.role, tok, source, "train",
                                          greedy_only=self.mix.get("greedy_only", False),
                                          docstrings_only=self.mix.get("docstrings_only", False))
        self.dist = Windows(stream, self.hp["seq"], n_dist, self.args.seed + 1)
        saved = self.state.get("data_distill")
        if saved and saved.get("key") == self.dmeta["key"]:
            self.dist.load_state_dict(saved)
        elif saved:
            log("the distillation texts changed since the last run: their order starts afresh")
        self.mix["samples"], self.mix["tokens"] = self.dmeta["samples"], self.dmeta["tokens"]

    def _open_labeler(self, tok) -> None:
        from soft_labels import SoftLabeler

        soft = self.soft
        self.labeler = SoftLabeler(soft["target"], tok, self.device, bf16=self.device.startswith("cuda"),
                                   temperature=soft.get("temperature", 1.0), positions=soft.get("where", "aligned"))
        log(f"soft labels from {soft['target']} at T={soft.get('temperature', 1.0):g} at the {self.labeler.positions} "
            f"positions on {soft['windows']} windows a "
            f"step, weight {soft['weight']}" + ("" if self.role == "target" else
            f" ({self.labeler.exact} of its tokens are drafter tokens; the rest map to their first drafter piece)"))

    def checkpoint(self) -> None:
        self.state.update(model={k: v.detach().to("cpu", torch.float32) for k, v in self.model.state_dict().items()},
                          optimizer=self.opt.state_dict(), data=self.train.state_dict())
        if self.dist is not None:
            self.state["data_distill"] = dict(self.dist.state_dict(), key=self.dmeta["key"])
        save_checkpoint(self.ckpt_path, self.state)

    def loss(self) -> tuple[torch.Tensor, int]:
        """This step's loss and the tokens it read. Whether it is an unlikelihood step, and its prompts, follow from
        the step number, so a resumed run does the same."""
        from train_common import autocast_ctx

        gen = torch.Generator().manual_seed(self.args.seed * 1_000_003 + self.state["totals"]["steps"])
        ul, soft = self.ul, self.soft
        if ul and float(torch.rand(1, generator=gen)) < ul["share"]:
            loss, repeats, n = unlikelihood_loss(self.model, self.train.stream, gen, self.device, ul)
            ul["steps"] += 1
            ul["repeat_share"] = repeats if ul["repeat_share"] is None else 0.9 * ul["repeat_share"] + 0.1 * repeats
            return loss, n
        x = self.train.next_batch()
        if self.dist is not None:
            x = torch.cat([self.dist.next_batch(), x])
        x = x.to(self.device)
        if self.labeler is not None:  # the target reads the first windows; its labels join the text's
            idx, y, share = self.labeler.labels(x[:soft["windows"]])
            if soft.get("inside_weight", 1.0) != 1.0 and self.labeler.last_aligned.numel():
                y = torch.where(self.labeler.last_aligned[:, None].to(y.device), y, soft["inside_weight"] * y)
        with autocast_ctx(self.device):
            logits = self.model(input_ids=x[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
        if self.labeler is not None and idx.numel():
            from soft_labels import soft_loss

            ls = soft_loss(logits, idx, y)
            loss = (1 - soft["weight"]) * loss + soft["weight"] * ls
            soft["positions"] += idx.numel()
            soft["share"] = share if soft.get("share") is None else 0.98 * soft["share"] + 0.02 * share
            soft["loss"] = ls.item() if soft.get("loss") is None else 0.98 * soft["loss"] + 0.02 * ls.item()
        return loss, x[:, 1:].numel()

    def step(self) -> float:
        """One optimizer step; returns its loss."""
        seg, totals = self.seg, self.state["totals"]
        t_step = time.time()
        lr = segment_lr(seg, seg.get("peak_lr", self.hp["lr"]))
        for group in self.opt.param_groups:
            group["lr"] = lr
        loss, n = self.loss()
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        dt = time.time() - t_step
        seg["steps_done"] += 1
        seg["seconds_done"] += dt
        seg["tokens_done"] += n
        totals["steps"] += 1
        totals["tokens"] += n
        totals["seconds"] += dt
        self.lr, lv = lr, loss.item()
        self.ema = lv if self.ema is None else 0.98 * self.ema + 0.02 * lv
        return lv

    def log_progress(self, lv: float) -> None:
        seg, soft, ul = self.seg, self.soft, self.ul
        log(f"{self.role}: step {self.state['totals']['steps']} loss {lv:.3f} (ema {self.ema:.3f}) lr {self.lr:.2e} "
            f"{seg['tokens_done'] / max(seg['seconds_done'], 1e-9):.0f} tok/s; segment "
            f"{seg['seconds_done'] / 60:.1f} min; total {self.state['totals']['tokens']:,} tokens"
            + (f"; soft-label loss {soft['loss']:.3f} on {soft['share']:.0%} of the positions read"
               if soft and soft.get("loss") is not None else "")
            + (f"; {ul['steps']} unlikelihood steps, repeated-4-gram share of greedy text "
               f"{ul['repeat_share']:.3f}" if ul and ul["repeat_share"] is not None else ""))

    def quick_eval(self) -> None:
        ev = heldout_loss(self.model, self.held, None, self.hp["seq"], self.device, bf16=True, max_windows=64)
        if self.labeler is not None:
            from soft_labels import heldout_soft_loss

            ev["soft_label_ce"] = heldout_soft_loss(self.model, self.labeler, self.held, self.hp["seq"], self.device,
                                                    max_windows=32)["soft_ce"]
        if self.dist_held is not None:
            ev["target_text_nats_per_token"] = heldout_loss(self.model, self.dist_held, None, self.hp["seq"],
                                                            self.device, bf16=True, max_windows=64)["nats_per_token"]
        ev.update(step=self.state["totals"]["steps"], trained_tokens=self.state["totals"]["tokens"],
                  train_ema=round(self.ema, 4))
        self.state["evals"].append(ev)
        log(f"{self.role}: quick held-out eval {ev}")

    def run(self, stop) -> None:
        """Steps until the segment is done, a signal asks to stop, or ``--for-steps``/``--for-minutes`` is spent."""
        args, seg = self.args, self.seg
        torch.manual_seed(args.seed + self.state["totals"]["steps"])
        last_ckpt = last_print = last_eval = now_start = time.time()
        now_steps = 0

        def enough_for_now() -> bool:
            return ((args.for_steps is not None and now_steps >= args.for_steps)
                    or (args.for_minutes is not None and time.time() - now_start >= args.for_minutes * 60))

        while not segment_finished(seg) and not stop.requested and not enough_for_now():
            now_steps += 1
            lv = self.step()
            now = time.time()
            if now - last_print > 60:
                self.log_progress(lv)
                last_print = now
            if now - last_eval > args.eval_minutes * 60:
                self.quick_eval()
                last_eval = time.time()
            if now - last_ckpt > args.checkpoint_minutes * 60:
                self.checkpoint()
                last_ckpt = time.time()

    def finish(self, heldout_chars: int) -> None:
        """The finished segment's full held-out evaluation, recorded in the totals' sessions."""
        seg, device, seq = self.seg, self.device, self.hp["seq"]
        ev = heldout_loss(self.model, self.held, heldout_chars, seq, device, bf16=False)
        if self.dist_held is not None:
            ev["target_text_nats_per_token"] = heldout_loss(self.model, self.dist_held, None, seq, device,
                                                            bf16=False)["nats_per_token"]
        seg.update(finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"), heldout=ev)
        self.state["segments"].append(seg)
        self.state["totals"]["sessions"].append(dict(
            what="resume segment", steps=seg["steps_done"], tokens=seg["tokens_done"],
            seconds=round(seg["seconds_done"], 1), command=seg["command"], finished=seg["finished"], heldout=ev))
        log(f"{self.role}: segment finished; held-out {ev}")


def resume(args) -> int:
    work, role = Path(args.work).expanduser(), args.role
    init_dir = Path(args.init or ROOT / "assets" / "tiny-code" / role)
    ckpt_path = work / "ckpt" / f"{role}.pt"
    torch.set_num_threads(args.threads)
    model, tok = load_init(init_dir, role, args.seed)
    data = prepare_data(work, role, tok)
    state = _load_state(args, role, init_dir, ckpt_path, model)
    state.setdefault("hyper", dict(HYPER[role]))
    if args.status:
        print(json.dumps({k: v for k, v in state.items() if k not in ("model", "optimizer")}, indent=1, default=str))
        return 0
    model.to(args.device).train()
    opt = make_optimizer(model, state["hyper"]["lr"])
    if state["optimizer"] is not None:
        opt.load_state_dict(state["optimizer"])
    if segment_finished(state["segment"]):
        if not (args.minutes or args.steps):
            log("no unfinished segment; pass --minutes or --steps to train more")
            return 0
        state["segment"] = _new_segment(args, role, tok, work, state["hyper"])
    else:
        _note_unused_flags(args, state["segment"])
    segment = Segment(args, work, role, tok, model, opt, state, ckpt_path)
    segment.run(Stop())
    if segment_finished(state["segment"]):
        segment.finish(data["heldout"]["chars"])
    segment.checkpoint()
    log(f"{role}: checkpoint written to {ckpt_path} ({state['totals']['tokens']:,} tokens in "
        f"{state['totals']['seconds'] / 60:.1f} min of training in all)")
    return 0


def _digest(model) -> str:
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        h.update(k.encode() + v.detach().to(torch.float16).numpy().tobytes())
    return h.hexdigest()[:16]


def cached_heldout(work: Path, role: str, model, stream, chars, seq, split: str = "heldout") -> dict:
    """Full held-out loss of ``model`` (float32) on ``stream``, the packed ``split``, cached in WORK by weights
    digest."""
    cache_path = work / "ckpt" / f"{role}-evals.json"
    cache = json.loads(cache_path.read_text()) if cache_path.is_file() else {}
    key = f"{_digest(model)}:{seq}:{stream.numel()}" + ("" if split == "heldout" else f":{split}")
    if key not in cache:
        cache[key] = heldout_loss(model, stream, chars, seq, "cpu", bf16=False)
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        cache_path.write_text(json.dumps(cache, indent=1) + "\n")
    return cache[key]


def checkpoint_model(state: dict, out_dir: Path, role: str):
    """The checkpoint's weights in a model of *its* shape, and the growth steps that led to it.

    The shape is the shipped model's unless the checkpoint started from another folder (``resume --init``,
    e.g. one written by ``train_pair.py grow``): then that folder's configuration, so that a grown target
    exports over the shallower shipped one. The growth record is read from ``train_log.json`` beside it."""
    init = Path(str(state.get("init", "")))
    arch = init if init.name and (init / "config.json").is_file() else out_dir
    model, _ = load_init(arch, role)
    try:
        model.load_state_dict(state["model"])
    except RuntimeError as exc:
        raise SystemExit(f"the checkpoint's weights do not fit the model in {arch} ({str(exc).splitlines()[0]}); "
                         f"if it started from another folder with `resume --init`, that folder is needed") from None
    log_path = arch.parent / "train_log.json"
    grown = json.loads(log_path.read_text()).get("grown", []) if arch != out_dir and log_path.is_file() else []
    return model, grown


def export(args) -> int:
    """Write the checkpoint as the shipped float16 model if it beats the shipped one on held-out text."""
    from train_common import round_to_fp16_, sample_completions, save_model_dir
    from model_card import write_resumed_card

    work, role = Path(args.work).expanduser(), args.role
    out_dir = Path(args.out) / role
    ckpt_path = work / "ckpt" / f"{role}.pt"
    if not ckpt_path.is_file():
        raise SystemExit(f"no checkpoint at {ckpt_path}: run `train_pair.py resume --role {role}` first")
    torch.set_num_threads(args.threads)
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    # a FRESH role exported for the first time is compared with the fresh weights it started from
    first_export = role in FRESH and not (out_dir / "config.json").is_file()
    # a DERIVED role exported for the first time is compared with the base role's weights it continued
    derived_from = own_weights(out_dir, role) if role in DERIVED else None
    derived_from = derived_from if derived_from != out_dir else None
    shipped, tok = load_init(out_dir, role, state.get("seed", 1234))
    data = prepare_data(work, role, tok)
    held = load_stream(work / "packed" / f"{role}-heldout.u16")
    seq, chars = state["hyper"]["seq"], data["heldout"]["chars"]
    model, grown = checkpoint_model(state, out_dir, role)
    round_to_fp16_(model)
    new = cached_heldout(work, role, model, held, chars, seq)
    old = cached_heldout(work, role, shipped, held, chars, seq)
    log(f"{role} held-out bits/char: checkpoint (float16) {new['bits_per_char']}, shipped {old['bits_per_char']}")
    better = new["nats_per_token"] < old["nats_per_token"]
    if args.distill_from and role != "target":
        # a drafter is as good as its imitation of the target it serves: score both on that target's
        # greedy continuations of held-out prompts (what decides acceptance), not on the corpus
        source = distill_dir(work, Path(args.distill_from))
        if not (source / "heldout.jsonl").is_file():
            raise SystemExit(f"no held-out target text in {source}: run `train_pair.py distill --target "
                             f"{args.distill_from}` first")
        text = pack_distill(work, role, tok, source, "heldout")[0]
        new["target_text_nats_per_token"] = heldout_loss(model, text, None, seq, "cpu", bf16=False)["nats_per_token"]
        old["target_text_nats_per_token"] = heldout_loss(shipped, text, None, seq, "cpu", bf16=False)["nats_per_token"]
        log(f"{role} on the target's held-out text (nats/token): checkpoint {new['target_text_nats_per_token']}, "
            f"shipped {old['target_text_nats_per_token']}")
        better = new["target_text_nats_per_token"] < old["target_text_nats_per_token"]
    if args.distill_logits and role != "target":
        # a drafter trained on the target's distribution: score both on it, at the held-out split's labelled positions
        from soft_labels import SoftLabeler, heldout_soft_loss

        labeler = SoftLabeler(args.distill_logits, tok, temperature=args.soft_temperature,
                              positions=args.soft_positions)
        new["soft_label"] = heldout_soft_loss(model, labeler, held, seq, max_windows=256)
        old["soft_label"] = heldout_soft_loss(shipped, labeler, held, seq, max_windows=256)
        log(f"{role} against {args.distill_logits}'s soft labels on held-out text (nats per labelled position): "
            f"checkpoint {new['soft_label']['soft_ce']}, shipped {old['soft_label']['soft_ce']} "
            f"(the labels' entropy {new['soft_label']['entropy']})" + (
                f"; aligned positions {new['soft_label']['soft_ce_aligned']} against "
                f"{old['soft_label']['soft_ce_aligned']}, inside a target token {new['soft_label']['soft_ce_inside']} "
                f"against {old['soft_label']['soft_ce_inside']}" if "soft_ce_inside" in new["soft_label"] else ""))
        better = new["soft_label"]["soft_ce"] < old["soft_label"]["soft_ce"]
    if not better and not args.force:
        log("the checkpoint is not better than the shipped weights: nothing written (--force to write anyway)")
        return 1
    stdlib = build_stdlib_heldout(work, tok, role)
    stdlib_eval = heldout_loss(model, stdlib["stream"], stdlib["chars"], seq, "cpu", bf16=False)
    card_path = out_dir / "README.md"
    previous_card = card_path.read_text() if card_path.is_file() else ""
    save_model_dir(model, tok, out_dir)
    model, _ = load_init(out_dir)
    samples = sample_completions(model.eval(), tok, args.sample_tokens)
    record = dict(role=role, totals=state["totals"], segments=state["segments"], blends=state.get("blends", []),
                  hyper=state["hyper"],
                  heldout=new, heldout_stdlib=stdlib_eval, heldout_stdlib_files=stdlib["files"],
                  previous_heldout=old, previous_label=("the untrained initial weights" if first_export else
                                  f"{derived_from.name}, the weights it continued" if derived_from else None),
                  manifest=data["manifest"], samples=samples, grown=grown,
                  params=sum(p.numel() for p in model.parameters()), exported=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    write_resumed_card(card_path, model.config, tok, record, previous_card)
    logf = Path(args.out) / "train_log.json"
    run = json.loads(logf.read_text()) if logf.is_file() else {}
    run.setdefault(role, {})
    run[role]["totals"] = state["totals"]
    run[role]["resumed"] = {k: v for k, v in record.items() if k not in ("manifest", "totals")}
    logf.write_text(json.dumps(run, indent=1) + "\n")
    manifest = {k: v for k, v in data["manifest"].items()}
    (Path(args.out) / "corpus.json").write_text(json.dumps(manifest, indent=1) + "\n")
    log(f"wrote {out_dir} (held-out {new['bits_per_char']} bits/char, stdlib held-out "
        f"{stdlib_eval.get('bits_per_char')}), its model card, train_log.json and corpus.json")
    return 0


def snapshot(args) -> int:
    """The checkpoint's weights as a float16 model folder, ``--out``/ROLE, written without judging them, and what
    they are beside them (``training.json``: the totals, the segments, the quick held-out evaluations): what another
    session continues from with ``resume --init OUT/ROLE`` when the work folder is gone (a machine lent for one
    session keeps nothing). The optimizer's moments are not kept, so the next segment warms up again; the held-out
    comparison with the shipped weights and the model card are ``export``'s, once training is done."""
    from train_common import round_to_fp16_, save_model_dir

    work, role = Path(args.work).expanduser(), args.role
    ckpt_path = work / "ckpt" / f"{role}.pt"
    if not ckpt_path.is_file():
        raise SystemExit(f"no checkpoint at {ckpt_path}: run `train_pair.py resume --role {role}` first")
    if args.out == str(ROOT / "assets" / "tiny-code"):
        raise SystemExit("snapshot writes unjudged weights: give --out a folder outside the shipped pair "
                         "(export replaces the shipped weights once they are better)")
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    init = Path(str(state.get("init") or ROOT / "assets" / "tiny-code" / role))
    model, grown = checkpoint_model(state, init, role)
    tok = load_init(init, role, state.get("seed", 1234))[1]
    round_to_fp16_(model)
    out_dir = Path(args.out) / role
    save_model_dir(model, tok, out_dir)
    record = dict(role=role, totals=state["totals"], segments=state["segments"], hyper=state["hyper"],
                  quick_evals=state.get("evals", [])[-20:], grown=grown, started_from=str(init),
                  segment_finished=segment_finished(state["segment"]),
                  written=time.strftime("%Y-%m-%dT%H:%M:%S%z"))
    (out_dir / "training.json").write_text(json.dumps(record, indent=1, default=str) + "\n")
    log(f"wrote {out_dir}: {state['totals']['tokens']:,} tokens trained in all; continue with "
        f"`train_pair.py resume --role {role} --init {out_dir} --minutes M` in a fresh work folder")
    return 0


def blend(args) -> int:
    """Move the checkpoint's weights a share of the way toward another checkpoint of the same model.

    Weight interpolation between a fine-tuned model and the weights it was fine-tuned from (WiSE-FT, Wortsman
    et al., CVPR 2022) trades the fine-tune's effect against what it cost: here, how much less the target's
    greedy text loops (an unlikelihood segment) against how much its held-out loss rose. The result is scored on
    the whole held-out split (cached for ``export``), recorded in the totals' sessions, and the optimizer state
    is dropped (its moments belong to neither end); a later ``resume`` starts a new segment from the blend."""
    from train_common import round_to_fp16_

    work, role = Path(args.work).expanduser(), args.role
    ckpt_path = work / "ckpt" / f"{role}.pt"
    if not args.blend_with:
        raise SystemExit("blend needs --with CKPT: the other checkpoint of the same model to move toward")
    other_path = Path(args.blend_with).expanduser()
    for path in (ckpt_path, other_path):
        if not path.is_file():
            raise SystemExit(f"no checkpoint at {path}: blend mixes two `resume` checkpoints (ckpt/{role}.pt)")
    if args.share is None or not 0 < args.share < 1:
        raise SystemExit("--share is the weight (0 < S < 1) of the --with checkpoint in the blend: 0.3 keeps 70% "
                         "of this checkpoint's weights")
    torch.set_num_threads(args.threads)
    state = torch.load(ckpt_path, map_location="cpu", weights_only=False)
    other = torch.load(other_path, map_location="cpu", weights_only=False)
    if not segment_finished(state["segment"]):
        raise SystemExit(f"{ckpt_path} has an unfinished segment: finish it with `resume` before blending")
    mine, theirs = state["model"], other["model"]
    if mine.keys() != theirs.keys() or any(mine[k].shape != theirs[k].shape for k in mine):
        raise SystemExit(f"{other_path} is not a checkpoint of the same model shape as {ckpt_path}")
    share = args.share
    state["model"] = {k: mine[k] * (1 - share) + theirs[k] * share if mine[k].is_floating_point() else mine[k]
                      for k in mine}
    state["optimizer"] = None
    # compute the other checkpoint trained on its own (sessions this one has not): added to the totals
    def key(s):
        return tuple(s.get(k) for k in ("command", "finished", "steps", "tokens", "seconds"))

    seen = {key(s) for s in state["totals"]["sessions"]}
    extra = [dict(s, what=f"{s.get('what')} (blended in)") for s in other["totals"]["sessions"] if key(s) not in seen]
    for s in extra:
        state["totals"]["tokens"] += s.get("tokens", 0)
        state["totals"]["seconds"] += s.get("seconds", 0)
        state["totals"]["steps"] += s.get("steps", 0)
    tok = load_init(Path(args.init or ROOT / "assets" / "tiny-code" / role), role)[1]
    data = prepare_data(work, role, tok)
    model, _ = checkpoint_model(state, Path(args.out) / role, role)
    round_to_fp16_(model)
    ev = cached_heldout(work, role, model, load_stream(work / "packed" / f"{role}-heldout.u16"),
                        data["heldout"]["chars"], state["hyper"]["seq"])
    finished = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    record = dict(what=f"blend: {1 - share:.0%} these weights, {share:.0%} {other_path}", steps=0, tokens=0,
                  seconds=0.0, command="python " + " ".join(sys.argv), finished=finished, heldout=ev,
                  share=share, other=str(other_path), other_tokens=other["totals"]["tokens"])
    state["totals"]["sessions"] += [*extra, record]
    state.setdefault("blends", []).append(record)
    save_checkpoint(ckpt_path, state)
    log(f"{role}: blended {share:.0%} of {other_path} into {ckpt_path}; held-out {ev}")
    return 0


def build_stdlib_heldout(work: Path, tok, role: str) -> dict:
    """The held-out files from the standard library only: comparable with the first pair's number."""
    import build_corpus

    split = work / "corpus" / "heldout_files.jsonl"  # a corpus with held-out packages keeps the files apart
    split = split if split.is_file() else work / "corpus" / "heldout.jsonl"
    docs = [d for d in build_corpus.read_jsonl(split) if d["source"] == "stdlib"]
    ids = []
    for enc in tok.backend_tokenizer.encode_batch([d["text"] for d in docs], add_special_tokens=False):
        ids += ([tok.bos_token_id] if bos_first(role) else []) + enc.ids + [tok.eos_token_id]
    return dict(stream=torch.tensor(ids, dtype=torch.long), chars=sum(len(d["text"]) for d in docs),
                files=[d["path"] for d in docs])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="train_pair.py resume", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--role", choices=sorted(HYPER), default="target")
    ap.add_argument("--work", default="~/.cache/hsd-train", help="corpus, packed data and checkpoints")
    ap.add_argument("--init", default=None, help="weights to start from without a checkpoint (default: the shipped ones)")
    ap.add_argument("--minutes", type=float, default=None, help="length of a new segment, in minutes of training")
    ap.add_argument("--steps", type=int, default=None, help="length of a new segment, in optimizer steps")
    ap.add_argument("--warmup", type=int, default=50, help="warmup steps of a new segment")
    ap.add_argument("--for-steps", type=int, default=None,
                    help="stop this run after N steps, leaving the segment to the next resume")
    ap.add_argument("--for-minutes", type=float, default=None,
                    help="stop this run after M wall minutes, leaving the segment to the next resume")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--checkpoint-minutes", type=float, default=5.0)
    ap.add_argument("--eval-minutes", type=float, default=10.0)
    ap.add_argument("--status", action="store_true", help="print the checkpoint's totals and segments, then exit")
    ap.add_argument("--out", default=str(ROOT / "assets" / "tiny-code"),
                    help="export: the pair folder to update; snapshot: where ROLE/ goes (not the shipped pair)")
    ap.add_argument("--force", action="store_true", help="export even if the held-out loss is not lower")
    ap.add_argument("--sample-tokens", type=int, default=96, help="export: new tokens per model-card sample")
    ap.add_argument("--distill-from", default=None, metavar="TARGET_DIR",
                    help="resume (drafters): mix the texts `distill` generated with this target into each batch; "
                         "export (drafters): score on that target's held-out continuations")
    ap.add_argument("--unlikelihood", type=float, default=None, metavar="FRAC",
                    help="resume (target): share of a new segment's steps that are sequence-level unlikelihood "
                         "steps against repeated 4-grams in greedy text")
    ap.add_argument("--unlikelihood-tokens", type=int, default=None, metavar="N",
                    help=f"resume (target): greedy tokens per unlikelihood continuation (default "
                         f"{UNLIKELIHOOD['continuation']}; pair_goals.py judges 96)")
    ap.add_argument("--unlikelihood-prefix", type=int, default=None, metavar="N",
                    help=f"resume (target): corpus tokens before each unlikelihood continuation (default "
                         f"{UNLIKELIHOOD['prefix']})")
    ap.add_argument("--peak-lr", type=float, default=None, help="resume: a new segment's peak learning rate "
                    "(default: the role's)")
    ap.add_argument("--with", dest="blend_with", default=None, metavar="CKPT",
                    help="blend: the other checkpoint (e.g. WORK0/ckpt/target.pt, before an unlikelihood segment)")
    ap.add_argument("--share", type=float, default=None, help="blend: the weight of --with's weights (0 < S < 1)")
    ap.add_argument("--train-batch", type=int, default=None, metavar="N",
                    help="resume: windows per optimizer step in a new segment (default: the role's; a GPU "
                         "wants many more, e.g. 256)")
    ap.add_argument("--distill-mix", type=float, default=0.5, help="share of each drafter batch from target text")
    ap.add_argument("--distill-logits", default=None, metavar="TARGET_DIR",
                    help="resume, a drafter role: a new segment also trains on TARGET_DIR's next-token distribution, "
                         "carried into the drafter's vocabulary where both tokenizers cut (scripts/soft_labels.py); "
                         "--role target: on a teacher's with the same tokenizer, at every position; "
                         "export: score the checkpoint and the shipped drafter on it")
    ap.add_argument("--soft-weight", type=float, default=0.8, help="--distill-logits: the soft labels' share of the loss")
    ap.add_argument("--soft-temperature", type=float, default=1.0,
                    help="--distill-logits: the target's temperature the labels are taken at (0.7: the distribution "
                         "SLEM at T=0.7 samples, which a drafter for shared noise should match; it then drafts at "
                         "drafter temperature 1); export scores at the same temperature")
    ap.add_argument("--soft-positions", choices=("aligned", "all"), default="aligned",
                    help="--distill-logits: label only the positions where both tokenizers cut (aligned), or also "
                         "those inside a target token, with the target's distribution given the bytes already "
                         "written (all; scripts/soft_labels.py: the drafter learns them, and accepted less on the "
                         "embedded pair, docs/benchmarks.md); export scores on the same positions, and apart")
    ap.add_argument("--soft-inside-weight", type=float, default=1.0,
                    help="--soft-positions all: the labels inside a target token count this much of an aligned one")
    ap.add_argument("--soft-windows", type=int, default=16,
                    help="--distill-logits: windows of each batch the target reads (its forward is most of a step)")
    ap.add_argument("--distill-greedy", action="store_true",
                    help="resume (drafters): read only the continuations the target decoded greedily, to raise the "
                         "drafter's agreement with the target's argmax (what greedy SLEM and SLRS at T=0 accept on)")
    ap.add_argument("--distill-docstrings", action="store_true",
                    help="resume (drafters): read only the continuations of prompts that end where a function's "
                         "docstring does (`distill --function-prompts`), the shape of the evaluation prompts")
    ap.add_argument("--target", default=None, help="distill: the target whose continuations to write")
    ap.add_argument("--samples", type=int, default=None, help="distill: stop after this many new continuations")
    ap.add_argument("--batch", type=int, default=64, help="distill: prompts per generate call")
    ap.add_argument("--new-tokens", type=int, default=96, help="distill: target tokens per continuation")
    ap.add_argument("--greedy-frac", type=float, default=0.6, help="distill: share of batches decoded greedily "
                    "(the rest sample at temperature 1)")
    ap.add_argument("--function-prompts", type=float, default=0.0, metavar="FRAC",
                    help="distill: share of batches whose prompts end where a function's docstring ends, as the "
                         "evaluation prompts do (the rest are cut at random line starts)")
    ap.add_argument("--heldout-samples", type=int, default=128, help="distill: greedy held-out continuations")
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv and argv[0] in ("resume", "export", "distill", "blend", "snapshot") else "resume"
    args = ap.parse_args(argv)
    return dict(resume=resume, export=export, distill=distill, blend=blend, snapshot=snapshot)[command](args)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
