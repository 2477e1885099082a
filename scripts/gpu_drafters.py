"""Distil the embedded drafters on one GPU, in one run of under 9 minutes, from a bundle made here.

The drafters are what the speed goals of the embedded pair need (acceptance of the target's text); on a
2-core CPU a distillation set of 11k target continuations takes 90 minutes to write and a 40-minute drafter
segment reads it 7 times. On a GPU both are minutes. Three steps:

  # 1. here, on the CPU: a slim copy of the training work folder (the corpus slices the drafters mix in,
  #    the held-out streams, the distillation texts written so far), xz-compressed, at most ~25 MB
  python scripts/gpu_drafters.py pack --work ~/.cache/hsd-train --bundle .gpu/work.tar.xz

  # 2. on the GPU machine (the repository with .gpu/ beside it): target continuations for
  #    --distill-minutes, then a drafter segment of --train-minutes for each role, started from the
  #    shipped weights (the shipped float16 weights are enough to continue from); results in --out
  python scripts/gpu_drafters.py run --bundle .gpu/work.tar.xz --out gpu-out --device cuda

  # 3. here: the checkpoints into the work folder (the old ones kept as *.pre-gpu.pt), the new
  #    continuations appended to the distillation set; then export and measure as after any segment
  python scripts/gpu_drafters.py merge --results gpu-out --work ~/.cache/hsd-train
  python scripts/train_pair.py export --role drafter --work ~/.cache/hsd-train --distill-from assets/tiny-code/target
  python scripts/pair/pair_goals.py --prompts 8 --lookahead auto --costs

The drafter for sampling (`drafter-sampling`) trains on the target's soft labels at T = 0.7 (the labels' Python,
not the GPU, then sets a step's pace: `--soft-windows` of each step's windows are labelled):

  python scripts/gpu_drafters.py pack --work ~/.cache/hsd-train --roles drafter drafter-sampling --bundle .gpu/work.tar.xz
  python scripts/gpu_drafters.py run --bundle .gpu/work.tar.xz --out gpu-out --device cuda --distill-mix 0.875 \
      --soft drafter-sampling 0.7 --peak-lr 3e-4 --roles drafter-sampling
  python scripts/gpu_drafters.py merge --results gpu-out --work ~/.cache/hsd-train
  python scripts/train_pair.py export --role drafter-sampling --work ~/.cache/hsd-train \
      --distill-from assets/tiny-code/target --distill-logits assets/tiny-code/target --soft-temperature 0.7

The GPU machine needs the Python packages hsd needs (requirements.txt), offline. One that had transformers 5.17
(hsd imports `DummyLayer`, added later) ran it with transformers 5.25 and huggingface_hub 2.4 installed from
wheels carried along (`pip install --no-index --no-deps --target /tmp/site .whl/*.whl`, PYTHONPATH=/tmp/site) and
`USE_HUB_KERNELS=NO` (without the `kernels` package, transformers 5.25 refuses to load a model on CUDA otherwise).

Candidates of other shapes train beside the shipped drafters in the same run and come back as model folders:

  python scripts/gpu_drafters.py fresh --out cands/wide/drafter --layers 2 --hidden 384 --intermediate 1024 --heads 6
  python scripts/train_pair.py grow --from assets/tiny-code/drafter --layers 3 --out cands/deep3/drafter
  python scripts/gpu_drafters.py pack ... --candidate wide drafter cands/wide/drafter --candidate deep3 drafter cands/deep3/drafter
  python scripts/gpu_drafters.py run ... --max-return-mb 15        # at most 8 files come back
  python scripts/gpu_drafters.py merge ... --candidates-to cands-trained
  python scripts/pair/drafter_pair.py --old assets/tiny-code --new cands-trained/candidates/wide   # exact tau

Every step of `run` is `train_pair.py distill` or `train_pair.py resume` under a time limit that
interrupts it (SIGINT: the step checkpoints and stops), so a step cut short still leaves what it did.
The tests (tests/test_resumable.py, `-m slow`) run all three commands on the CPU with tiny models.
"""
from __future__ import annotations

import argparse
import json
import lzma
import random
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROLES = ("drafter", "drafter-bytes")
# windows per step on the GPU (the CPU segments take 32 x 256 and 16 x 512 tokens)
GPU_BATCH = {"drafter": 256, "drafter-bytes": 128, "drafter-shared": 256, "drafter-sampling": 256}
PART = 15 * 2**20  # result files are split below 16 MiB
NL = b"\n"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _slice(src: Path, dst: Path, max_bytes: int, seed: int) -> int:
    """A contiguous slice of at most ``max_bytes`` (whole uint16 tokens) from a random place in ``src``."""
    size = src.stat().st_size
    n = int(min(size, max_bytes)) // 2 * 2
    start = random.Random(seed).randrange(0, (size - n) // 2 + 1) * 2
    with src.open("rb") as f:
        f.seek(start)
        dst.write_bytes(f.read(n))
    return n


def pack(args) -> int:
    import build_corpus
    import resumable

    work = Path(args.work).expanduser()
    target = Path(args.target)
    digest = resumable.weights_digest(target)
    bundle = Path(args.bundle)
    with tempfile.TemporaryDirectory() as tmp:
        slim = Path(tmp) / "work"
        (slim / "corpus").mkdir(parents=True)
        shutil.copy2(work / "corpus" / "manifest.json", slim / "corpus")
        # the distill prompts are cut from corpus files: a random subset of the training files
        docs = list(build_corpus.read_jsonl(work / "corpus" / "train.jsonl"))
        random.Random(args.seed).shuffle(docs)
        with (slim / "corpus" / "train.jsonl").open("w", encoding="utf-8") as f:
            size = 0
            for d in docs:
                if size >= args.corpus_mb * 2**20:
                    break
                f.write(json.dumps(d, ensure_ascii=False) + "\n")
                size += len(d["text"])
        del docs
        (slim / "packed").mkdir()
        for role in args.roles:
            packed = work / "packed"
            if not (packed / f"{role}.json").is_file():
                raise SystemExit(f"{packed / role}.json is missing: run `train_pair.py resume --role {role}` here "
                                 f"once first (it packs the corpus)")
            shutil.copy2(packed / f"{role}.json", slim / "packed")  # same key: the slice is not repacked
            shutil.copy2(packed / f"{role}-heldout.u16", slim / "packed")
            n = _slice(packed / f"{role}-train.u16", slim / "packed" / f"{role}-train.u16", args.train_mb * 2**20,
                       args.seed)
            log(f"{role}: {n // 2:,} corpus tokens of {(packed / f'{role}-train.u16').stat().st_size // 2:,}")
        src = work / "distill" / digest
        if not (src / "heldout.jsonl").is_file():
            raise SystemExit(f"no distillation set of {target} in {src}: run `train_pair.py distill --target "
                             f"{target} --samples 64` here first (it writes the held-out continuations)")
        dst = slim / "distill" / digest
        dst.mkdir(parents=True)
        for name in ("heldout.jsonl", "meta.json"):
            shutil.copy2(src / name, dst)
        # the texts written so far, up to --texts-mb (a GPU writes as many again in minutes)
        included, size = 0, 0
        (src / "train.jsonl").touch()  # a distill run killed before its first batch wrote none
        with (src / "train.jsonl").open("rb") as fin, (dst / "train.jsonl").open("wb") as fout:
            for line in fin:
                if size + len(line) > args.texts_mb * 2**20:
                    break
                fout.write(line)
                included, size = included + 1, size + len(line)
        candidates = {}
        for name, role, folder in args.candidate or []:
            if role not in args.roles:
                raise SystemExit(f"--candidate {name}: role {role!r} is not packed; add it to --roles "
                                 f"(now {' '.join(args.roles)})")
            if not (Path(folder) / "config.json").is_file():
                raise SystemExit(f"--candidate {name}: {folder} holds no model (make one with `gpu_drafters.py fresh`)")
            shutil.copytree(folder, slim / "candidates" / name / role)
            candidates[name] = role
        (slim / "bundle.json").write_text(json.dumps(dict(
            digest=digest, target=str(target), roles=list(args.roles), source=str(work), old_samples=included,
            source_samples=resumable._count_lines(src / "train.jsonl"),
            source_meta=json.loads((src / "meta.json").read_text()), candidates=candidates,
            made=time.strftime("%Y-%m-%dT%H:%M:%S%z"), command="python " + " ".join(sys.argv)), indent=1) + "\n")
        bundle.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(bundle, "w:xz", preset=1) as tar:
            tar.add(slim, arcname="work")
    log(f"{bundle}: {bundle.stat().st_size / 2**20:.1f} MiB")
    return 0


def _steps(limit: float, cmds: dict[str, list[str]]) -> dict[str, int]:
    """Run train_pair.py commands side by side (one GPU holds several tiny models: each alone is bound by
    kernel launches, not by the GPU); SIGINT at ``limit`` seconds (each checkpoints), SIGKILL 20 s later."""
    procs = {}
    for name, cmd in cmds.items():
        log("$ " + " ".join(cmd) + f"   (limit {limit:.0f} s)")
        procs[name] = subprocess.Popen(cmd)
    deadline = time.time() + limit
    status = {}
    for name, proc in procs.items():
        try:
            status[name] = proc.wait(timeout=max(0.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            log(f"{name}: time limit: interrupting (it checkpoints)")
            proc.send_signal(signal.SIGINT)
            try:
                status[name] = proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                status[name] = proc.wait()
    return status


def candidate_work(work: Path, name: str, role: str) -> Path:
    """A work folder of its own for a candidate drafter (its checkpoint and its packed distillation texts),
    sharing the corpus, the distillation set and the role's packed corpus with ``work``."""
    folder = work / f"candidate-{name}"
    if not folder.is_dir():
        (folder / "packed").mkdir(parents=True)
        for sub in ("corpus", "distill"):
            (folder / sub).symlink_to(work / sub)
        for f in (work / "packed").glob(f"{role}*"):
            if f.name in (f"{role}.json", f"{role}-train.u16", f"{role}-heldout.u16"):
                (folder / "packed" / f.name).symlink_to(f)
    return folder


def _jobs(args, work: Path, info: dict, target: Path, tp: list[str]) -> dict[str, list[str]]:
    """The drafter segments to run side by side: one per role, and one per candidate the bundle carries."""
    soft = {role: float(t) for role, t in args.soft or []}

    def soft_args(role: str) -> list[str]:  # the target's soft labels at the role's temperature (scripts/soft_labels.py)
        if role not in soft:
            return []
        return ["--distill-logits", str(target), "--soft-temperature", str(soft[role]), "--soft-positions",
                args.soft_positions, "--soft-windows", str(args.soft_windows), "--soft-weight", str(args.soft_weight)]

    def segment(role: str, folder: Path, init: Path | None) -> list[str]:
        return tp + ["resume", "--role", role, "--work", str(folder), *([] if init is None else ["--init", str(init)]),
                     "--device", args.device, "--threads", str(args.threads), "--distill-from", str(target),
                     "--distill-mix", str(args.distill_mix), "--minutes", str(args.train_minutes), "--train-batch",
                     str(args.train_batch or GPU_BATCH[role]), "--eval-minutes", "0.5", "--checkpoint-minutes", "100",
                     *([] if args.peak_lr is None else ["--peak-lr", str(args.peak_lr)]), *soft_args(role)]

    roles = info["roles"] if args.roles is None else args.roles
    jobs = {role: segment(role, work, None if args.init is None else Path(args.init) / role) for role in roles}
    for name, role in info.get("candidates", {}).items():
        jobs[f"candidate {name}"] = segment(role, candidate_work(work, name, role), work / "candidates" / name / role)
    return jobs


def _return_candidates(info: dict, work: Path, out: Path) -> None:
    """Each candidate as a float16 model folder (not a checkpoint: what comes back is limited), tarred in parts."""
    import torch

    import resumable
    from train_common import save_model_dir

    with tempfile.TemporaryDirectory() as tmp:
        for name, role in info["candidates"].items():
            ckpt = candidate_work(work, name, role) / "ckpt" / f"{role}.pt"
            if ckpt.is_file():
                state = torch.load(ckpt, map_location="cpu", weights_only=False)
                model, tok = resumable.load_init(work / "candidates" / name / role)
                model.load_state_dict(state["model"])
                save_model_dir(model, tok, Path(tmp) / name / role)
                (Path(tmp) / name / "segment.json").write_text(json.dumps(
                    {k: v for k, v in state.items() if k not in ("model", "optimizer")}, indent=1, default=str))
        archive = out / "candidates.tar"
        with tarfile.open(archive, "w") as tar:
            tar.add(tmp, arcname="candidates")
    data = archive.read_bytes()
    archive.unlink()
    for k in range(0, len(data), PART):
        (out / f"candidates.tar.{k // PART:02d}").write_bytes(data[k:k + PART])


def _return_distill(args, info: dict, work: Path, out: Path) -> tuple[bytes, bytes]:
    """The new continuations, xz-compressed in parts, at most ``--max-return-mb`` (whole batches are not tracked
    here, so the meta's counts are set to what is returned); returns the text and its compressed form."""
    folder = work / "distill" / info["digest"]
    with (folder / "train.jsonl").open("rb") as f:
        lines = [line for i, line in enumerate(f) if i >= info["old_samples"]]
    cap = args.max_return_mb * 2**20
    new = b"".join(lines)
    ratio = len(lzma.compress(new[:8 << 20], preset=1)) / max(1, len(new[:8 << 20]))  # estimated on 8 MB
    while True:
        if len(new) * ratio > 0.95 * cap:
            lines = lines[:int(len(lines) * 0.9 * cap / (len(new) * ratio))]
            new = b"".join(lines)
        packed = lzma.compress(new, preset=1)
        if len(packed) <= cap or not lines:
            break
        ratio = len(packed) / len(new)
    meta = json.loads((folder / "meta.json").read_text())
    kept = info["old_samples"] + len(lines)
    if kept < meta["samples"]:
        log(f"returning {len(lines):,} of {meta['samples'] - info['old_samples']:,} new continuations "
            f"(--max-return-mb {args.max_return_mb})")
        meta["returned_samples_of"] = meta["samples"]
        run_tokens = meta["runs"][-1]["generated_tokens"]  # the GPU run's; the dropped rows' share estimated
        meta["generated_tokens"] -= round(run_tokens * (1 - len(lines) / (meta["samples"] - info["old_samples"])))
        meta["samples"] = kept
    for k in range(0, max(1, len(packed)), PART):
        (out / f"distill-new.jsonl.xz.{k // PART:02d}").write_bytes(packed[k:k + PART])
    (out / "distill-meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    return new, packed


def run(args) -> int:
    """On the GPU machine: unpack the bundle, distill, train the drafters side by side, and write what comes back
    (checkpoints, candidates, new continuations, run.json) under ``--out``."""
    import torch

    import resumable

    t0 = time.time()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = Path(args.scratch or tempfile.mkdtemp(prefix="hsd-gpu-"))
    with tarfile.open(args.bundle) as tar:
        tar.extractall(base, filter="data")
    work = base / "work"
    info = json.loads((work / "bundle.json").read_text())
    target = ROOT / "assets" / "tiny-code" / "target" if args.target is None else Path(args.target)
    if resumable.weights_digest(target) != info["digest"]:
        raise SystemExit(f"{target} is not the target the bundle's distillation set came from ({info['target']}); "
                         f"pack again with this one")
    if args.device.startswith("cuda"):
        log(f"torch {torch.__version__}, GPU: {torch.cuda.get_device_name() if torch.cuda.is_available() else None}")
    tp = [sys.executable, str(ROOT / "scripts" / "train_pair.py")]
    status = _steps(args.distill_minutes * 60 + 60, {"distill": tp + [
        "distill", "--work", str(work), "--target", str(target), "--device", args.device, "--threads",
        str(args.threads), "--batch", str(args.distill_batch), "--minutes", str(args.distill_minutes),
        "--samples", str(args.distill_samples)]})
    status.update(_steps(args.train_minutes * 60 + 120, _jobs(args, work, info, target, tp)))
    for role in info["roles"] if args.roles is None else args.roles:
        ckpt = work / "ckpt" / f"{role}.pt"
        if ckpt.is_file():
            shutil.copy2(ckpt, out / f"{role}.pt")
    if info.get("candidates"):
        _return_candidates(info, work, out)
    new, packed = _return_distill(args, info, work, out)
    (out / "run.json").write_text(json.dumps(dict(
        bundle=info, status=status, seconds=round(time.time() - t0, 1), new_samples=new.count(NL),
        device=args.device, command="python " + " ".join(sys.argv)), indent=1) + "\n")
    log(f"done in {time.time() - t0:.0f} s: {status}; {new.count(NL):,} new continuations, "
        f"{len(packed) / 2**20:.1f} MiB compressed")
    return 0 if all(s in (0, -2, 130) for s in status.values()) else 1


def merge(args) -> int:
    import resumable

    res, work = Path(args.results), Path(args.work).expanduser()
    run_info = json.loads((res / "run.json").read_text())
    info = run_info["bundle"]
    folder = work / "distill" / info["digest"]
    have = resumable._count_lines(folder / "train.jsonl")
    expected = info.get("source_samples", info["old_samples"])
    if have != expected:
        raise SystemExit(f"{folder / 'train.jsonl'} has {have} continuations, the bundle was made with "
                         f"{expected}: merging would misnumber the batches; make a new bundle")
    parts = sorted(res.glob("distill-new.jsonl.xz.*"))
    new = lzma.decompress(b"".join(p.read_bytes() for p in parts))
    with (folder / "train.jsonl").open("ab") as f:
        f.write(new)
    # the meta: this folder's, plus what the GPU run added (batches are numbered on from the bundle's)
    device_meta = json.loads((res / "distill-meta.json").read_text())
    before = info.get("source_meta") or json.loads((folder / "meta.json").read_text())
    meta = json.loads((folder / "meta.json").read_text())
    meta.update(batches=device_meta["batches"], samples=have + new.count(NL),
                generated_tokens=meta["generated_tokens"] + device_meta["generated_tokens"] - before["generated_tokens"],
                seconds=meta["seconds"] + device_meta["seconds"] - before["seconds"],
                runs=meta["runs"] + device_meta["runs"][len(before["runs"]):])
    if "returned_samples_of" in device_meta:
        meta["runs"][-1]["returned_samples"] = new.count(NL)
    (folder / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    log(f"{folder}: {new.count(NL):,} continuations appended ({have + new.count(NL):,} in all)")
    parts = sorted(res.glob("candidates.tar.*"))
    if parts:
        import io

        dest = Path(args.candidates_to)
        with tarfile.open(fileobj=io.BytesIO(b"".join(p.read_bytes() for p in parts))) as tar:
            tar.extractall(dest, filter="data")
        log(f"candidate drafters in {dest / 'candidates'}: {sorted(p.name for p in (dest / 'candidates').iterdir())} "
            f"(compare them: scripts/pair/drafter_pair.py --new {dest / 'candidates'}/NAME)")
    for role in info["roles"]:
        src = res / f"{role}.pt"
        if not src.is_file():
            log(f"{role}: no checkpoint in {res}")
            continue
        dst = work / "ckpt" / f"{role}.pt"
        if dst.is_file():
            shutil.copyfile(dst, dst.with_suffix(".pre-gpu.pt"))
        shutil.copyfile(src, dst)  # not the mode: results fetched from a GPU machine can be read-only
        log(f"{role}: {dst} is the GPU checkpoint (the previous one kept as {dst.with_suffix('.pre-gpu.pt').name})")
    return 0


def fresh(args) -> int:
    """A newly initialised model of another shape with a shipped model's tokenizer: a candidate to train."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    import torch
    from train_common import save_model_dir

    like = Path(args.like)
    tok = AutoTokenizer.from_pretrained(like)
    cfg = AutoConfig.from_pretrained(like)
    for key, value in (("num_hidden_layers", args.layers), ("hidden_size", args.hidden),
                       ("intermediate_size", args.intermediate), ("num_attention_heads", args.heads),
                       ("num_key_value_heads", args.heads)):
        if value is not None:
            setattr(cfg, key, value)
    if cfg.hidden_size % cfg.num_attention_heads:
        raise SystemExit(f"hidden {cfg.hidden_size} is not a multiple of {cfg.num_attention_heads} heads")
    cfg.head_dim = cfg.hidden_size // cfg.num_attention_heads
    torch.manual_seed(args.seed)
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    save_model_dir(model, tok, Path(args.out))
    log(f"{args.out}: {cfg.num_hidden_layers} layers x {cfg.hidden_size} (intermediate {cfg.intermediate_size}, "
        f"{cfg.num_attention_heads} heads), {sum(p.numel() for p in model.parameters()):,} parameters, "
        f"the tokenizer of {like}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="here: the slim work folder, compressed")
    p.add_argument("--work", default="~/.cache/hsd-train")
    p.add_argument("--bundle", default=".gpu/work.tar.xz")
    p.add_argument("--target", default=str(ROOT / "assets" / "tiny-code" / "target"))
    p.add_argument("--roles", nargs="+", default=list(ROLES), choices=sorted(GPU_BATCH))
    p.add_argument("--corpus-mb", type=float, default=16, help="corpus text to cut distill prompts from")
    p.add_argument("--texts-mb", type=float, default=8, help="distillation texts written so far to include (the "
                   "first ones; the GPU writes more)")
    p.add_argument("--candidate", nargs=3, action="append", metavar=("NAME", "ROLE", "FOLDER"),
                   help="also train this model folder as ROLE (e.g. one from `fresh` or `train_pair.py grow`); "
                        "it comes back as a model folder")
    p.add_argument("--train-mb", type=float, default=20, help="packed corpus tokens per drafter (x 2 bytes)")
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("run", help="on the GPU: distil, then a segment per drafter")
    p.add_argument("--bundle", default=".gpu/work.tar.xz")
    p.add_argument("--out", required=True)
    p.add_argument("--scratch", default=None, help="where to unpack the bundle (default: a new temporary folder)")
    p.add_argument("--target", default=None, help="default: assets/tiny-code/target (must be the bundle's)")
    p.add_argument("--init", default=None, help="pair folder the drafters start from (default: the shipped ones)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--distill-minutes", type=float, default=3.0)
    p.add_argument("--distill-batch", type=int, default=4096)
    p.add_argument("--distill-samples", type=int, default=250_000, help="at most this many new continuations")
    p.add_argument("--train-minutes", type=float, default=3.3, help="per drafter; the drafters train side by side")
    p.add_argument("--train-batch", type=int, default=None, help="windows per step (default: per role, GPU-sized)")
    p.add_argument("--distill-mix", type=float, default=0.5)
    p.add_argument("--peak-lr", type=float, default=None,
                   help="the segments' peak learning rate (default: resume's, 3e-3 for a drafter's first segment in "
                        "a work folder: for fine-tuning a trained drafter, e.g. on soft labels, pass about 3e-4)")
    p.add_argument("--max-return-mb", type=float, default=30, help="compressed new continuations to return "
                   "(with candidates, 15: at most 8 files come back from the device tool)")
    p.add_argument("--roles", nargs="*", default=None, help="the shipped roles to train (default: the bundle's)")
    p.add_argument("--soft", nargs=2, action="append", metavar=("ROLE", "T"),
                   help="ROLE's segments (its candidates' too) also train on the target's soft labels at temperature "
                        "T (e.g. `--soft drafter-sampling 0.7`: the drafter SLEM at T=0.7 with shared noise drafts with)")
    p.add_argument("--soft-positions", choices=("aligned", "all"), default="aligned",
                   help="--soft: the positions labelled (scripts/soft_labels.py; `all` lowered the drafter's "
                        "acceptance on the CPU, docs/benchmarks.md)")
    p.add_argument("--soft-windows", type=int, default=32, help="--soft: windows of each step the target labels")
    p.add_argument("--soft-weight", type=float, default=0.8, help="--soft: the soft labels' share of the loss")
    p = sub.add_parser("merge", help="here: the results into the work folder")
    p.add_argument("--results", required=True)
    p.add_argument("--work", default="~/.cache/hsd-train")
    p.add_argument("--candidates-to", default=".", help="where the candidates/ folder is unpacked")
    p = sub.add_parser("fresh", help="here: a new model of another shape, to pack as a candidate")
    p.add_argument("--like", default=str(ROOT / "assets" / "tiny-code" / "drafter"), help="tokenizer and config")
    p.add_argument("--out", required=True)
    p.add_argument("--layers", type=int)
    p.add_argument("--hidden", type=int)
    p.add_argument("--intermediate", type=int)
    p.add_argument("--heads", type=int)
    p.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args(argv)
    return dict(pack=pack, run=run, merge=merge, fresh=fresh)[args.command](args)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
