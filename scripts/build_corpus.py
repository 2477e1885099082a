#!/usr/bin/env python3
"""Build the embedded pair's training corpus: Python sources of the standard library and of every
permissively licensed package that ``requirements.txt`` installs, deduplicated by content, split by
file into train and held-out.

    python scripts/build_corpus.py --work ~/.cache/hsd-train        # writes WORK/corpus/*.jsonl
    python scripts/build_corpus.py --work DIR --manifest assets/tiny-code/corpus.json

Rules, in order (all deterministic, so the same package versions give the same corpus):

1. Sources: the stdlib (``sysconfig``'s ``stdlib`` path, minus test suites, IDLE, lib2to3 and demos)
   and the ``.py`` files listed in the installed distribution records (``importlib.metadata``) of
   the requirement closure of ``requirements.txt`` (its packages and, recursively, theirs).
2. Licences: read per distribution from ``License-Expression``, ``License`` or the trove
   classifiers; a distribution is kept only if its licence is permissive (MIT, BSD, Apache, PSF,
   ISC, Zlib, CC0, ...); anything copyleft (MPL, GPL, LGPL, ...) or unknown is dropped and listed.
3. Files: UTF-8, non-empty, at most ``--max-file-chars`` characters (drops generated tables),
   outside the stdlib's test suite and vendored copies, and not mostly
   repetition (zlib compresses the text to less than ``--min-zlib-ratio`` of its size: generated
   validators, data tables).
4. Dedup: the first file with a given content (stdlib first, then distributions by name) is kept.
5. Split: the files the shipped pair already held out (``--previous``'s ``heldout`` list) stay
   held out and the files it trained on stay in train, so continuing from the shipped weights
   never tests on seen text; every other file is held out when the first byte of
   sha256(source/path) is below 256/``--heldout-every``, which keeps the split stable when
   packages are added.

The manifest (``corpus.json``) records versions, licences, counts and the held-out file list; the
texts themselves (about 150 MB) live in the work folder, outside the repository.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import sys
import sysconfig
import zlib
from pathlib import Path

from corpus_sources import licence_of, licence_of_metadata, requirement_closure

ROOT = Path(__file__).resolve().parent.parent
STDLIB_EXCLUDED = {
    "test", "tests", "idlelib", "lib2to3", "site-packages", "dist-packages", "__pycache__",
    "turtledemo", "ensurepip", "idle_test", "__phello__",
}
PACKAGE_EXCLUDED = {"__pycache__", "_vendor", "vendored"}
STDLIB_LICENCE = "PSF-2.0"


def stdlib_files(stdlib: Path):
    for path in sorted(stdlib.rglob("*.py")):
        rel = path.relative_to(stdlib)
        if any(part in STDLIB_EXCLUDED or part.startswith(".") for part in rel.parts[:-1]):
            continue
        if rel.name.startswith("test_"):
            continue
        yield rel.as_posix(), path


def package_files(dist):
    for f in sorted(dist.files or [], key=str):
        rel = str(f)
        if not rel.endswith(".py") or ".dist-info" in rel or rel.startswith(".."):
            continue
        parts = Path(rel).parts
        if any(p in PACKAGE_EXCLUDED for p in parts[:-1]) or parts[-1].startswith("test_"):
            continue
        yield rel, Path(dist.locate_file(f))


def read_text(path: Path | bytes, max_chars: int) -> str | None:
    """A source file's text (a path, or the bytes read from a wheel), or None if unreadable, empty or too long."""
    try:
        text = path.decode("utf-8") if isinstance(path, bytes) else path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    text = text.replace("\r\n", "\n")
    if not text.strip() or len(text) > max_chars:
        return None
    return text


def is_repetitive(text: str, min_ratio: float) -> bool:
    raw = text.encode("utf-8")
    return len(raw) > 2000 and len(zlib.compress(raw, 6)) < min_ratio * len(raw)


def heldout_by_hash(key: str, every: int) -> bool:
    return hashlib.sha256(key.encode()).digest()[0] < 256 // every


# ---------------------------------------------------------------------------------------------
# Build
# ---------------------------------------------------------------------------------------------
def pypi_sources(lock: Path, cache: Path):
    """The pinned PyPI packages as sources: each wheel fetched (sha256 checked) and read from the archive."""
    import pypi_packages

    sources, dropped = [], []
    for entry in pypi_packages.read_lock(lock):
        wheel = pypi_packages.fetch(entry, cache)
        licence, ok = licence_of_metadata(pypi_packages.wheel_metadata(wheel))
        if not ok:
            dropped.append(dict(name=entry["name"], version=entry["version"], licence=licence))
            continue
        files = [(f"{entry['name']}/{rel}", data) for rel, data in pypi_packages.wheel_sources(wheel)
                 if not any(p in PACKAGE_EXCLUDED for p in Path(rel).parts[:-1])
                 and not Path(rel).name.startswith("test_")]
        sources.append(dict(source=entry["name"], name=entry["name"], version=entry["version"], licence=licence,
                            permissive=True, files=files, wheel=entry["filename"], sha256=entry["sha256"]))
    return sources, dropped


def package_chars(src: dict, max_file_chars: int, min_zlib_ratio: float) -> int:
    """Characters of a PyPI source's files that the corpus rules keep (before deduplication)."""
    texts = (read_text(data, max_file_chars) for _, data in src["files"])
    return sum(len(t) for t in texts if t is not None and not is_repetitive(t, min_zlib_ratio))


def choose_heldout(sizes: dict[str, int], n_eval: int, n_cal: int, seed: int, min_chars: int) -> dict[str, str]:
    """Package name -> "evaluation" or "calibration": ``n_eval + n_cal`` of the PyPI packages with at least
    ``min_chars`` of kept text (``sizes``), drawn at random with ``seed``, so the lock and the seed fix the draw."""
    import random

    pool = sorted(name for name, chars in sizes.items() if chars >= min_chars)
    if len(pool) < n_eval + n_cal:
        raise SystemExit(f"only {len(pool)} PyPI packages have {min_chars:,}+ characters; "
                         f"cannot hold out {n_eval} + {n_cal}")
    drawn = random.Random(seed).sample(pool, n_eval + n_cal)
    return {**{name: "evaluation" for name in drawn[:n_eval]}, **{name: "calibration" for name in drawn[n_eval:]}}


def _sources(requirements: Path, stdlib: Path, pypi: list[dict], held_pkgs: dict) -> tuple[list[dict], list[dict]]:
    """The standard library, the permissively licensed packages of the requirement closure, then the PyPI
    packages, those held out last; and the packages left out for their licence."""
    sources = [dict(source="stdlib", name="python", version=platform.python_version(), licence=STDLIB_LICENCE,
                    permissive=True, files=stdlib_files(stdlib))]
    dropped = []
    for dist in requirement_closure(requirements):
        licence, ok = licence_of(dist)
        name = dist.metadata["Name"]
        if ok:
            sources.append(dict(source=name, name=name, version=dist.version, licence=licence, permissive=True,
                                files=package_files(dist)))
        else:
            dropped.append(dict(name=name, version=dist.version, licence=licence))
    sources += [src for src in pypi if src["name"] not in held_pkgs]
    sources += [src for src in pypi if src["name"] in held_pkgs]
    return sources, dropped


def _skip_reason(text: str | None, src: dict, chars: int, seen: set, max_package_chars: int | None,
                 min_zlib_ratio: float) -> str | None:
    """Why a file is left out (the ``skipped`` counter it adds to), or None to keep it."""
    if max_package_chars and src.get("wheel") and text is not None and chars + len(text) > max_package_chars:
        return "package_cap"
    if text is None:
        return "unreadable_or_large"
    if is_repetitive(text, min_zlib_ratio):
        return "repetitive"
    if hashlib.sha256(text.encode()).hexdigest() in seen:
        return "duplicate"
    return None


def build(requirements: Path, stdlib: Path, previous: dict | None, heldout_every: int = 50,
          max_file_chars: int = 300_000, min_zlib_ratio: float = 0.12, max_files: int | None = None,
          pypi: list[dict] | None = None, heldout_packages: dict[str, str] | None = None,
          max_package_chars: int | None = None):
    """Return (train, heldout, manifest); train/heldout are lists of dicts {source, path, text}.

    ``pypi`` adds sources (:func:`pypi_sources`); the packages named in ``heldout_packages`` are held out whole
    (each document carries its ``group``: evaluation or calibration), read after every other source so a file
    they share with a training package is dropped from them, never from training. The hash split by file
    still applies to the other sources; those files go to ``heldout`` with group ``files``."""
    prev_train = set(previous.get("train", [])) if previous else set()
    prev_held = set(previous.get("heldout", [])) if previous else set()
    held_pkgs = heldout_packages or {}
    sources, dropped = _sources(requirements, stdlib, list(pypi or []), held_pkgs)
    seen, train, heldout, packages = set(), [], [], []
    skipped = dict(unreadable_or_large=0, repetitive=0, duplicate=0, package_cap=0)
    for src in sources:
        kept = chars = 0
        group = held_pkgs.get(src["name"]) if src.get("wheel") else None
        for rel, path in src["files"]:
            text = read_text(path, max_file_chars)
            why = _skip_reason(text, src, chars, seen, max_package_chars, min_zlib_ratio)
            if why:
                skipped[why] += 1
                continue
            seen.add(hashlib.sha256(text.encode()).hexdigest())
            key = rel if src["source"] == "stdlib" or src.get("wheel") else f"{src['source']}/{rel}"
            doc = dict(source=src["source"], path=key, text=text)
            if group is not None:
                held = True
                doc["group"] = group
            elif src.get("wheel"):
                held = False  # a PyPI package is held out whole or not at all
            elif src["source"] == "stdlib" and (key in prev_train or key in prev_held):
                held = key not in prev_train  # the previous split of the standard library stays as it was
            else:
                held = heldout_by_hash(key, heldout_every)
            if held and group is None:
                doc["group"] = "files"
            (heldout if held else train).append(doc)
            kept += 1
            chars += len(text)
        row = dict(name=src["name"], version=src["version"], licence=src["licence"], files=kept, chars=chars)
        if src.get("wheel"):
            row.update(split=group or "train", wheel=src["wheel"], sha256=src["sha256"])
        packages.append(row)
    train, copies = drop_copies_of_heldout(train, heldout)
    skipped["copy_of_heldout_package"] = len(copies)
    if max_files:  # smoke tests: a spread-out slice that still has held-out files
        train = train[:: max(1, len(train) // max_files)][:max_files]
        heldout = heldout[:: max(1, len(heldout) // max(2, max_files // 10))][: max(2, max_files // 10)]
    digest = hashlib.sha256()
    for doc in train + heldout:
        digest.update(doc["path"].encode() + b"\0" + doc["text"].encode() + b"\0")
    manifest = dict(
        python=platform.python_version(), stdlib=str(stdlib), requirements=requirements.name,
        rules=dict(heldout_every=heldout_every, max_file_chars=max_file_chars, min_zlib_ratio=min_zlib_ratio,
                   stdlib_excluded_dirs=sorted(STDLIB_EXCLUDED), package_excluded_dirs=sorted(PACKAGE_EXCLUDED),
                   previous_split_kept=bool(previous), max_files=max_files),
        train_files=len(train), heldout_files=len(heldout),
        train_chars=sum(len(d["text"]) for d in train), heldout_chars=sum(len(d["text"]) for d in heldout),
        skipped=skipped, sha256=digest.hexdigest(), packages=packages, dropped_licences=dropped,
        copies_of_heldout_packages=copies,
        heldout=[d["path"] for d in heldout],
        previous_train=sorted(prev_train) if previous else [],
    )
    return train, heldout, manifest


def code_lines(text: str, min_chars: int = 24) -> set[str]:
    """The lines of a file that identify it (stripped, at least ``min_chars`` long, not comments: a licence header
    is shared by unrelated files), without their indentation: a copy vendored into another package keeps them
    even when it moves or re-indents."""
    return {line for line in (raw.strip() for raw in text.splitlines())
            if len(line) >= min_chars and not line.startswith("#")}


def drop_copies_of_heldout(train: list[dict], heldout: list[dict], share: float = 0.5,
                           min_lines: int = 8) -> tuple[list[dict], list[str]]:
    """``train`` without the files that copy a held-out package (a vendored or absorbed copy:
    omegaconf carries antlr4's runtime, a client library the helper it grew out of), and their paths.

    Exact deduplication only catches identical files; a copy with other imports or a licence header slips
    through it. A training file goes when at least ``share`` of its identifying lines (:func:`code_lines`, at
    least ``min_lines`` of them) appear in the held-out packages' files, so the held-out packages stay text the
    pair never saw. The held-out files of training packages (group ``files``) are not protected this way: they
    measure the old split, not unseen packages."""
    seen = set()
    for doc in heldout:
        if doc.get("group") in ("evaluation", "calibration"):
            seen |= code_lines(doc["text"])
    kept, copies = [], []
    for doc in train:
        lines = code_lines(doc["text"])
        if len(lines) >= min_lines and len(lines & seen) >= share * len(lines):
            copies.append(doc["path"])
        else:
            kept.append(doc)
    return kept, copies


def write_jsonl(path: Path, docs) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps(d, ensure_ascii=False) + "\n")
    tmp.replace(path)


#: the held-out files, by group: ``heldout.jsonl`` is what training scores itself on (the calibration packages,
#: or, in a corpus without held-out packages, the held-out files); the goals are measured on ``evaluation.jsonl``
SPLIT_FILES = {"calibration": "heldout.jsonl", "evaluation": "evaluation.jsonl", "files": "heldout_files.jsonl"}


def write_splits(work: Path, train: list[dict], heldout: list[dict]) -> None:
    """train.jsonl and one file per held-out group (:data:`SPLIT_FILES`)."""
    write_jsonl(work / "train.jsonl", train)
    groups = {g: [d for d in heldout if d.get("group") == g] for g in SPLIT_FILES}
    if not groups["calibration"]:  # no held-out packages: training scores itself on the held-out files
        groups["calibration"] = groups["files"]
    for group, name in SPLIT_FILES.items():
        write_jsonl(work / name, groups[group])


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True, help="folder for the corpus texts (outside the repository)")
    ap.add_argument("--manifest", default=None, help="also write the manifest here (e.g. assets/tiny-code/corpus.json)")
    ap.add_argument("--previous", default=str(ROOT / "assets" / "tiny-code" / "corpus.json"),
                    help="manifest of the shipped pair, whose split is kept ('' for none)")
    ap.add_argument("--requirements", default=str(ROOT / "requirements.txt"))
    ap.add_argument("--stdlib", default=sysconfig.get_paths()["stdlib"])
    ap.add_argument("--heldout-every", type=int, default=50)
    ap.add_argument("--max-file-chars", type=int, default=300_000)
    ap.add_argument("--min-zlib-ratio", type=float, default=0.12)
    ap.add_argument("--max-files", type=int, default=None, help="smoke tests: keep a slice of N train files")
    ap.add_argument("--pypi", default=str(ROOT / "scripts" / "corpus" / "pypi.lock"),
                    help="pinned PyPI wheels to add (scripts/pypi_packages.py pin writes it; '' for none)")
    ap.add_argument("--evaluation-packages", type=int, default=12,
                    help="PyPI packages held out whole, on which the pair's goals are measured")
    ap.add_argument("--calibration-packages", type=int, default=8,
                    help="PyPI packages held out whole for training's held-out loss and for choosing settings")
    ap.add_argument("--heldout-seed", type=int, default=41, help="seed of the held-out packages' draw")
    ap.add_argument("--heldout-min-chars", type=int, default=60_000,
                    help="a held-out package has at least this many characters (enough functions for prompts)")
    ap.add_argument("--max-package-chars", type=int, default=4_000_000,
                    help="at most this many characters from one PyPI package, so a few large ones do not dominate")
    args = ap.parse_args(argv)
    previous = None
    if args.previous and Path(args.previous).is_file():
        previous = json.loads(Path(args.previous).read_text())
        if "previous_train" in previous and previous["previous_train"]:
            # a manifest written by this script: its stdlib split is the one to keep
            previous = dict(train=previous["previous_train"], heldout=previous["heldout"])
    pypi, held_pkgs, pypi_dropped = [], {}, []
    if args.pypi:
        pypi, pypi_dropped = pypi_sources(Path(args.pypi), Path(args.work).expanduser() / "pypi")
        sizes = {src["name"]: package_chars(src, args.max_file_chars, args.min_zlib_ratio) for src in pypi}
        held_pkgs = choose_heldout(sizes, args.evaluation_packages, args.calibration_packages, args.heldout_seed,
                                   args.heldout_min_chars)
    train, heldout, manifest = build(Path(args.requirements), Path(args.stdlib), previous, args.heldout_every,
                                     args.max_file_chars, args.min_zlib_ratio, args.max_files, pypi, held_pkgs,
                                     args.max_package_chars)
    manifest["dropped_licences"] += pypi_dropped
    manifest["rules"].update(pypi_lock=Path(args.pypi).name if args.pypi else None,
                             pypi_lock_sha256=hashlib.sha256(Path(args.pypi).read_bytes()).hexdigest() if args.pypi else None,
                             heldout_seed=args.heldout_seed, heldout_min_chars=args.heldout_min_chars,
                             max_package_chars=args.max_package_chars)
    manifest["heldout_packages"] = {group: sorted(n for n, g in held_pkgs.items() if g == group)
                                    for group in ("evaluation", "calibration")}
    work = Path(args.work).expanduser() / "corpus"
    write_splits(work, train, heldout)
    (work / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    if args.manifest:
        Path(args.manifest).write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"corpus: {manifest['train_files']} train files ({manifest['train_chars']:,} chars), "
          f"{manifest['heldout_files']} held out ({manifest['heldout_chars']:,} chars) from "
          f"{len(manifest['packages'])} sources; dropped for licence: "
          f"{', '.join(d['name'] for d in manifest['dropped_licences']) or 'none'}; skipped {manifest['skipped']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
