#!/usr/bin/env python3
"""Pure-Python packages from PyPI for the embedded pair's corpus: a pinned list, fetched and checked.

    python scripts/pypi_packages.py pin --names scripts/corpus/pypi-names.txt --out scripts/corpus/pypi.lock

``pin`` asks PyPI's JSON API, for every name, for its newest release that has a pure-Python wheel
(``py3-none-any`` or ``py2.py3-none-any``) and records one line per package: name, version, the wheel's
file name, URL and sha256. Names without such a wheel, without a release or with a licence that is
not permissive are listed at the end of the lock as comments with the reason, so the list says what
was left out and why. ``build_corpus.py --pypi LOCK`` then downloads each wheel into the work folder
(once), checks its sha256 against the lock and reads its ``.py`` files and ``METADATA`` straight from
the archive: the same lock gives the same texts on any machine.

The names file is a hand-kept list of widely used PyPI packages (download rankings cannot be reached
from the build machine); one name or more per line, ``#`` starts a comment.
"""

from __future__ import annotations

import argparse
import email.parser
import hashlib
import json
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

from corpus_sources import licence_of_metadata, requirement_closure

PYPI = "https://pypi.org/pypi"
PURE_TAGS = ("-py3-none-any.whl", "-py2.py3-none-any.whl")


def canonical(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()


def read_names(path: Path) -> list[str]:
    """The names in a names file, canonical, first occurrence kept, in file order."""
    seen, names = set(), []
    for line in path.read_text().splitlines():
        for word in line.split("#", 1)[0].split():
            name = canonical(word)
            if name not in seen:
                seen.add(name)
                names.append(name)
    return names


def _get_json(url: str, tries: int = 3) -> dict | None:
    for attempt in range(tries):
        try:
            with urllib.request.urlopen(url, timeout=30) as r:
                return json.load(r)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            if attempt == tries - 1:
                raise
        except OSError:
            if attempt == tries - 1:
                raise
        time.sleep(1 + attempt)
    return None


def newest_pure_wheel(info: dict) -> dict | None:
    """The newest non-yanked, non-prerelease release's pure-Python wheel in a PyPI JSON answer, else None."""
    from packaging.version import InvalidVersion, Version

    releases = []
    for version, files in info.get("releases", {}).items():
        try:
            v = Version(version)
        except InvalidVersion:
            continue
        if v.is_prerelease or v.is_devrelease:
            continue
        wheels = [f for f in files if f["filename"].endswith(PURE_TAGS) and not f.get("yanked")]
        if wheels:
            releases.append((v, version, wheels[0]))
    if not releases:
        return None
    _, version, f = max(releases)
    return dict(version=version, filename=f["filename"], url=file_url(f["url"]), sha256=f["digests"]["sha256"])


def file_url(url: str) -> str:
    """A wheel's address on PyPI's file host. A mirror in front of PyPI may answer with a path relative to the
    JSON API ("../../packages/packages/ab/cd/..."): the lock records the file host's own address instead."""
    if url.startswith("https://"):
        return url
    tail = url.split("packages/", 1)[1] if "packages/" in url else url.lstrip("./")
    return "https://files.pythonhosted.org/packages/" + tail.removeprefix("packages/")


def wheel_metadata(path: Path):
    """The core metadata (an email.message.Message) inside a wheel."""
    with zipfile.ZipFile(path) as z:
        name = next(n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA"))
        return email.parser.Parser().parsestr(z.read(name).decode("utf-8", errors="replace"))


def wheel_sources(path: Path):
    """(path inside the wheel, bytes) of every ``.py`` file outside the metadata folders, sorted by path."""
    with zipfile.ZipFile(path) as z:
        for name in sorted(z.namelist()):
            if name.endswith(".py") and ".dist-info/" not in name and ".data/" not in name.split("/", 1)[0] + "/":
                yield name, z.read(name)


def fetch(entry: dict, cache: Path) -> Path:
    """The lock entry's wheel in ``cache``, downloaded once and checked against the lock's sha256."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / entry["filename"]
    if path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == entry["sha256"]:
        return path
    tmp = path.with_suffix(".part")
    with urllib.request.urlopen(entry["url"], timeout=120) as r, tmp.open("wb") as f:
        while chunk := r.read(1 << 20):
            f.write(chunk)
    digest = hashlib.sha256(tmp.read_bytes()).hexdigest()
    if digest != entry["sha256"]:
        tmp.unlink()
        raise SystemExit(f"{entry['filename']}: sha256 {digest} does not match the lock's {entry['sha256']}")
    tmp.replace(path)
    return path


def read_lock(path: Path) -> list[dict]:
    """The pinned packages of a lock file (comment lines skipped)."""
    rows = []
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version, filename, url, sha256 = line.split()
            rows.append(dict(name=name, version=version, filename=filename, url=url, sha256=sha256))
    return rows


def pin(names: list[str], cache: Path, exclude: set[str]) -> tuple[list[dict], list[tuple[str, str]]]:
    """Lock entries for ``names`` and (name, reason) for each left out."""
    kept, left = [], []
    for name in names:
        if name in exclude:
            left.append((name, "already in the corpus (the requirement closure)"))
            continue
        info = _get_json(f"{PYPI}/{name}/json")
        if info is None:
            left.append((name, "not on PyPI"))
            continue
        wheel = newest_pure_wheel(info)
        if wheel is None:
            left.append((name, "no pure-Python wheel"))
            continue
        entry = dict(name=canonical(info["info"]["name"]), **wheel)
        licence, ok = licence_of_metadata(wheel_metadata(fetch(entry, cache)))
        if not ok:
            left.append((name, f"licence not permissive or unknown: {licence[:60]!r}"))
            continue
        kept.append(entry)
        print(f"  {entry['name']} {entry['version']} ({licence[:40]})", flush=True)
    return kept, left


def write_lock(path: Path, kept: list[dict], left: list[tuple[str, str]]) -> None:
    lines = ["# name version wheel url sha256: written by `scripts/pypi_packages.py pin`; edit the names file, not this",
             *(f"{e['name']} {e['version']} {e['filename']} {e['url']} {e['sha256']}" for e in kept),
             "# left out:", *(f"# {name}: {why}" for name, why in left)]
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("pin", help="resolve the names file to a lock of pure-Python wheels")
    p.add_argument("--names", default=str(Path(__file__).parent / "corpus" / "pypi-names.txt"))
    p.add_argument("--out", default=str(Path(__file__).parent / "corpus" / "pypi.lock"))
    p.add_argument("--cache", default="~/.cache/hsd-train/pypi", help="where the wheels are downloaded")
    p.add_argument("--requirements", default=str(Path(__file__).resolve().parent.parent / "requirements.txt"))
    args = ap.parse_args(argv)
    closure = {canonical(d.metadata["Name"]) for d in requirement_closure(Path(args.requirements))}
    kept, left = pin(read_names(Path(args.names)), Path(args.cache).expanduser(), closure)
    write_lock(Path(args.out), kept, left)
    print(f"pinned {len(kept)} packages, left out {len(left)}: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
