"""The machine a measurement ran on: CPU or GPU, threads, library versions, in every benchmark output.

``host_info`` describes the host alone (the training scripts record it in checkpoints); ``machine_info``
adds what a run on a pair used (device, dtype, torch threads, load average); ``machine_line`` is the one
line printed above every table and figure.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

import torch


def cpu_name() -> str:
    """The CPU's model name from ``/proc/cpuinfo``; the platform's processor string elsewhere."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def host_info() -> dict:
    """The host: CPU, core count, library versions, platform, and the first GPU if there is one."""
    info = dict(cpu=cpu_name(), cpu_count=os.cpu_count(), torch=torch.__version__, python=platform.python_version(),
                platform=platform.platform())
    try:
        import tokenizers
        import transformers
        info.update(transformers=transformers.__version__, tokenizers=tokenizers.__version__)
    except Exception:  # noqa: BLE001 - a description never fails a run
        pass
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def machine_info(pair=None) -> dict:
    """The machine of a run on ``pair`` (an :class:`hsd.Pair`): CPU or GPU name, threads, library versions."""
    import transformers

    device = pair.target.device if pair is not None else torch.device("cpu")
    info = {"cpu": cpu_name(), "cpu_cores": os.cpu_count(), "threads": torch.get_num_threads(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "python": platform.python_version(), "device": str(device),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset")}
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    if pair is not None:
        info["dtype"] = str(pair.target.dtype).replace("torch.", "")
        try:
            info["load_average"] = os.getloadavg()[0]
        except OSError:
            pass
    return info


def machine_line(info: dict) -> str:
    dev = info.get("gpu") or f"{info['cpu']} ({info['cpu_cores']} cores)"
    load = f", load average {info['load_average']:.1f}" if "load_average" in info else ""
    return (f"{dev}, device {info['device']} {info.get('dtype', '')}, {info['threads']} torch threads, "
            f"OMP_WAIT_POLICY {info.get('omp_wait_policy', 'unset')}, torch {info['torch']}, transformers {info['transformers']}, python {info['python']}{load}")


def device_words(device: torch.device) -> tuple[str, str]:
    """A device for a status line: a few plain words (the GPU's name, or "CPU, 2 threads") and the detail behind
    them (the threads torch uses and the OpenMP wait policy, which decides CPU timings)."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device), f"CUDA device {device}"
    n = torch.get_num_threads()
    return (f"{device.type.upper()}, {n} thread{'s' if n != 1 else ''}",
            f"torch intra-op threads: {n}; OpenMP wait policy: {os.environ.get('OMP_WAIT_POLICY', 'unset').lower()}")


def device_name(device: torch.device) -> str:
    """A device in a few words: the GPU's name, or the CPU and its torch threads."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    n = torch.get_num_threads()
    return (f"{device.type.upper()} ({n} thread{'s' if n != 1 else ''}, OpenMP wait policy "
            f"{os.environ.get('OMP_WAIT_POLICY', 'unset').lower()})")
