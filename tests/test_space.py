"""hsd space push: the allow-list, the dry run offline, and the Hub calls through a recording fake HfApi."""

import importlib
import re
import shutil
import subprocess
from pathlib import Path
from types import SimpleNamespace

import huggingface_hub
import pytest
from huggingface_hub import errors as hub_errors

from hsd import cli, space
from hsd.errors import HsdError, InvalidSettingError

ROOT = Path(__file__).resolve().parent.parent
LEFT_BEHIND = re.compile(r"^(tests|docs|benchmarks|scripts|bench-out|runs)/|__pycache__|\.pyc$|tiny-code-next|"
                         r"corpus\.json|train_log\.json|distill_examples\.json")


class FakeApi:
    """Records every call; keeps what upload_folder saw, since its folder is gone after the push."""

    def __init__(self, fail_hardware=None, existing_hardware=None):
        self.calls, self.uploaded, self.fail_hardware = [], {}, fail_hardware
        self.existing_hardware = existing_hardware  # None: the Space does not exist yet

    def repo_exists(self, repo_id, **kwargs):
        return self.existing_hardware is not None

    def get_space_runtime(self, repo_id):
        return SimpleNamespace(hardware=self.existing_hardware, requested_hardware=None)

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))
        return f"https://huggingface.co/spaces/{repo_id}"

    def upload_folder(self, **kwargs):
        self.calls.append(("upload_folder", kwargs["repo_id"], kwargs))
        folder = Path(kwargs["folder_path"])
        self.uploaded = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}

    def request_space_hardware(self, repo_id, hardware, **kwargs):
        self.calls.append(("request_space_hardware", repo_id, {"hardware": hardware, **kwargs}))
        if self.fail_hardware:
            raise self.fail_hardware


@pytest.fixture
def no_hub(monkeypatch):
    """Any attempt to build a real client fails the test: the dry run must need no network and no token."""
    def refuse(*args, **kwargs):
        raise AssertionError("the dry run built an HfApi")
    monkeypatch.setattr(huggingface_hub, "HfApi", refuse)
    monkeypatch.delenv("HF_TOKEN", raising=False)


def _dry_run_lines(capsys, *extra):
    assert cli.main(["space", "push", "someone/hsd-demo", "--dry-run", *extra]) == 0
    return capsys.readouterr().out.splitlines()


def test_dry_run_lists_each_file_with_size_and_large_flag_offline(no_hub, capsys):
    lines = _dry_run_lines(capsys, "--hardware", "zero-a10g")
    rows = {line.split()[-1] if not line.endswith("(generated)") else line.split()[-2]: line
            for line in lines if re.match(r"^\s+[\d.]+ [kM]B ", line)}
    for needed in ["app.py", "hsd/__init__.py", "hsd/space.py", "hsd/algorithms/slem.py", "hsd/py.typed",
                   "assets/prompts/code.jsonl", "assets/tiny-code/drafter-bytes/tokenizer.json", "README.md",
                   "requirements.txt"]:
        assert needed in rows, needed
    for role in ["target", "drafter", "drafter-bytes", "drafter-shared", "drafter-sampling"]:
        assert " large " in rows[f"assets/tiny-code/{role}/model.safetensors"]
    assert " large " not in rows["app.py"] and rows["README.md"].endswith("(generated)")
    assert not [p for p in rows if LEFT_BEHIND.search(p)]
    assert lines[-1] == "dry run, nothing sent: https://huggingface.co/spaces/someone/hsd-demo"
    assert "hardware zero-a10g" in lines[-2]
    settings = lines[-3]  # what the generated files set: the torch ZeroGPU supports, its Python, the presets
    assert settings.startswith("requirements.txt: torch==2.11.0, spaces==0.51.3 (for ZeroGPU); README.md: "
                               "python_version 3.12.12")
    assert "preload_from_hub: deepseek-ai/DeepSeek-R1-Distill-Qwen-14B" in settings


def test_upload_is_the_allow_list_and_nothing_else():
    files = {f.path: f for f in space.space_files(ROOT)}
    tracked = {p.relative_to(ROOT).as_posix() for p in (ROOT / "hsd").rglob("*.py") if "__pycache__" not in p.parts}
    assert tracked <= set(files)
    assert not [p for p in files if LEFT_BEHIND.search(p)]
    for f in files.values():
        assert f.size == (len(f.content) if f.generated else (ROOT / f.path).stat().st_size)


def test_push_creates_the_space_on_zerogpu_in_the_creation_request_and_uploads_the_allow_list(capsys):
    api = FakeApi()
    url = space.push("someone/hsd-demo", root=ROOT, private=True, api=api)
    assert url == "https://huggingface.co/spaces/someone/hsd-demo"
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == url and "created someone/hsd-demo on zero-a10g" in out
    assert any(line.startswith("ZeroGPU: a free account in good standing") for line in out)
    names = [c[0] for c in api.calls]
    assert names == ["create_repo", "upload_folder"]  # no second request: the hardware came with the creation
    _, repo_id, create = api.calls[0]
    assert repo_id == "someone/hsd-demo"
    assert create == {"repo_type": "space", "space_sdk": "gradio", "space_hardware": "zero-a10g", "private": True,
                      "exist_ok": True}
    upload = api.calls[1][2]
    expected = [f.path for f in space.space_files(ROOT)]
    assert upload["repo_type"] == "space" and upload["allow_patterns"] == expected
    assert sorted(api.uploaded) == sorted(expected)
    assert api.uploaded["app.py"] == (ROOT / "app.py").read_bytes()
    assert upload["delete_patterns"] == ["*.py", "hsd/*", "assets/*"]


@pytest.mark.parametrize("existing, requested", [("cpu-basic", True), ("zero-a10g", False)])
def test_an_existing_space_is_asked_for_the_hardware_only_when_it_runs_on_other(existing, requested, capsys):
    api = FakeApi(existing_hardware=existing)
    space.push("someone/hsd-demo", root=ROOT, hardware="zero-a10g", api=api)
    names = [c[0] for c in api.calls]
    assert names == ["create_repo", "upload_folder"] + (["request_space_hardware"] if requested else [])
    if requested:
        assert api.calls[2][1:] == ("someone/hsd-demo", {"hardware": "zero-a10g"})
        assert "hardware requested: zero-a10g (was cpu-basic)" in capsys.readouterr().out


def test_space_readme_has_front_matter_and_no_link_to_a_file_left_behind():
    files = {f.path: f for f in space.space_files(ROOT)}
    readme = files["README.md"].content.decode()
    front, body = re.match(r"^---\n(.*?)\n---\n(.*)$", readme, re.S).groups()
    for key in ["sdk: gradio", "app_file: app.py", "sdk_version:", "python_version:", "license:"]:
        assert re.search(rf"^{key}", front, re.M), key
    targets = [t for t in re.findall(r"\]\(([^)\s]+)", body) if not re.match(r"^([a-z]+:|#|/)", t)]
    assert all(t.split("#")[0] in files for t in targets), targets
    assert "docs/img" not in body and "# hsd" in body


def test_space_readme_fills_missing_front_matter():
    readme = space.space_readme("---\ntitle: x\n---\n# T\n![shot](docs/a.png)\nsee [design](docs/d.md), [app](app.py)\n",
                                {"app.py"})
    assert readme.startswith("---\ntitle: x\nsdk: gradio\n")
    assert "app_file: app.py" in readme and "shot" not in readme
    assert "see design, [app](app.py)" in readme
    assert space.space_readme("# T\n", set()).startswith("---\nsdk: gradio\n")


def test_space_requirements_drop_test_only_packages():
    out = space.space_requirements("torch>=2.4\npytest>=8.0\ngradio>=6.0,<7\n", "cpu-basic")
    assert out == "torch>=2.4\ngradio>=6.0,<7\n"
    assert "pytest" not in space.space_requirements((ROOT / "requirements.txt").read_text())


@pytest.mark.parametrize("hardware, torch_line", [
    ("zero-a10g", "torch==2.11.0"),
    (None, "torch==2.11.0"),  # the Space keeps its hardware, which may be ZeroGPU (README.md suggests it)
    ("cpu-basic", "torch>=2.4"),  # any other hardware keeps the repository's line
    ("a10g-small", "torch>=2.4"),
])
def test_space_requirements_pin_a_torch_zerogpu_supports(hardware, torch_line):
    from hsd import zerogpu

    files = {f.path: f for f in space.space_files(ROOT, hardware)}
    lines = files["requirements.txt"].content.decode().splitlines()
    torch = [line.split("#")[0].strip() for line in lines if re.match(r"torch\b", line)]
    assert torch == [torch_line]
    if torch_line.startswith("torch=="):
        assert torch_line.removeprefix("torch==") in zerogpu.SUPPORTED_TORCH
    assert "torch>=2.4" in (ROOT / "requirements.txt").read_text()  # a local CPU install keeps its torch
    assert [line for line in lines if not re.match(r"torch\b", line)] == \
        [line for line in (ROOT / "requirements.txt").read_text().splitlines()
         if not re.match(r"(torch|pytest|setuptools)\b", line)]


def test_space_card_for_a_cpu_space_leaves_the_gpu_presets_out():
    zero = {f.path: f for f in space.space_files(ROOT, "zero-a10g")}["README.md"].content.decode()
    cpu = {f.path: f for f in space.space_files(ROOT, "cpu-basic")}["README.md"].content.decode()
    assert "preload_from_hub:" in zero and "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B" in zero.split("---")[1]
    front = cpu.split("---")[1]
    assert "preload_from_hub" not in front and "models:" in front and "  - microsoft/phi-4" in front
    assert 'python_version: "3.12.12"' in zero


def test_space_card_refuses_a_python_zerogpu_lacks():
    with pytest.raises(InvalidSettingError, match="3.10.13 or 3.12.12"):
        space.space_readme("---\npython_version: '3.11'\n---\n# T\n", set(), "zero-a10g")
    assert "python_version: '3.11'" in space.space_readme("---\npython_version: '3.11'\n---\n# T\n", set(), "cpu-basic")


def test_hub_refusal_becomes_an_hsd_error_that_says_what_to_do():
    request = importlib.import_module(hub_errors.Response.__module__).Request("POST", "https://huggingface.co/api")
    refusal = hub_errors.HfHubHTTPError("402 Payment Required", response=hub_errors.Response(402, request=request))
    with pytest.raises(HsdError, match="zero-a10g needs an account allowed to host it: for ZeroGPU, a free account"):
        space.push("someone/hsd-demo", root=ROOT, hardware="zero-a10g",
                   api=FakeApi(fail_hardware=refusal, existing_hardware="cpu-basic"), log=lambda *_: None)


@pytest.mark.parametrize("argv, message", [
    (["space", "push", "hsd-demo", "--dry-run"], "USER/NAME"),
    (["space", "push", "someone/hsd-demo", "--hardware", "gpu-9000", "--dry-run"], "Unknown Space hardware"),
])
def test_bad_space_id_or_hardware_fails_before_any_request(argv, message, no_hub, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_push_outside_a_checkout_says_so(tmp_path, monkeypatch):
    """Installed from a wheel, hsd has no app.py to deploy: the command says to run it from a checkout."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(space, "__file__", str(tmp_path / "site-packages" / "hsd" / "space.py"))
    with pytest.raises(HsdError, match="only a checkout"):
        space.push("someone/hsd-demo", dry_run=True, log=lambda *_: None)


@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs a git checkout")
def test_every_tracked_binary_goes_through_lfs():
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    binaries = []
    for name in filter(None, tracked.decode().split("\0")):
        path = ROOT / name
        if path.is_file() and b"\0" in path.read_bytes()[:8000]:
            binaries.append(name)
    assert binaries, "expected the embedded models and the screenshots"
    out = subprocess.run(["git", "check-attr", "filter", "--", *binaries], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out == [f"{name}: filter: lfs" for name in binaries]


@pytest.mark.parametrize("hardware", ["cpu-basic", "t4-small"])
def test_a_push_dry_run_for_other_hardware_keeps_spaces_and_preloads_nothing(hardware, no_hub, capsys):
    settings = _dry_run_lines(capsys, "--hardware", hardware)[-3]
    assert settings == (f"requirements.txt: torch>=2.4, spaces==0.51.3 (for {hardware}); README.md: python_version "
                        "3.12.12, preload_from_hub: none")
