"""The unit tier is the inner loop: no test here starts a server, a subprocess virtualenv, Label Studio or Ray,
and none loads a model library or draws a figure. Importing one of those while the unit tests are collected or
run fails with a sentence saying where the test belongs (tests/integration/), so the tier stays fast by
construction. (Run on its own — ``make test-fast``, or the first half of ``make test`` — where nothing else has
imported them first.)"""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from contextlib import contextmanager

import pytest

#: Libraries a unit test may not import: models, figures, crowd models, Ray, a browser.
HEAVY = ("torch", "torchvision", "transformers", "open_clip", "sentence_transformers", "timm", "matplotlib",
         "crowdkit", "ray", "playwright")


class _Refused(importlib.abc.Loader):
    """Finding the module still works (``importlib.util.find_spec`` says it is installed); loading it fails."""

    def create_module(self, spec):
        raise ImportError(f"a unit test imported {spec.name}: a test that needs it belongs in tests/integration/ "
                          "(tests/unit/conftest.py)")

    def exec_module(self, module):  # never reached: create_module refuses
        raise ImportError(module.__name__)


class _HeavyImports(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in HEAVY and name not in sys.modules:
            return importlib.util.spec_from_loader(name, _Refused())
        return None


_while_collecting = _HeavyImports()
sys.meta_path.insert(0, _while_collecting)


def pytest_collection_finish(session):
    if _while_collecting in sys.meta_path:
        sys.meta_path.remove(_while_collecting)


@contextmanager
def _blocking():
    finder = _HeavyImports()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


# the setup of every unit test (module- and session-scoped fixtures included) and its call; these hooks apply to
# the tests of this folder only
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_setup(item):
    with _blocking():
        yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    with _blocking():
        yield


@pytest.fixture(autouse=True)
def _no_label_studio(monkeypatch):
    """A unit test never starts a Label Studio server (a process of ~270 MB that would outlive the test): a code
    path that would is a bug of the test's set-up, or the test belongs in tests/integration."""
    from cultura.annotate import server

    def refuse(*a, **k):
        raise AssertionError("a unit test tried to start Label Studio; it belongs in tests/integration")
    monkeypatch.setattr(server, "launch", refuse)   # people starts its servers through server.launch_ready
