"""Turns at the device: first come first served, the place in the line shown, a place freed when its request
leaves (Stop), and downloads and loads outside the line."""

import threading
import time

import pytest

from hsd import marks, turns
from hsd.turns import Turns


def test_the_first_request_goes_at_once_and_the_next_waits_with_its_place():
    line = Turns(1)
    with line.turn() as first:
        assert list(first) == []  # nothing ahead: no wait, no status line
        second, third = line.turn(), line.turn()
        assert line.ahead(second.ticket) == 1 and line.ahead(third.ticket) == 2 and line.waiting() == 2
        second.__exit__(None, None, None)  # the second leaves the line (Stop) before its turn
        assert line.ahead(third.ticket) == 1
    assert line.ahead(third.ticket) == 0  # the first turn ended: the third's turn
    third.__exit__(None, None, None)
    assert line.waiting() == 0


def test_a_waiting_request_sees_its_place_shrink_and_runs_when_the_turn_ends():
    line, seen, ran = Turns(1), [], threading.Event()
    holder = line.turn()
    list(holder.__enter__())  # holds the turn

    def visitor():
        with line.turn() as wait:
            for ahead in wait:
                seen.append(ahead)
            ran.set()

    t = threading.Thread(target=visitor)
    t.start()
    time.sleep(0.3)
    assert seen == [1] and not ran.is_set()
    holder.__exit__(None, None, None)
    t.join(timeout=5)
    assert ran.is_set() and seen == [1]


def test_a_generator_closed_while_waiting_frees_its_place():
    line = Turns(1)
    holder = line.turn()

    def handler():
        with line.turn() as wait:
            for ahead in wait:
                yield ahead
            yield "ran"

    gen = handler()
    assert next(gen) == 1 and line.waiting() == 1
    gen.close()  # what Gradio does on Stop
    assert line.waiting() == 0
    holder.__exit__(None, None, None)


def test_no_limit_lets_every_request_go():
    line = Turns(None)
    a, b = line.turn(), line.turn()
    assert list(a.__enter__()) == [] and list(b.__enter__()) == [] and line.waiting() == 0


@pytest.mark.parametrize("env, zerogpu, expected", [("", False, 1), ("", True, None), ("3", False, 3), ("0", False, None)])
def test_capacity_one_on_a_machine_none_on_zerogpu_or_as_set(monkeypatch, env, zerogpu, expected):
    monkeypatch.setenv("HSD_GPU_TURNS", env)
    assert turns.gpu_capacity(zerogpu) == expected


def test_a_bad_capacity_says_what_to_give(monkeypatch):
    monkeypatch.setenv("HSD_GPU_TURNS", "lots")
    with pytest.raises(ValueError, match="whole number"):
        turns.gpu_capacity(False)


def test_the_app_loads_outside_the_line_and_shows_the_place_while_waiting(monkeypatch):
    import app
    from hsd import forms, loading

    loading.release_models()  # so this run loads its pair, and says so, before it waits for the device
    holder = app.TURNS.turn()
    list(holder.__enter__())  # another request holds the device
    out = app.run("assets/tiny-code/target", "assets/tiny-code/drafter", "slem",
                  forms.Form(prompt="def f(x):", max_new_tokens=4), "auto", "auto", True)
    statuses = []
    for update in out:
        statuses.append(str(update.status))
        if "waiting for the device" in statuses[-1]:
            break
    assert any("Checking" in s or "Loading" in s for s in statuses[:-1])  # loaded before queueing for the device
    assert statuses[-1].startswith(f"{marks.BUSY} Your models are loaded; waiting for the device: 1 request is ahead of yours")
    out.close()  # Stop
    assert app.TURNS.waiting() == 0
    holder.__exit__(None, None, None)
    final = list(app.run("assets/tiny-code/target", "assets/tiny-code/drafter", "slem",
                         forms.Form(prompt="def f(x):", max_new_tokens=4), "auto", "auto", True))[-1]
    assert str(final.status).startswith(marks.OK)


def test_a_hub_download_happens_before_and_outside_the_load_lock(monkeypatch):
    import huggingface_hub

    from hsd import loading, planning, zerogpu

    seen = []
    monkeypatch.setattr(loading, "offline", lambda: False)
    monkeypatch.setattr(planning, "plan_named", lambda *a, **k: "- **target** `someone/big`: 7 B parameters")
    monkeypatch.setattr(huggingface_hub, "snapshot_download",
                        lambda name, **kw: seen.append((name, kw["revision"], planning._LOAD_LOCK.locked(),
                                                        loading._LOCK._is_owned())))
    monkeypatch.setattr(planning, "load_named_pair", lambda *a, **k: "pair")
    steps = list(zerogpu.load_steps("someone/big@v2", "", "cpu", "float32"))
    assert seen == [("someone/big", "v2", False, False)]
    assert steps[0].startswith(f"{marks.BUSY} Downloading `someone/big@v2` (first time only; progress below")
    assert steps[1].startswith(f"{marks.BUSY} Loading `someone/big@v2` into memory") and steps[-1] == "pair"
