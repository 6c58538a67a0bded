"""The front ends (cli/, tui/, serve/) take only types (classes) and constants (UPPER_CASE
values) from the layers under the app core, and never the classes that open a library, a
searcher, an encoder or a Ray pool: everything they run goes through hefsearch.app. A function
or module imported from readers/index/embed/search, or one of those classes, fails here with its place."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LOWER = ("hefsearch.readers", "hefsearch.index", "hefsearch.embed", "hefsearch.search")
#: every module of the front ends
MODULES = sorted(p.relative_to(REPO).as_posix() for top in ("cli", "tui", "serve") for p in (REPO / top).rglob("*.py"))
#: classes a front end may not even name: the app core opens these for it
RESOURCES = {"Library", "Searcher", "Encoder", "RayEncoder", "EncoderChoice"}


def _absolute(node: ast.ImportFrom, rel: str) -> str:
    if not node.level:
        return node.module or ""
    package = ["hefsearch", *rel[:-3].split("/")][:-node.level]
    return ".".join(package + ([node.module] if node.module else []))


def lower_layer_imports(rel: str) -> list[str]:
    """"file:line name" for each import from index/embed/search that is neither a class nor a
    constant, or is one of the :data:`RESOURCES`."""
    wrong = []
    for node in ast.walk(ast.parse((REPO / rel).read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            wrong += [f"{rel}:{node.lineno} {a.name}" for a in node.names if a.name.startswith(LOWER)]
        elif isinstance(node, ast.ImportFrom) and _absolute(node, rel).startswith(LOWER):
            module = importlib.import_module(_absolute(node, rel))
            wrong += [f"{rel}:{node.lineno} {module.__name__}.{a.name}" for a in node.names
                      if not _type_or_constant(a.name, getattr(module, a.name, None)) or a.name in RESOURCES]
    return wrong


def _type_or_constant(name: str, value) -> bool:
    if inspect.isclass(value):
        return True
    return name.isupper() and not callable(value) and not inspect.ismodule(value)


@pytest.mark.parametrize("rel", MODULES)
def test_the_front_end_takes_only_types_from_below_the_app(rel):
    assert not lower_layer_imports(rel), "ask hefsearch.app for these:\n" + "\n".join(lower_layer_imports(rel))


def test_the_check_sees_a_function_imported_from_below(tmp_path, monkeypatch):
    monkeypatch.setattr(__import__(__name__, fromlist=["REPO"]), "REPO", tmp_path)
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli/x.py").write_text("def f():\n    from hefsearch.index.sync import sync, SyncReport, DEFAULT_BATCH_CHUNKS\n"
                                       "    from ..search import searcher\n    from hefsearch.index.library import Library, LibraryStatus\n")
    assert lower_layer_imports("cli/x.py") == ["cli/x.py:2 hefsearch.index.sync.sync", "cli/x.py:3 hefsearch.search.searcher",
                                               "cli/x.py:4 hefsearch.index.library.Library"]


def test_every_front_end_module_is_checked():
    assert {"cli/cmd_search.py", "serve/http.py", "tui/app.py", "tui/widgets/search_bar.py"} <= set(MODULES)
