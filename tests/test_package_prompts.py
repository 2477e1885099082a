"""The prompt sets cut from held-out packages (``scripts/build_prompts.py --corpus``): what a prompt is, how the
sets are drawn, and the committed files."""

import ast
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

import build_prompts  # noqa: E402

SOURCE = '''import functools


def plain(a, b):
    """Add two numbers and return the sum."""
    return a + b


class Box:
    def method(self, x):
        """Put x into the box, replacing
        what was there.
        """
        self.x = x

    @functools.cache
    def decorated(
        self,
        y,
    ):
        """Look y up once and remember it."""
        return y


def undocumented(a):
    return a


def trivial(a):
    """Getter."""
    return a


def only_a_docstring():
    """Nothing follows this docstring at all."""
'''


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (ROOT / "assets" / "prompts" / f"{name}.jsonl").read_text().splitlines()]


def _function_with_only_its_docstring(prompt: str) -> bool:
    """Whether ``prompt`` is exactly a function's header and docstring: it parses as a function (a method's
    indented prompt inside a block) whose body is the docstring alone."""
    tree = ast.parse(prompt if not prompt[0].isspace() else "if 1:\n" + prompt)
    node = tree.body[0].body[0] if isinstance(tree.body[0], ast.If) else tree.body[0]
    return (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.body) == 1
            and ast.get_docstring(node) is not None)


def test_a_prompt_is_a_functions_header_and_docstring_as_indented_in_its_file():
    """Functions and methods with a docstring and a body after it; the decorator is left out, a header over
    several lines kept whole; no trailing newline. No docstring, a trivial one, or nothing after it: no prompt."""
    found = dict(build_prompts.docstring_prompts(SOURCE))
    lines = SOURCE.splitlines()
    assert sorted(found) == [4, 10, 17]
    assert found[4] == 'def plain(a, b):\n    """Add two numbers and return the sum."""'
    assert found[10] == "\n".join(lines[9:13])
    assert found[10].startswith("    def method(self, x):") and found[10].endswith('        """')
    assert found[17] == "\n".join(lines[16:21])
    assert found[17].startswith("    def decorated(\n") and "@functools" not in found[17]
    assert all(_function_with_only_its_docstring(p) for p in found.values())


def test_a_prompt_ends_where_the_functions_code_begins():
    """Each prompt plus the file's next line parses: what the model is asked for is the function's code."""
    for _, prompt in build_prompts.docstring_prompts(SOURCE):
        rest = SOURCE[SOURCE.index(prompt) + len(prompt):].split("\n", 2)[1]
        text = prompt + "\n" + rest
        ast.parse(text if not text[0].isspace() else "if 1:\n" + text)


def _corpus(tmp_path: Path) -> Path:
    """A corpus folder as build_corpus.py writes it: two evaluation packages, one calibration package, and a
    training split holding a vendored copy of one evaluation function."""
    def doc(source, path, text, group=None):
        return dict(source=source, path=f"{source}/{path}", text=text, **({"group": group} if group else {}))

    def funcs(prefix, n):
        return "".join(f'def {prefix}{i}(x):\n    """Compute {prefix} number {i} of x."""\n    return x\n\n\n'
                       for i in range(n))

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    vendored = 'class V:\n    def alpha0(x):\n        """Compute alpha number 0 of x."""\n        return x\n'
    files = {"train.jsonl": [doc("other", "other/vendor.py", vendored)],
             "evaluation.jsonl": [doc("alpha", "alpha/a.py", funcs("alpha", 3), "evaluation"),
                                  doc("beta", "beta/b.py", funcs("beta", 5), "evaluation")],
             "heldout.jsonl": [doc("gamma", "gamma/g.py", funcs("gamma", 2) + funcs("beta", 1), "calibration")],
             "heldout_files.jsonl": []}
    for name, docs in files.items():
        (corpus / name).write_text("".join(json.dumps(d) + "\n" for d in docs))
    packages = [dict(name="alpha", version="1.0", licence="MIT", split="evaluation"),
                dict(name="beta", version="2.1", licence="BSD-3-Clause", split="evaluation"),
                dict(name="gamma", version="0.3", licence="Apache-2.0", split="calibration"),
                dict(name="other", version="9", licence="MIT", split="train")]
    (corpus / "manifest.json").write_text(json.dumps(dict(
        packages=packages, heldout_packages=dict(evaluation=["alpha", "beta"], calibration=["gamma"]))))
    return corpus


def test_package_sets_are_round_robin_leave_out_trained_copies_and_share_no_prompt(tmp_path):
    corpus, taken = _corpus(tmp_path), set()
    evaluation = build_prompts.package_prompts(corpus, "evaluation", 8, taken)
    calibration = build_prompts.package_prompts(corpus, "calibration", 8, taken)
    # alpha0 is in the training split (vendored into another package): alpha has two prompts left
    assert [r["package"] for r in evaluation] == ["alpha", "beta", "alpha"] + ["beta"] * 4
    assert sorted(r["prompt"].split("(")[0] for r in evaluation) == [
        "def alpha1", "def alpha2", "def beta0", "def beta1", "def beta2", "def beta3", "def beta4"]
    # the calibration package's copy of beta0 is taken by the evaluation set already
    assert sorted(r["prompt"].split("(")[0] for r in calibration) == ["def gamma0", "def gamma1"]
    first = evaluation[1]
    assert (first["version"], first["license"]) == ("2.1", "BSD-3-Clause")
    path, line = first["source"].rsplit(":", 1)
    text = json.loads((corpus / "evaluation.jsonl").read_text().splitlines()[1])["text"]
    assert path == "beta/beta/b.py" and text.splitlines()[int(line) - 1] == first["prompt"].splitlines()[0]
    again = build_prompts.package_prompts(corpus, "evaluation", 8, set())
    assert again == evaluation  # seeded: the same corpus gives the same set


@pytest.mark.parametrize("name", ["code-packages", "code-calibration"])
def test_package_prompt_files_name_their_package_and_are_headers_with_docstrings(name):
    rows = _rows(name)
    assert len(rows) >= 12 and [r["id"] for r in rows] == [f"{name}-{i}" for i in range(len(rows))]
    for r in rows:
        assert r["package"] and r["version"] and r["license"], r["id"]
        assert r["source"].startswith(r["package"] + "/") and r["source"].rsplit(":", 1)[1].isdigit()
        assert not r["prompt"].endswith("\n") and _function_with_only_its_docstring(r["prompt"]), r["id"]
    counts = Counter(r["package"] for r in rows)
    assert len(counts) >= 4 and max(counts.values()) - min(counts.values()) <= 1  # round-robin: none dominates
    assert len({r["package"] for r in rows[:len(counts)]}) == len(counts)  # the first prompts cover every package
    assert len({r["prompt"] for r in rows}) == len(rows)


def test_evaluation_and_calibration_prompts_come_from_different_packages():
    evaluation, calibration = _rows("code-packages"), _rows("code-calibration")
    assert not {r["package"] for r in evaluation} & {r["package"] for r in calibration}
    assert not {r["prompt"] for r in evaluation} & {r["prompt"] for r in calibration}
    assert not {build_prompts.line_key(r["prompt"]) for r in evaluation} & {
        build_prompts.line_key(r["prompt"]) for r in calibration}
