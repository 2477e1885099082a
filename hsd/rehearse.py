"""``hsd space rehearse``: run the app's handlers the way a ZeroGPU Space runs them, before pushing.

What is real: the ``spaces`` package at the version the Space installs (:data:`SPACES_VERSION`), in its ZeroGPU
mode, so the main process emulates CUDA with its thread-local TorchFunctionMode; app.py imported as the Space
imports it (presets placed on the emulated cuda at start-up, then packed to disk by ``spaces`` at launch); the
Gradio server launched on this machine and every handler called over its HTTP API, so each runs on one of
Gradio's worker threads; each GPU function scheduled through ``spaces``' client, run in a GPU worker process
that ``spaces`` forks (its arguments and results pickled through its queues), and a worker reused for a later
call, as ZeroGPU reuses an idle one. The pairs: the embedded one (preloaded at start-up) and a pair of local
directories that nothing preloaded (copies of the embedded pair, or ``--pair``).

What stands in, and why:

* **The ZeroGPU device API** (a service of the Hugging Face platform that grants GPUs): a local HTTP server
  that grants every request at once (``/schedule``; the first call of each GPU function gets a fresh worker,
  later ones the idle worker) and accepts ``/allow``, ``/release`` and ``/startup-report``.
* **On a machine without CUDA**, two things that need one: torch's CUDA hooks that a CPU-only build lacks
  (:func:`cpu_torch_shims`: ``torch.version.cuda``, ``torch._C._cuda_init``, a picklable
  ``torch.cuda._is_in_bad_fork``), and, in the GPU worker, the switch to the real GPU (``spaces``' ``unpatch``,
  ``init`` and ``move``): the worker stays in the emulation and gets the packed tensors' data back in host
  memory (:func:`_host_move`), so the GPU functions run on the CPU through the emulation. The rest of the
  worker (fork, queues, pickling, reuse) is the package's own.

Exit status 0 only if every handler produced its output (text for a run, a result for the others).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from . import marks
from .errors import HsdError
from .zerogpu import SPACES_VERSION

#: the whole rehearsal's limit: all six handlers on both pairs take about 16 minutes on 2 busy CPU cores
CHILD_TIMEOUT_S = 2400
#: the settings the rehearsal's calls use: short, so the emulated forwards (every op through ``spaces``' mode)
#: stay quick on a CPU
FORM = dict(prompt="def fibonacci(n):", mode="raw", temperature=0, top_k=0, top_p=1.0, lookahead=4,
            max_new_tokens=12, seed=0, drafter_temperature=None, draft_threshold=None, shared_noise=False)
HANDLERS = ("check", "run", "compare", "lossless", "advise", "drafters")
QUICK = ("check", "run")


# ----------------------------------------------------------------------------- the device API's stand-in

class DeviceApi:
    """A local stand-in for ZeroGPU's device API: grants every GPU request at once and records the calls."""

    def __init__(self):
        self.calls: list[tuple[str, dict]] = []
        self.granted: list[bool] = []  # per /schedule: whether it reported an idle worker (reused)
        self._tasks: set[str] = set()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                url = urlparse(self.path)
                params = {k: v[0] for k, v in parse_qs(url.query).items()}
                api.calls.append((url.path, params))
                if url.path == "/schedule":
                    task = params.get("taskId", "")
                    body = json.dumps({"idle": task in api._tasks, "nvidiaIndex": 0,
                                       "nvidiaUUID": "GPU-rehearsal", "allowToken": uuid.uuid4().hex}).encode()
                    api.granted.append(task in api._tasks)
                    api._tasks.add(task)
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                self.send_response(200 if url.path in ("/allow", "/release", "/startup-report") else 404)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ----------------------------------------------------------------------------- CPU-only stand-ins

def _not_in_bad_fork() -> bool:
    return False


def _no_cuda():
    raise AssertionError("Torch not compiled with CUDA enabled")


def cpu_torch_shims() -> list[str]:
    """What ``spaces`` reads of torch's CUDA support at import, on a torch built without it; returns what was set.
    A CUDA build is left as it is."""
    import torch

    done = []
    if torch.version.cuda is None:
        torch.version.cuda = "12.8"  # spaces/zero/torch/static.py picks its memory-stats layout by it
        done.append("torch.version.cuda")
    if not hasattr(torch._C, "_cuda_init"):  # noqa: SLF001
        torch._C._cuda_init = _no_cuda  # noqa: SLF001
        done.append("torch._C._cuda_init")
    if getattr(torch.cuda._is_in_bad_fork, "__name__", "") == "<lambda>":  # noqa: SLF001 - a CPU build's stub
        torch.cuda._is_in_bad_fork = _not_in_bad_fork  # noqa: SLF001 - spaces pickles it into a process pool
        done.append("torch.cuda._is_in_bad_fork")
    return done


def _host_move(callback=None):
    """The worker's copy onto its GPU, in host memory: every tensor ``spaces`` packed to disk at launch gets its
    data back as a host tensor behind its emulated-cuda stand-in; tensors placed later kept theirs."""
    import torch
    from spaces.zero.torch import patching

    for pack in patching.tensor_packs:
        with open(pack.path(), "rb") as f:
            for meta, size, aligned in [*(t for batch in pack.batches for t in batch), *pack.big_tensors]:
                data = bytearray(f.read(aligned)[:size])
                storage = torch.frombuffer(data, dtype=torch.uint8).untyped_storage() if size else torch.UntypedStorage(0)
                host = torch.empty(0, dtype=meta.dtype).set_(storage, 0, meta.shape, meta.stride())
                for fake in pack.fakes[meta]:
                    patching.cuda_aliases[fake] = host
                if callback is not None:
                    callback(size)


def _worker_stays_emulated() -> None:
    import spaces.zero.torch as zero_torch

    zero_torch.unpatch = lambda: None
    zero_torch.init = lambda nvidia_uuid: None
    zero_torch.move = _host_move


# ----------------------------------------------------------------------------- the child: the Space itself

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(handler: str, target: str, drafter: str) -> tuple[str, dict]:
    where = dict(device="auto", dtype="auto")
    if handler == "check":
        return "/check", dict(target=target, drafter=drafter, algorithm="slem", **where)
    if handler == "run":
        return "/run", dict(target=target, drafter=drafter, algorithm="slem", **FORM, **where, show_rejected=True)
    if handler == "compare":
        return "/compare", dict(target=target, drafter=drafter, **FORM, **where)
    if handler == "lossless":
        return "/lossless", dict(target=target, drafter=drafter, algorithm="slem", n=200, **FORM, **where)
    if handler == "advise":
        return "/advise", dict(target=target, drafter=drafter, **FORM, **where)
    if handler == "drafters":
        return "/drafters", dict(target=target, drafter_names=drafter, algorithm="slem", num_prompts=1, **FORM, **where)
    raise ValueError(handler)


def _produced(handler: str, result) -> tuple[bool, str]:
    """Whether a handler's final output is what it exists to give, and a line that shows it."""
    first = result[0] if isinstance(result, (list, tuple)) else result
    status = str(first or "")
    line = marks.plain(status).strip()  # the badge as its word in brackets: "[done] **SLEM** wrote ..."
    if handler == "run":
        html = str(result[1] or "") if isinstance(result, (list, tuple)) and len(result) > 1 else ""
        return marks.starts(status, "ok") and bool(html.strip()), line.splitlines()[0][:80]
    ok = bool(status.strip()) and not marks.starts(status, "error") and "Unexpected error" not in status
    return ok, line.splitlines()[0][:80] if line else "(nothing)"


def child(config: dict) -> int:
    """In the rehearsal's Space process: import ``spaces`` and the app, launch, call every handler."""
    shims = cpu_torch_shims()
    import spaces  # noqa: F401 - before anything is placed on cuda, as the app does
    from spaces.config import Config

    if not Config.zero_gpu:
        print("spaces did not enter its ZeroGPU mode (SPACES_ZERO_GPU)", flush=True)
        return 2
    import torch

    stand_ins = [f"torch's CUDA hooks ({', '.join(shims)})"] if shims else []
    if not torch.backends.cuda.is_built():
        _worker_stays_emulated()
        stand_ins.append("the GPU worker's switch to a real GPU (spaces' unpatch, init and move)")
    print("stands in for a GPU here: " + ("; ".join(stand_ins) or "nothing"), flush=True)
    sys.path.insert(0, config["root"])
    t0 = time.perf_counter()
    import app

    port = _free_port()
    app.demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                    show_error=True)
    print(f"app imported and launched in {time.perf_counter() - t0:.1f} s (presets loaded and packed)", flush=True)
    from gradio_client import Client

    client = Client(f"http://127.0.0.1:{port}/", verbose=False)
    results = []
    for label, (target, drafter) in config["pairs"].items():
        for handler in config["handlers"]:
            api, kwargs = _request(handler, target, drafter)
            t0 = time.perf_counter()
            try:
                ok, line = _produced(handler, client.predict(api_name=api, **kwargs))
            except Exception as exc:  # noqa: BLE001 - a failed call is the finding: recorded, not raised
                ok, line = False, f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
            seconds = time.perf_counter() - t0
            results.append(dict(pair=label, handler=handler, ok=ok, seconds=round(seconds, 2), line=line))
            print(f"{'ok  ' if ok else 'FAIL'} {label:<12} {handler:<9} {seconds:6.1f} s  {line}", flush=True)
            Path(config["out"]).write_text(json.dumps(results, indent=1))  # after each call: a timeout keeps them
    app.demo.close()
    return 0 if results and all(r["ok"] for r in results) else 1


# ----------------------------------------------------------------------------- the command

def spaces_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("spaces")
    except PackageNotFoundError:
        return None


def _copy_pair(root: Path, into: Path) -> tuple[str, str]:
    from .loading import EMBEDDED

    target, drafter = EMBEDDED["tiny-code"]
    out = []
    for name, path in (("target", target), ("drafter", drafter)):
        dest = into / name
        shutil.copytree(root / path if not Path(path).is_absolute() else Path(path), dest)
        out.append(str(dest))
    return out[0], out[1]


def rehearse(pair: tuple[str, str] | None = None, handlers=HANDLERS, *, root: Path | None = None,
             timeout_s: float = CHILD_TIMEOUT_S, echo=print, verbose: bool = False,
             env: dict | None = None) -> tuple[int, list[dict]]:
    """Run the rehearsal: returns the Space process's exit status and its results (one per pair and handler,
    with whether its GPU call ran in a fresh or a reused worker). ``env``: more environment for the Space
    process."""
    found = spaces_version()
    if found != SPACES_VERSION:
        raise HsdError(f"The rehearsal runs the spaces package the Space installs, version {SPACES_VERSION}; this "
                       f"environment has {found or 'none'}: pip install spaces=={SPACES_VERSION}")
    from .loading import EMBEDDED

    root = root or Path(__file__).resolve().parents[1]
    with tempfile.TemporaryDirectory(prefix="hsd-rehearse-") as tmp:
        tmp = Path(tmp)
        local = pair or _copy_pair(root, tmp)
        api = DeviceApi()
        config = dict(root=str(root), out=str(tmp / "results.json"), handlers=list(handlers),
                      pairs={"embedded": list(EMBEDDED["tiny-code"]), "directories": list(local)})
        env = {**os.environ, "SPACES_ZERO_GPU": "true", "SPACES_ZERO_DEVICE_API_URL": api.url,
               "ZEROGPU_OFFLOAD_DIR": str(tmp / "offload"), "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False",
               "HOME": os.environ.get("HOME", str(tmp)), "PYTHONPATH": str(root), **(env or {})}
        echo(f"rehearsing the ZeroGPU Space with spaces {found} (device API stand-in at {api.url}); pairs: embedded "
             f"(preloaded), directories {local[0]} <- {local[1]} (loaded at run time)")
        # its own process group: on a timeout the Space's GPU workers (forked by spaces) go with it
        proc = subprocess.Popen([sys.executable, "-m", "hsd.rehearse", "--child", json.dumps(config)], env=env,
                                cwd=root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        try:
            output, _ = proc.communicate(timeout=timeout_s)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            code = 124
        finally:
            api.close()
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # what is left of the group: workers of a finished Space
            except ProcessLookupError:
                pass
        for line in output.splitlines():
            if line.startswith(("ok  ", "FAIL", "stands in", "app imported")) or verbose or code not in (0, 1):
                echo(line)
        out = tmp / "results.json"
        results = json.loads(out.read_text()) if out.exists() else []
        reused = [idle for idle in api.granted]
        echo(f"GPU calls scheduled through spaces: {len(reused)} ({reused.count(False)} in a fresh worker, "
             f"{reused.count(True)} in a reused one)")
    return code, results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hsd.rehearse")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(json.loads(args.child))
    parser.error("run it as `python -m hsd space rehearse`")
    return 2


if __name__ == "__main__":
    sys.exit(main())
