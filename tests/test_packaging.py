"""hsd as a package: the metadata, the wheel's contents, and an install used from another directory, offline."""

import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import hsd
from hsd import space
from hsd.assets import assets_dir
from hsd.bench import load_prompts

ROOT = Path(__file__).resolve().parent.parent
PAIR = [f"tiny-code/{role}/{name}" for role in ("target", "drafter", "drafter-bytes", "drafter-shared",
                                                                      "drafter-sampling")
        for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")]
PROMPTS = ["prompts/code.jsonl", "prompts/summarize.jsonl", "prompts/long.jsonl"]


def _pyproject() -> dict:
    tomllib = pytest.importorskip("tomllib")
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _requirements() -> set[str]:
    lines = (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
    return {line.split(" #")[0].strip() for line in lines if line.strip() and not line.startswith("#")}


def test_dependencies_mirror_requirements_txt():
    project = _pyproject()["project"]
    extras = project["optional-dependencies"]
    assert set(project["dependencies"]) | set(extras["app"]) | set(extras["test"]) == _requirements()
    assert not {"pytest", "gradio"} & {re.split(r"[<>=]", d)[0] for d in project["dependencies"]}


def test_version_has_one_source():
    config = _pyproject()
    assert "version" not in config["project"] and config["project"]["dynamic"] == ["version"]
    assert config["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "hsd.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", hsd.__version__)


def test_assets_do_not_depend_on_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    root = assets_dir()
    assert root.is_absolute() and all((root / name).is_file() for name in PAIR + PROMPTS)
    assert hsd.PRESETS["tiny-code"] == (str(root / "tiny-code" / "target"), str(root / "tiny-code" / "drafter"))
    assert load_prompts("code", 2) and len(load_prompts("code", 2)) == 2


def _source_copy(dest: Path) -> Path:
    """What a checkout holds for the build (assets/ in full, so the exclusions are tested), outside it:
    building in the checkout would leave build/ and *.egg-info there."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, dest / name)
    for name in ("hsd", "assets"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return dest


def _pip(*args, python=sys.executable, cwd=None) -> subprocess.CompletedProcess:
    """pip offline: no index, no build isolation (setuptools comes from this environment)."""
    pytest.importorskip("setuptools", minversion="77", reason="building hsd needs setuptools>=77 installed")
    proc = subprocess.run([sys.executable, "-m", "pip", "--python", python, *args, "--no-deps", "--no-index",
                           "--no-build-isolation", "--quiet"], cwd=cwd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_wheel_holds_the_code_the_pair_and_the_prompts_and_nothing_else(tmp_path):
    src = _source_copy(tmp_path / "src")
    _pip("wheel", "-w", str(tmp_path / "dist"), str(src))
    (wheel,) = (tmp_path / "dist").glob("hsd-*.whl")
    assert wheel.name.startswith(f"hsd-{hsd.__version__}-py3-none-any")
    names = set(zipfile.ZipFile(wheel).namelist())
    code = {p.relative_to(ROOT).as_posix() for p in (ROOT / "hsd").rglob("*.py") if "__pycache__" not in p.parts}
    assert code <= names and "hsd/py.typed" in names
    assert {f"hsd/_assets/{name}" for name in PAIR + PROMPTS} <= names
    assert not [n for n in names if re.search(r"^tests/|/tests/|tiny-code-next|__pycache__|^app\.py|^scripts/|"
                                              r"train_log|corpus\.json|distill_examples", n)]
    # the Space and the wheel carry the same assets
    in_space = {f.path.removeprefix("assets/") for f in space.space_files(ROOT) if f.path.startswith("assets/")}
    assert {n.removeprefix("hsd/_assets/") for n in names if n.startswith("hsd/_assets/")} == in_space
    dist_info = f"hsd-{hsd.__version__}.dist-info"
    metadata = zipfile.ZipFile(wheel).read(f"{dist_info}/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata and "Requires-Python: >=3.10" in metadata
    assert "Provides-Extra: test" in metadata and "Requires-Dist: gradio" in metadata  # in the app extra
    assert "hsd = hsd.cli:main" in zipfile.ZipFile(wheel).read(f"{dist_info}/entry_points.txt").decode()
    assert wheel.stat().st_size < 40e6  # the embedded pair (16-layer target) is most of it; assets/ stays under 60 MB


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["regular", "editable"])
def test_installed_hsd_runs_from_another_directory_offline(mode, tmp_path):
    """A venv that sees this environment's torch and transformers, hsd installed into it from a copy of the
    checkout; from an unrelated directory the console script, python -m hsd and the README's one-liner work."""
    src = _source_copy(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    _pip("install", *(["-e"] if mode == "editable" else []), str(src), python=python)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"HF_HUB_OFFLINE": "1"}

    def run(*argv):
        proc = subprocess.run(argv, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc.stdout

    assert run(str(venv / "bin" / "hsd"), "--version").strip() == f"hsd {hsd.__version__}"
    assert run(python, "-m", "hsd", "--version").strip() == f"hsd {hsd.__version__}"
    out = run(python, "-c", "import hsd; print(hsd.__file__); print(hsd.loading.ASSETS); "
                            "print(hsd.generate(hsd.load_pair(), 'def f(', max_new_tokens=8).text)").splitlines()
    installed = venv if mode == "regular" else src
    assert Path(out[0]).is_relative_to(installed) and Path(out[1]).is_relative_to(installed)
    assert Path(out[1]).name == ("_assets" if mode == "regular" else "assets")
    assert "\n".join(out[2:]).strip()
