"""@distributed in a Jupyter kernel shows the run's HTML page under the cell
(docs/html.md); show_page=False turns it off. A stand-in IPython module plays
the kernel: what matters is what air hands to IPython.display. Real runs
through the air-run binary (skipped when it is not found: conftest.air_run)."""

import sys
import types

import pytest

import air
from air import _decorator


@air.distributed(num_accelerators=2, timeout=60)
def shown(x):
    return x + 1


@air.distributed(num_accelerators=2, timeout=60, show_page=False)
def not_shown(x):
    return x + 1


@pytest.fixture
def kernel(monkeypatch):
    """A stand-in IPython kernel; yields the list of what was displayed."""
    shown_html = []
    ipython = types.ModuleType("IPython")
    display = types.ModuleType("IPython.display")

    class HTML:
        def __init__(self, data):
            self.data = data

    display.HTML = HTML
    display.display = lambda obj: shown_html.append(obj.data)
    ipython.get_ipython = lambda: types.SimpleNamespace(kernel=object())
    ipython.display = display
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    yield shown_html


def test_the_page_shows_under_the_cell_in_a_kernel(air_run, kernel):
    assert shown.distributed(1) == [2, 2]
    pages = [h for h in kernel if "air-run-page" in h]
    assert len(pages) == 1
    # The whole page, escaped into an iframe's srcdoc: its style stays out of the notebook's.
    assert pages[0].startswith('<iframe class="air-run-page"')
    assert "&lt;!DOCTYPE html&gt;" in pages[0]
    assert pages[0].count("&lt;g class=&quot;lane") == 2


def test_show_page_false_turns_it_off(air_run, kernel):
    assert not_shown.distributed(1) == [2, 2]
    assert not [h for h in kernel if "air-run-page" in h]
    assert not_shown.show_page is False


def test_outside_a_kernel_nothing_is_drawn(air_run, monkeypatch):
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    assert _decorator.in_kernel() is False
    assert _decorator.show_run_page("<!DOCTYPE html>") is False


def test_show_page_survives_pickling():
    import pickle
    copy = pickle.loads(pickle.dumps(not_shown))
    assert copy.show_page is False
