"""The embedded pair's corpus split by package: pinned PyPI wheels, held out whole (scripts/build_corpus.py,
scripts/pypi_packages.py)."""
from __future__ import annotations

import hashlib
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

import build_corpus  # noqa: E402
import pypi_packages  # noqa: E402


def _wheel(tmp_path: Path, name: str, files: dict[str, str], licence: str = "MIT") -> Path:
    path = tmp_path / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for rel, text in files.items():
            z.writestr(rel, text)
        z.writestr(f"{name}-1.0.dist-info/METADATA",
                   f"Metadata-Version: 2.4\nName: {name}\nVersion: 1.0\nLicense-Expression: {licence}\n")
        z.writestr(f"{name}-1.0.dist-info/RECORD", "")
    return path


def _code(tag: str, n: int = 40) -> str:
    """Functions varied enough not to count as generated repetition."""
    import random

    rng = random.Random(tag)
    words = lambda k: " ".join("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
                               for _ in range(k))
    return "".join(f"def {tag}_{i}(x):\n    \"\"\"{words(8)}.\"\"\"\n    return x + {rng.random()!r}  # {words(5)}\n\n"
                   for i in range(n))


def test_a_wheel_is_read_from_the_archive_and_checked_against_the_lock(tmp_path):
    wheel = _wheel(tmp_path, "alpha", {"alpha/__init__.py": "x = 1\n", "alpha/data.json": "{}",
                                       "alpha-1.0.data/scripts/run.py": "print()\n"})
    assert [rel for rel, _ in pypi_packages.wheel_sources(wheel)] == ["alpha/__init__.py"]
    assert pypi_packages.wheel_metadata(wheel)["License-Expression"] == "MIT"
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    entry = dict(name="alpha", version="1.0", filename="copy.whl", url=wheel.as_uri(), sha256=digest)
    got = pypi_packages.fetch(entry, tmp_path / "cache")
    assert got.read_bytes() == wheel.read_bytes()
    with pytest.raises(SystemExit, match="does not match the lock"):
        pypi_packages.fetch(dict(entry, filename="bad.whl", sha256="0" * 64), tmp_path / "cache")
    assert not (tmp_path / "cache" / "bad.whl").exists()


def test_pin_takes_the_newest_final_pure_wheel_and_the_file_hosts_address():
    def f(name, yanked=False):
        return dict(filename=name, url=f"../../packages/packages/ab/cd/{name}", digests=dict(sha256="1" * 64),
                    yanked=yanked)
    info = dict(releases={
        "1.0": [f("p-1.0-py3-none-any.whl")],
        "1.2": [f("p-1.2-cp311-cp311-manylinux_x86_64.whl")],  # not pure: skipped
        "1.1": [f("p-1.1-py2.py3-none-any.whl")],
        "2.0rc1": [f("p-2.0rc1-py3-none-any.whl")],  # a prerelease
        "1.3": [f("p-1.3-py3-none-any.whl", yanked=True)],
    })
    got = pypi_packages.newest_pure_wheel(info)
    assert got["version"] == "1.1"
    assert got["url"] == "https://files.pythonhosted.org/packages/ab/cd/p-1.1-py2.py3-none-any.whl"
    assert pypi_packages.newest_pure_wheel(dict(releases={"1.0": [f("p-1.0.tar.gz")]})) is None


def test_the_lock_round_trips_and_says_what_was_left_out(tmp_path):
    kept = [dict(name="alpha", version="1.0", filename="a.whl", url="https://x/a.whl", sha256="2" * 64)]
    lock = tmp_path / "pypi.lock"
    pypi_packages.write_lock(lock, kept, [("beta", "no pure-Python wheel")])
    assert pypi_packages.read_lock(lock) == kept
    assert "# beta: no pure-Python wheel" in lock.read_text()
    names = tmp_path / "names.txt"
    names.write_text("# comment\nAlpha beta_two  # trailing\nalpha\n")
    assert pypi_packages.read_names(names) == ["alpha", "beta-two"]


@pytest.fixture()
def split(tmp_path, monkeypatch):
    """A corpus from a tiny stdlib, no requirements, and six pinned wheels, two of them held out."""
    stdlib = tmp_path / "stdlib"
    stdlib.mkdir()
    (stdlib / "os3.py").write_text(_code("os3"))
    shared = _code("shared")
    wheels = {n: _wheel(tmp_path, n, {f"{n}/core.py": _code(n), f"{n}/util.py": _code(n + "u", 10)})
              for n in ("alpha", "beta", "gamma", "delta", "eps")}
    wheels["zeta"] = _wheel(tmp_path, "zeta", {"zeta/core.py": _code("zeta"), "zeta/vendored_copy.py": shared})
    wheels["alpha"] = _wheel(tmp_path, "alpha", {"alpha/core.py": _code("alpha"), "alpha/copy.py": shared,
                                                 "alpha/big.py": _code("big", 400)})
    lock = tmp_path / "pypi.lock"
    pypi_packages.write_lock(lock, [dict(name=n, version="1.0", filename=w.name, url=w.as_uri(),
                                         sha256=hashlib.sha256(w.read_bytes()).hexdigest())
                                    for n, w in wheels.items()], [])
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("")
    sources, dropped = build_corpus.pypi_sources(lock, tmp_path / "cache")
    held = {"zeta": "evaluation", "beta": "calibration"}
    train, heldout, manifest = build_corpus.build(requirements, stdlib, None, pypi=sources, heldout_packages=held,
                                                  max_package_chars=20_000)
    return train, heldout, manifest, sources


def test_held_out_packages_are_held_out_whole_and_lose_what_training_has(split):
    train, heldout, manifest, _ = split
    train_pkgs = {d["source"] for d in train}
    assert {"zeta", "beta"}.isdisjoint(train_pkgs) and {"stdlib", "alpha", "gamma"} <= train_pkgs
    assert {(d["source"], d["group"]) for d in heldout} == {("zeta", "evaluation"), ("beta", "calibration")}
    # the file zeta shares with a training package is dropped from zeta, never from training
    assert "alpha/alpha/copy.py" in {d["path"] for d in train}  # distribution / path in the wheel
    assert "zeta/zeta/vendored_copy.py" not in {d["path"] for d in heldout}
    rows = {p["name"]: p for p in manifest["packages"]}
    assert rows["zeta"]["split"] == "evaluation" and rows["alpha"]["split"] == "train"
    assert rows["alpha"]["chars"] <= 20_000 and manifest["skipped"]["package_cap"] == 1  # big.py over the cap


def test_the_draw_of_held_out_packages_is_seeded_and_skips_small_ones():
    sizes = {f"p{i}": (i + 1) * 1000 for i in range(30)}
    a = build_corpus.choose_heldout(sizes, 4, 2, seed=7, min_chars=5000)
    assert a == build_corpus.choose_heldout(sizes, 4, 2, seed=7, min_chars=5000)
    assert a != build_corpus.choose_heldout(sizes, 4, 2, seed=8, min_chars=5000)
    assert sorted(a.values()) == ["calibration"] * 2 + ["evaluation"] * 4
    assert all(sizes[n] >= 5000 for n in a)
    with pytest.raises(SystemExit, match="cannot hold out"):
        build_corpus.choose_heldout(sizes, 30, 0, seed=7, min_chars=5000)


def test_each_group_gets_its_own_file(split, tmp_path):
    train, heldout, _, _ = split
    build_corpus.write_splits(tmp_path / "c", train, heldout)
    read = {name: build_corpus.read_jsonl(tmp_path / "c" / name) for name in build_corpus.SPLIT_FILES.values()}
    assert {d["source"] for d in read["heldout.jsonl"]} == {"beta"}  # what training scores itself on
    assert {d["source"] for d in read["evaluation.jsonl"]} == {"zeta"}  # what the goals are measured on
    # a corpus without held-out packages scores training on its held-out files, as before
    files = [dict(source="python", path="x.py", text="x = 1\n", group="files")]
    build_corpus.write_splits(tmp_path / "d", train, files)
    assert build_corpus.read_jsonl(tmp_path / "d" / "heldout.jsonl") == files


def test_the_shipped_lock_names_only_pure_wheels_with_checksums():
    rows = pypi_packages.read_lock(ROOT / "scripts" / "corpus" / "pypi.lock")
    assert len(rows) >= 300
    assert all(r["filename"].endswith(pypi_packages.PURE_TAGS) and len(r["sha256"]) == 64 for r in rows)
    assert all(r["url"].startswith("https://files.pythonhosted.org/") for r in rows)
    assert len({r["name"] for r in rows}) == len(rows)


def test_a_training_file_that_copies_a_held_out_package_is_dropped_from_training():
    held_code = _code("held", 30)
    held = [dict(source="zeta", path="zeta/zeta/core.py", text=held_code, group="evaluation")]
    vendored = "# vendored from zeta, with our own header\nimport sys\n\n" + held_code.replace("    ", "        ")
    own = _code("own", 30)
    licence = "".join(f"# Licensed under the Apache License, Version 2.0, line {i} of the header\n" for i in range(30))
    train = [dict(source="eta", path="eta/eta/_vendor_zeta.py", text=vendored),
             dict(source="eta", path="eta/eta/main.py", text=own + held_code.split("\n\n")[0]),  # one function: kept
             dict(source="theta", path="theta/theta/x.py", text=licence + own)]  # a shared licence header: kept
    held.append(dict(source="zeta", path="zeta/zeta/lic.py", text=licence, group="evaluation"))
    kept, copies = build_corpus.drop_copies_of_heldout(train, held)
    assert copies == ["eta/eta/_vendor_zeta.py"]
    assert [d["path"] for d in kept] == ["eta/eta/main.py", "theta/theta/x.py"]
    # the held-out files of training packages are not protected: they measure the old split
    files = [dict(held[0], group="files")]
    assert build_corpus.drop_copies_of_heldout(train, files)[1] == []
