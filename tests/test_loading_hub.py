"""Hub conventions, offline: a revision pinned per model through the API and the CLI, the
resolved commit in every result, Hub failures classified by ``huggingface_hub.errors`` type into hsd's errors,
and offline mode read through ``huggingface_hub.constants``.

The Hub is a Hugging Face cache built in a temporary folder (``models--org--name/refs`` and ``snapshots``), and,
for the error cases, an ``httpx2.MockTransport`` behind ``huggingface_hub.set_client_factory`` that answers as
the Hub does (status codes and ``X-Error-Code`` headers): no request leaves the machine.
"""

import json
import os
import subprocess
import sys

import httpx2
import huggingface_hub
import pytest
import torch
from huggingface_hub import constants

import hsd
import hsd.loading as loading
from builders import bytelevel_tokenizer, sentencepiece_tokenizer, tiny_llama
from hsd.cli import main

MAIN, V1 = "a" * 40, "b" * 40


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """A Hugging Face cache holding org/tiny-target (main and v1: different weights) and org/tiny-drafter."""
    root = tmp_path_factory.mktemp("hub")
    for repo, tok, commits in (("tiny-target", bytelevel_tokenizer(), {"main": (MAIN, 0), "v1": (V1, 1)}),
                               ("tiny-drafter", sentencepiece_tokenizer(), {"main": (MAIN, 2)})):
        folder = root / "cache" / f"models--org--{repo}"
        (folder / "refs").mkdir(parents=True)
        for ref, (commit, seed) in commits.items():
            model = tiny_llama(tok, seed)
            model.generation_config.eos_token_id = tok.eos_token_id
            model.save_pretrained(folder / "snapshots" / commit)
            tok.save_pretrained(folder / "snapshots" / commit)
            (folder / "refs" / ref).write_text(commit)
    return root / "cache"


@pytest.fixture
def hub(hub_cache, monkeypatch):
    """The temporary cache as the Hugging Face cache, offline, with hsd's model cache empty."""
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(hub_cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hsd.clear_cache()
    yield hub_cache
    hsd.clear_cache()


def test_each_model_is_pinned_to_its_revision_and_the_result_records_the_commit(hub):
    pinned = hsd.load_pair("org/tiny-target", "org/tiny-drafter", target_revision="v1", device="cpu")
    default = hsd.load_pair("org/tiny-target", "org/tiny-drafter", device="cpu")
    assert (pinned.target.revision, pinned.target.commit) == ("v1", V1)
    assert (default.target.revision, default.target.commit) == (None, MAIN)
    assert pinned.drafter is default.drafter and pinned.drafter.commit == MAIN
    assert not torch.equal(pinned.target.model.lm_head.weight, default.target.model.lm_head.weight)
    by_hash = hsd.load_model("org/tiny-target", revision=V1, device="cpu")
    assert by_hash.commit == V1 and torch.equal(by_hash.model.lm_head.weight, pinned.target.model.lm_head.weight)
    settings = hsd.generate(pinned, "def f(x):", algorithm="slem", max_new_tokens=3).settings
    assert settings["target_revision"] == "v1" and settings["target_commit"] == V1
    assert settings["drafter_revision"] is None and settings["drafter_commit"] == MAIN
    assert hsd.is_loaded("org/tiny-target", revision="v1", device="cpu")


def test_local_directories_record_no_commit(model_dirs):
    pair = hsd.load_pair(model_dirs["target"], model_dirs["drafter"], device="cpu")
    assert pair.provenance() == {"target": model_dirs["target"], "target_revision": None, "target_commit": None,
                                 "drafter": model_dirs["drafter"], "drafter_revision": None, "drafter_commit": None}


def test_cli_pins_revisions_and_writes_the_commits_to_the_json(hub, tmp_path, capsys):
    out = tmp_path / "run.json"
    argv = ["generate", "--target", "org/tiny-target", "--target-revision", "v1", "--drafter", "org/tiny-drafter",
            "--drafter-revision", MAIN, "--device", "cpu", "--prompt", "def f", "--max-new-tokens", "3", "--json",
            str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    settings = json.loads(out.read_text())["settings"]
    assert (settings["target_commit"], settings["drafter_commit"], settings["drafter_revision"]) == (V1, MAIN, MAIN)


@pytest.mark.parametrize("argv,fragment", [
    ("vocab --target {target} --drafter {drafter} --target-revision v1",
     "--target-revision v1 was given for '{target}', a local directory"),
    ("generate --preset tiny-code --drafter-revision v1 --prompt x",
     "--drafter-revision v1 was given for"),
    ("generate --target org/tiny-target --algorithm ar --drafter-revision v1 --prompt x",
     "--drafter-revision v1 was given but there is no drafter: pass --drafter <hub id> too"),
    ("generate --target org/tiny-target --target-revision v9 --algorithm ar --prompt x",
     "'org/tiny-target' at revision 'v9' is not available locally"),
])
def test_cli_revision_mistakes_say_what_to_do(hub, model_dirs, capsys, argv, fragment):
    assert main(argv.format(**model_dirs).split()) == 2
    err = capsys.readouterr().err
    assert fragment.format(**model_dirs) in err and "Traceback" not in err, err


def test_a_revision_is_never_silently_ignored(model_dirs):
    with pytest.raises(hsd.InvalidSettingError, match="target_revision='main' was given for .* a local directory"):
        hsd.load_pair(model_dirs["target"], model_dirs["drafter"], target_revision="main")
    with pytest.raises(hsd.InvalidSettingError, match="revision must be a str"):
        hsd.load_model("org/tiny-target", revision=3)


# ------------------------------------------------------------------------------- Hub errors, by their types

def _hub_answers(api_status=200, api_headers=None, file_status=200, file_headers=None):
    """A Hub that answers the revision lookup (``/api/...``) and every file request with these statuses."""
    def handle(request: httpx2.Request) -> httpx2.Response:
        if request.url.path.startswith("/api/"):
            if api_status == 200:
                return httpx2.Response(200, json={"id": "org/remote", "sha": "c" * 40, "siblings": []})
            return httpx2.Response(api_status, headers=api_headers or {}, request=request)
        return httpx2.Response(file_status, headers=file_headers or {}, request=request)
    return handle


def _no_network(request: httpx2.Request) -> httpx2.Response:
    raise httpx2.ConnectError("no route to host", request=request)


HUB_ERRORS = [
    (_hub_answers(404, {"X-Error-Code": "RepoNotFound"}), hsd.ModelNotFoundError,
     "was not found on the Hugging Face Hub or as a local directory"),
    (_hub_answers(404, {"X-Error-Code": "RevisionNotFound"}), hsd.RevisionNotFoundError,
     "has no revision 'v7': give a branch, tag or commit hash that exists"),
    (_hub_answers(file_status=403, file_headers={"X-Error-Code": "GatedRepo"}), hsd.GatedModelError,
     "is a gated model: accept its licence on https://huggingface.co/org/remote"),
    (_hub_answers(401, {"X-Error-Message": "Invalid credentials in Authorization header"}), hsd.HubAuthError,
     "refused the access token while loading 'org/remote' (401: invalid"),
    (_hub_answers(file_status=403), hsd.HubAuthError, "(403: it lacks permission for this repository)"),
    (_hub_answers(503), hsd.ModelNotFoundError, "The Hugging Face Hub answered 503 while loading 'org/remote'"),
    (_no_network, hsd.ModelNotFoundError, "is not available locally and the Hugging Face Hub cannot be reached."),
]


@pytest.mark.parametrize("handler,error,fragment", HUB_ERRORS, ids=["not found", "revision", "gated", "bad token",
                                                                    "no permission", "hub down", "no network"])
def test_hub_errors_become_hsd_errors_by_type(tmp_path, monkeypatch, handler, error, fragment):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(constants, "HF_HUB_ETAG_TIMEOUT", 1)
    monkeypatch.setattr(constants, "HF_HUB_DOWNLOAD_TIMEOUT", 1)
    huggingface_hub.set_client_factory(lambda: httpx2.Client(transport=httpx2.MockTransport(handler)))
    try:
        with pytest.raises(error) as info:
            hsd.load_model("org/remote", revision="v7" if error is hsd.RevisionNotFoundError else None, device="cpu")
    finally:
        huggingface_hub.set_client_factory(huggingface_hub.utils._http.default_client_factory)
    assert fragment in str(info.value), info.value
    assert loading.hub_cause(info.value.__cause__) is not None  # classified from the Hub's own exception


def test_offline_is_read_through_huggingface_hub_constants_for_both_variables(tmp_path):
    """``TRANSFORMERS_OFFLINE`` alone turns offline mode on (huggingface_hub reads both): no request is made and
    the message names it."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")}
    env.update(TRANSFORMERS_OFFLINE="1", HF_HUB_CACHE=str(tmp_path), PYTHONPATH=os.getcwd())
    code = ("import hsd, hsd.loading as l, hsd.planning as p\n"
            "print(l.offline(), p.hub_params('org/remote')[1])\n"
            "try:\n    hsd.load_model('org/remote', device='cpu')\n"
            "except hsd.ModelNotFoundError as e:\n    print(e)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("True Hub offline (HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE)"), proc.stdout
    assert "offline mode: HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE is set" in proc.stdout


def test_planning_reads_hub_errors_by_type(monkeypatch):
    from huggingface_hub import errors

    import hsd.planning as planning

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    response = httpx2.Response(404, request=httpx2.Request("GET", "https://huggingface.co/api/models/org/x"))
    for exc, note in ((errors.GatedRepoError("g", response=response), "gated"),
                      (errors.RevisionNotFoundError("r", response=response), "no revision 'v7'"),
                      (errors.RepositoryNotFoundError("n", response=response), "not found on the Hub"),
                      (ConnectionError("down"), "Hub not reachable")):
        def fail(*a, exc=exc, **k):
            raise exc
        monkeypatch.setattr(huggingface_hub, "model_info", fail)
        assert note in planning.hub_params("org/x", "v7")[1]


@pytest.mark.parametrize("command", ["generate --prompt x", "vocab", "bench", "advise"])
def test_every_subcommand_that_loads_a_pair_takes_both_revisions(command):
    from hsd.cli import build_parser

    args = build_parser().parse_args(command.split() + ["--target-revision", "v1", "--drafter-revision", MAIN])
    assert (args.target_revision, args.drafter_revision) == ("v1", MAIN)


def test_plan_load_names_the_pinned_revision_and_knows_it_is_loaded(hub):
    import hsd.planning as planning

    plan = planning.plan_load("org/tiny-target", "", "cpu", target_revision="v1")
    assert "`org/tiny-target` @ `v1`: Hub offline" in plan, plan
    hsd.load_model("org/tiny-target", revision="v1", device="cpu")
    assert "already loaded" in planning.plan_load("org/tiny-target", "", "cpu", target_revision="v1")
    assert "already loaded" not in planning.plan_load("org/tiny-target", "", "cpu")  # main is another model


def test_vocab_and_advise_json_record_the_commits(hub, tmp_path, capsys):
    models = ["--target", "org/tiny-target", "--target-revision", "v1", "--drafter", "org/tiny-drafter",
              "--device", "cpu"]
    assert main(["vocab", *models, "--json", str(tmp_path / "vocab.json")]) == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "vocab.json").read_text())
    assert (report["target"]["revision"], report["target"]["commit"], report["drafter"]["commit"]) == ("v1", V1, MAIN)
    argv = ["advise", *models, "--num-prompts", "1", "--max-new-tokens", "4", "--algorithms", "slem", "--json",
            str(tmp_path / "advice.json")]
    assert main(argv) == 0, capsys.readouterr().err
    pair = json.loads((tmp_path / "advice.json").read_text())["pair"]
    assert (pair["target_commit"], pair["drafter_commit"]) == (V1, MAIN)


def test_a_form_pins_a_revision_as_name_at_revision(monkeypatch, tmp_path):
    from hsd import planning

    assert planning.split_revision(" Qwen/Qwen2.5-0.5B@v1.0 ") == ("Qwen/Qwen2.5-0.5B", "v1.0")
    assert planning.split_revision("Qwen/Qwen2.5-0.5B") == ("Qwen/Qwen2.5-0.5B", None)
    odd = tmp_path / "model@2"
    odd.mkdir()
    assert planning.split_revision(str(odd)) == (str(odd), None)  # a directory's own name is not split
    with pytest.raises(hsd.InvalidSettingError, match="owner/name@revision"):
        planning.split_revision("Qwen/Qwen2.5-0.5B@")
    seen = {}
    monkeypatch.setattr(planning, "load_pair", lambda *a, **k: seen.update(k, args=a) or "pair")
    assert planning.load_named_pair("owner/target@abc123", "owner/drafter@v2") == "pair"
    assert seen["args"] == ("owner/target", "owner/drafter")
    assert (seen["target_revision"], seen["drafter_revision"]) == ("abc123", "v2")
    assert not planning.loadable_named("owner/target@abc123", "")  # a pinned Hub model is checked by the button
