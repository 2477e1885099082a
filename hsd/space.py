"""``hsd space push USER/NAME``: deploy the app to a Hugging Face Space with one command.

The files go up over HTTP with ``HfApi.upload_folder``, which sends large files through Xet/LFS, so no
git history holding binaries is ever pushed. What travels is an explicit allow-list (:data:`SPACE_FILES`)
plus two generated files: the Space card (``README.md``: the repository README's front matter, with
defaults for any missing key, and its body with links to files that do not travel turned into text) and
the Space's ``requirements.txt`` (the repository's, less the test-only packages, with torch pinned to a version
ZeroGPU supports unless the hardware asked for is not ZeroGPU). See docs/app.md, Deploy.
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from .errors import HsdError, InvalidSettingError
from .rehearse import HANDLERS as REHEARSED
from .zerogpu import SPACE_PYTHON, SPACE_TORCH, SUPPORTED_PYTHON, SUPPORTED_TORCH

SPACE_FILES = (  # patterns relative to the checkout; each must match at least one file
    "app.py",
    "hsd/**/*.py",
    "hsd/py.typed",
    "assets/tiny-code/target/*",
    "assets/tiny-code/drafter/*",
    "assets/tiny-code/drafter-bytes/*",
    "assets/tiny-code/drafter-shared/*",
    "assets/tiny-code/drafter-sampling/*",
    "assets/prompts/*.jsonl",
)
DELETE_PATTERNS = ["*.py", "hsd/*", "assets/*"]  # a module or model removed here is removed from the Space too
TEST_ONLY = {"pytest", "pytest-xdist", "setuptools"}
LARGE_BYTES = 10 * 1024 * 1024  # the Hub sends files over 10 MB, and binary files, through Xet/LFS
FRONT_MATTER_DEFAULTS = {"sdk": "gradio", "app_file": "app.py", "python_version": SPACE_PYTHON, "license": "apache-2.0"}
REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)[^)]*\)")


@dataclass(frozen=True)
class SpaceFile:
    """One file of the upload: its path in the Space, its size, and where its bytes come from."""

    path: str
    size: int
    large: bool
    source: Path | None = None  # a file of the checkout
    content: bytes | None = None  # a generated file

    @property
    def generated(self) -> bool:
        return self.source is None


def is_large(data: bytes, size: int) -> bool:
    """Whether the Hub stores the file through Xet/LFS: over 10 MB, or binary (a NUL byte, git's test)."""
    return size > LARGE_BYTES or b"\0" in data[:8000]


def checkout_root() -> Path:
    """The hsd checkout to deploy: the current directory if it is one, else the one this package is in."""
    for root in (Path.cwd(), Path(__file__).resolve().parent.parent):
        if (root / "app.py").is_file() and (root / "hsd" / "__init__.py").is_file():
            return root
    raise HsdError("hsd space push deploys app.py, which only a checkout of the hsd repository has: run it "
                   "from the checkout (the folder with app.py and hsd/).")


#: the hardware ``hsd space push`` asks for: ZeroGPU (``zero-a10g`` is its identifier in the Hub's API, whatever GPU
#: it runs on now). A new Space gets cpu-basic unless its creation asks for more (hub docs, "Spaces GPU Upgrades")
DEFAULT_HARDWARE = "zero-a10g"
#: who may host a ZeroGPU Space (hub docs, spaces-zerogpu.md, "Hosting your own ZeroGPU Spaces")
ZEROGPU_HOSTS = ("a free account in good standing (verified email, older than 30 days) hosts up to 2 ZeroGPU Spaces, "
                 "a PRO account up to 10, an organisation with a Team or Enterprise plan as its plan allows")


def zerogpu_hardware(hardware: str | None) -> bool:
    """Whether the Space may run on ZeroGPU: asked for (``zero-*``), or not said (the Space keeps what it has,
    and README.md suggests ZeroGPU). The files must then suit ZeroGPU; they also run on a CPU."""
    return hardware is None or hardware.startswith("zero")


def _drop_key(block: str, key: str) -> str:
    """A YAML block without one top-level key (its line, the comment lines right above it and, for a block
    list, its items)."""
    out, skipping = [], False
    for line in block.splitlines():
        if line.startswith(f"{key}:"):
            while out and out[-1].startswith("#"):
                out.pop()
            skipping = True
            continue
        if skipping and (line.startswith((" ", "\t", "-")) or not line.strip()):
            continue
        skipping = False
        out.append(line)
    return "\n".join(out)


def space_readme(readme: str, uploaded: set[str], hardware: str | None = None) -> str:
    """The Space card: the README's front matter (defaults for missing keys) and its body, where a link
    to a file that does not travel becomes its text and such an image is dropped. On ZeroGPU hardware the
    front matter must name a Python ZeroGPU supports; on any other hardware ``preload_from_hub`` is left out (only
    a ZeroGPU Space loads those presets at start-up; another Space would only spend its build and disk on them)."""
    from huggingface_hub import SpaceCard, SpaceCardData

    card = SpaceCard(readme) if readme.startswith("---") else None
    data, text = (card.data.to_dict(), card.text) if card else ({}, readme)
    missing = {k: v for k, v in FRONT_MATTER_DEFAULTS.items() if not data.get(k)}
    if data.get("sdk", "gradio") != "gradio":
        raise InvalidSettingError(f"README.md front matter says sdk: {data['sdk']}; the hsd app needs sdk: gradio.")
    python = str(data.get("python_version") or SPACE_PYTHON)
    if zerogpu_hardware(hardware) and python not in SUPPORTED_PYTHON:
        raise InvalidSettingError(f"README.md front matter says python_version: {python}, which ZeroGPU does not "
                                  f"support: use {' or '.join(SUPPORTED_PYTHON)} (or push with --hardware cpu-basic).")
    if "sdk_version" not in data:
        try:
            missing["sdk_version"] = version("gradio")  # the version the app runs with here
        except PackageNotFoundError:
            raise InvalidSettingError("README.md front matter has no sdk_version and gradio is not installed here: "
                                      "add sdk_version (the gradio version the app is tested with).") from None
    own = readme[: len(readme) - len(text)].strip()[3:-3].strip("\n")  # the README's block, as written
    if not zerogpu_hardware(hardware):  # the presets are GPU-sized: only a ZeroGPU Space loads them
        own = _drop_key(own, "preload_from_hub")
    front = "\n".join(part for part in (own, SpaceCardData(**missing).to_yaml() if missing else "") if part)

    def relink(m: re.Match) -> str:
        bang, label, target = m.groups()
        local = not re.match(r"^([a-z]+:|#|/)", target)
        if not local or target.split("#")[0] in uploaded:
            return m.group(0)
        return "" if bang else label

    lines = [(line, LINK.sub(relink, line)) for line in text.splitlines()]
    body = "\n".join(new for old, new in lines if new.strip() or not old.strip())  # a dropped image leaves no line
    return f"---\n{front}\n---\n{body}\n"


def _package(line: str) -> str:
    return re.split(r"[\s<>=!~\[;]", line.strip(), maxsplit=1)[0].lower()


def space_requirements(requirements: str, hardware: str | None = None) -> str:
    """The repository's requirements.txt less the test-only packages; for ZeroGPU (:func:`zerogpu_hardware`)
    torch is pinned to :data:`hsd.zerogpu.SPACE_TORCH`, one of the versions ZeroGPU supports, where the
    repository's own line (kept for any other hardware, and for a local install) admits any recent torch."""
    keep = []
    for line in requirements.splitlines():
        name = _package(line)
        if name in TEST_ONLY:
            continue
        if name == "torch" and zerogpu_hardware(hardware):
            line = f"torch=={SPACE_TORCH}  # ZeroGPU supports torch {', '.join(SUPPORTED_TORCH)} (hsd/zerogpu.py)"
        keep.append(line)
    return "\n".join(keep) + "\n"


def space_files(root: Path, hardware: str | None = None) -> list[SpaceFile]:
    """Every file the Space gets, in upload order: the allow-listed files, then the generated ones."""
    out: dict[str, SpaceFile] = {}
    for pattern in SPACE_FILES:
        found = sorted(p for p in root.glob(pattern) if p.is_file() and "__pycache__" not in p.parts)
        if not found:
            raise HsdError(f"{root / pattern} matches no file: the Space needs it (is {root} a full hsd checkout?).")
        for p in found:
            name, size = p.relative_to(root).as_posix(), p.stat().st_size
            with p.open("rb") as f:
                out[name] = SpaceFile(name, size, is_large(f.read(8000), size), p)
    uploaded = set(out) | {"README.md", "requirements.txt"}
    readme, requirements = ((root / name).read_text(encoding="utf-8") for name in ("README.md", "requirements.txt"))
    for name, text in [("README.md", space_readme(readme, uploaded, hardware)),
                       ("requirements.txt", space_requirements(requirements, hardware))]:
        data = text.encode("utf-8")
        out[name] = SpaceFile(name, len(data), is_large(data, len(data)), content=data)
    return list(out.values())


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


def _settings(files: list[SpaceFile], hardware: str | None) -> list[str]:
    """What the generated files set, for the dry run: the torch requirement, Python and preloaded models."""
    from huggingface_hub import SpaceCard

    by_path = {f.path: f for f in files}
    lines = by_path["requirements.txt"].content.decode().splitlines()
    torch, spaces = (next((line.split("#")[0].strip() for line in lines if _package(line) == name),
                          f"{name} (not listed)") for name in ("torch", "spaces"))
    data = SpaceCard(by_path["README.md"].content.decode()).data
    preload = data.get("preload_from_hub") or []
    target = "ZeroGPU" if zerogpu_hardware(hardware) else hardware
    return [f"requirements.txt: {torch}, {spaces} (for {target}); README.md: python_version "
            f"{data.get('python_version')}, preload_from_hub: {', '.join(preload) if preload else 'none'}"]


def check_hardware(hardware: str | None) -> None:
    from huggingface_hub import SpaceHardware

    known = [h.value for h in SpaceHardware]
    if hardware is not None and hardware not in known:
        raise InvalidSettingError(f"Unknown Space hardware {hardware!r}: use one of {', '.join(known)}.")


@contextmanager
def hub_errors(what: str, repo_id: str, hardware: str | None = None):
    """A Hub request's failure becomes an hsd error that says what to do."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    try:
        yield
    except OfflineModeIsEnabled:
        raise HsdError("HF_HUB_OFFLINE is set: unset it to push (or add --dry-run to only list the files).") from None
    except HfHubHTTPError as exc:
        status = getattr(exc.response, "status_code", None)
        hint = {401: " Log in with `hf auth login` (a token with write access) or set HF_TOKEN.",
                403: " The token needs write access to this namespace."}.get(status, "")
        if what in ("hardware", "create") and hardware and status in (402, 403):
            hint = (f" {hardware} needs an account allowed to host it: for ZeroGPU, {ZEROGPU_HOSTS}; other GPUs "
                    "need billing. cpu-basic is free (--hardware cpu-basic).")
        raise HsdError(f"The Hub refused the {what} request for {repo_id} ({status}): "
                       f"{str(exc).splitlines()[0]}.{hint}") from None


def stage(files: list[SpaceFile], folder: Path) -> Path:
    """Write the upload into ``folder`` as the Space will hold it (generated files included)."""
    for f in files:
        dest = Path(folder) / f.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if f.generated:
            dest.write_bytes(f.content)
        else:
            shutil.copyfile(f.source, dest)
    return Path(folder)


def push(repo_id: str, *, root: Path | None = None, hardware: str = DEFAULT_HARDWARE, private: bool = False,
         dry_run: bool = False, out: Path | None = None, api=None, log=print) -> str:
    """Create the Space with ``hardware`` in the creation request if it does not exist, upload :func:`space_files`
    (made for that hardware), and ask an existing Space for ``hardware`` when it runs on other hardware; returns
    its URL. ``dry_run``: list the files and send nothing; with ``out``, also write them there (:func:`stage`)."""
    from huggingface_hub import constants

    if not REPO_ID.match(repo_id or ""):
        raise InvalidSettingError(f"Space id {repo_id!r}: give it as USER/NAME (or ORG/NAME), e.g. someone/hsd-demo.")
    check_hardware(hardware)
    files = space_files(root or checkout_root(), hardware)
    url = f"{constants.ENDPOINT}/spaces/{repo_id}"
    if dry_run:
        for f in files:
            note = "  (generated)" if f.generated else ""
            log(f"{_size(f.size):>10}  {'large' if f.large else '     '}  {f.path}{note}")
        for line in _settings(files, hardware):
            log(line)
        n_large = sum(f.large for f in files)
        log(f"{len(files)} files, {_size(sum(f.size for f in files))}, {n_large} through Xet/LFS; "
            f"hardware {hardware}; {'private' if private else 'public'} if created.")
        if out is not None:
            log(f"wrote the {len(files)} files to {stage(files, out)}")
        log(f"dry run, nothing sent: {url}")
        return url
    if api is None:
        from huggingface_hub import HfApi, get_token

        if not get_token():
            raise HsdError("No Hugging Face token: run `hf auth login` (a token with write access) or set HF_TOKEN. "
                           "--dry-run needs none.")
        api = HfApi()
    from . import __version__

    with hub_errors("create", repo_id, hardware):
        existed = api.repo_exists(repo_id, repo_type="space")
        repo_url = api.create_repo(repo_id, repo_type="space", space_sdk="gradio", space_hardware=hardware,
                                   private=private, exist_ok=True)
    url = str(getattr(repo_url, "url", None) or repo_url or url)
    log(f"{'updating' if existed else 'created'} {repo_id}" + ("" if existed else f" on {hardware}"))
    with tempfile.TemporaryDirectory(prefix="hsd-space-") as tmp:
        stage(files, Path(tmp))
        log(f"uploading {len(files)} files ({_size(sum(f.size for f in files))}) to {repo_id}...")
        with hub_errors("upload", repo_id):
            api.upload_folder(repo_id=repo_id, repo_type="space", folder_path=tmp,
                              allow_patterns=[f.path for f in files], delete_patterns=DELETE_PATTERNS,
                              commit_message=f"Deploy hsd {__version__} with hsd space push")
    if existed:
        with hub_errors("hardware", repo_id, hardware):
            runtime = api.get_space_runtime(repo_id)
            current = str(getattr(runtime, "requested_hardware", None) or getattr(runtime, "hardware", None) or "")
            if current != hardware:
                api.request_space_hardware(repo_id, hardware)
                log(f"hardware requested: {hardware} (was {current or 'unknown'})")
    if zerogpu_hardware(hardware):
        log(f"ZeroGPU: {ZEROGPU_HOSTS}. Rehearse before pushing: python -m hsd space rehearse")
    log(url)
    return url


def add_space_parser(sub) -> None:
    space = sub.add_parser("space", help="deploy the app to a Hugging Face Space")
    actions = space.add_subparsers(dest="space_command", required=True)
    p = actions.add_parser("push", help="create or update a Space with the app, hsd and the embedded pair",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("repo_id", metavar="USER/NAME", help="the Space, e.g. someone/hsd-demo")
    p.add_argument("--hardware", default=DEFAULT_HARDWARE,
                   help="zero-a10g (ZeroGPU), cpu-basic (free, no GPU), t4-small, ...: asked for when the Space is "
                   "created, or of an existing Space that runs on other hardware")
    p.add_argument("--private", action="store_true", help="make the Space private when it is created")
    p.add_argument("--dry-run", action="store_true", help="list the files and sizes; no network, no token")
    p.add_argument("--out", type=Path, metavar="DIR", help="with --dry-run: also write the files there, as the "
                   "Space would get them (the generated README.md and requirements.txt included)")
    p.set_defaults(func=cmd_space_push)
    r = actions.add_parser("rehearse", help="run the app's handlers as a ZeroGPU Space runs them, before pushing",
                           description="Imports the app with the spaces package in its ZeroGPU mode, launches it "
                           "here and calls its handlers over HTTP on Gradio's worker threads, each GPU function in "
                           "a GPU worker that spaces forks: with the embedded pair (preloaded) and a pair of local "
                           "directories loaded at run time. Exits 0 only if every handler produced its output. "
                           "See hsd/rehearse.py for what stands in for a GPU on a machine without one.",
                           formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    r.add_argument("--pair", nargs=2, metavar=("TARGET", "DRAFTER"),
                   help="local directories to load at run time (default: copies of the embedded pair)")
    r.add_argument("--handlers", default=",".join(REHEARSED),
                   help=f"comma-separated, from {', '.join(REHEARSED)}")
    r.add_argument("--verbose", action="store_true", help="print the Space's whole log")
    r.set_defaults(func=cmd_space_rehearse)


def cmd_space_push(args) -> int:
    if args.out is not None and not args.dry_run:
        raise InvalidSettingError("--out writes what a push would upload: use it with --dry-run.")
    push(args.repo_id, hardware=args.hardware, private=args.private, dry_run=args.dry_run, out=args.out)
    return 0


def cmd_space_rehearse(args) -> int:
    from .rehearse import rehearse

    handlers = [h.strip() for h in args.handlers.split(",") if h.strip()]
    unknown = [h for h in handlers if h not in REHEARSED]
    if unknown or not handlers:
        raise InvalidSettingError(f"--handlers takes names from {', '.join(REHEARSED)}; got {args.handlers!r}.")
    code, results = rehearse(tuple(args.pair) if args.pair else None, handlers, verbose=args.verbose)
    ok = sum(r["ok"] for r in results)
    why = {124: "; it ran out of time"}.get(code, "")
    print(f"{ok} of {len(results)} handler calls produced their output" + ("" if code == 0 else
          f"; the rehearsal failed (exit {code}{why})"))
    return 0 if code == 0 else 1
