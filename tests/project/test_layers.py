"""The package layers of docs/ARCHITECTURE.md, enforced: every ``hefsearch`` import in the source
(module level and inside functions, relative ones resolved, ``importlib.import_module`` with a
literal name) goes along an allowed edge.

    base <- every other package       (locations, settings, errors, terminal text; imports nothing)
    embed <- readers <- index <- search <- evaluate <- diagnose
    compile -> embed, index
    app -> search, index, embed            (the application layer under every front end)
    serve -> app, search, index, embed     (HTTP + MCP)
    tui -> app, search, index, embed
    cli -> everything (the TUI only for the ``tui`` verb);  hefsearch (python -m) -> cli
    bench -> everything but tui (benchmark scripts; nothing imports them)

The imports are read with ``ast`` rather than observed at run time, so an import inside a
function that no test calls still counts. A new package needs a row in ALLOWED (and an entry in
pyproject's package-dir); a failure names the file, the line and the edge.

The one error root is checked the same way: a public exception class may not derive from a
built-in exception directly, only (through others) from base/errors.py's HefsearchError, which
the CLI prints as a message with a hint instead of a traceback.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# package -> the packages it may import (what it may use, not only what it uses today).
ALLOWED: dict[str, set[str]] = {
    "base": set(),
    "embed": {"base"},
    "readers": {"base", "embed"},
    "index": {"base", "embed", "readers"},
    "search": {"base", "embed", "readers", "index"},
    "evaluate": {"base", "embed", "readers", "index", "search"},
    "diagnose": {"base", "embed", "readers", "index", "search", "evaluate"},
    "compile": {"base", "embed", "readers", "index", "evaluate"},
    "app": {"base", "embed", "readers", "index", "search"},
    "serve": {"base", "embed", "readers", "index", "search", "app"},
    "tui": {"base", "embed", "readers", "index", "search", "app"},
    "cli": {"base", "embed", "readers", "index", "search", "evaluate", "diagnose", "compile", "app", "serve", "tui"},
    "hefsearch": {"cli"},
    # the benchmark scripts (bench/README.md) measure every layer, the CLI as a user runs it;
    # nothing imports them
    "bench": {"base", "embed", "readers", "index", "search", "evaluate", "diagnose", "compile", "app", "serve", "cli"},
}

# hefsearch.<name> -> the repository folder it lives in (pyproject's package-dir).
FOLDERS = {name: REPO / name for name in ALLOWED}


def _module_name(package: str, path: Path) -> tuple[list[str], bool]:
    """The dotted name of a source file as a list, and whether it is a package's __init__."""
    parts = list(path.relative_to(FOLDERS[package]).with_suffix("").parts)
    is_init = parts[-1] == "__init__"
    if is_init:
        parts.pop()
    prefix = ["hefsearch"] if package == "hefsearch" else ["hefsearch", package]
    return prefix + parts, is_init


def _imported_names(tree: ast.AST, module: list[str], is_init: bool):
    """(line, absolute dotted name) of every import in the file, at any depth."""
    package = module if is_init else module[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                yield node.lineno, ".".join(base + ([node.module] if node.module else []))
            else:
                yield node.lineno, node.module
        elif (isinstance(node, ast.Call) and node.args
              and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"):
            yield node.lineno, _literal_prefix(node.args[0])


def _literal_prefix(arg: ast.expr) -> str:
    """The constant part of import_module's argument ("hefsearch.cli." of f"hefsearch.cli.{m}")."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value)
    return ""  # built from a variable: relative to the module's own package, nothing to check


def _target_package(name: str) -> str | None:
    parts = name.split(".")
    if parts[0] != "hefsearch":
        return None
    if len(parts) > 1 and parts[1] in ALLOWED:
        return parts[1]
    return "hefsearch"


def package_edges() -> list[tuple[str, str, str]]:
    """(importing package, imported package, "file:line") for every cross-package import."""
    edges = []
    for package, folder in FOLDERS.items():
        for path in sorted(folder.rglob("*.py")):
            module, is_init = _module_name(package, path)
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for line, name in _imported_names(tree, module, is_init):
                target = _target_package(name or "")
                if target and target != package:
                    edges.append((package, target, f"{path.relative_to(REPO)}:{line}"))
    return edges


def test_every_import_follows_an_allowed_edge():
    wrong = [f"{where}: {src} -> {dst}" for src, dst, where in package_edges() if dst not in ALLOWED[src]]
    assert not wrong, "imports against the layers of docs/ARCHITECTURE.md:\n" + "\n".join(wrong)


def test_the_allowed_edges_form_a_dag():
    done: set[str] = set()

    def visit(package: str, path: tuple[str, ...]) -> None:
        assert package not in path, "cycle in ALLOWED: " + " -> ".join((*path, package))
        if package not in done:
            for dependency in ALLOWED[package]:
                visit(dependency, (*path, package))
            done.add(package)

    for package in ALLOWED:
        visit(package, ())


def test_nothing_but_cli_imports_cli_or_tui():
    users = {(src, dst) for src, dst, _ in package_edges() if dst in ("cli", "tui")}
    assert users <= {("cli", "tui"), ("hefsearch", "cli"), ("bench", "cli")}, users


def test_the_cli_imports_the_tui_only_inside_the_tui_verb():
    """Module-level imports of hefsearch.tui in cli/ would load Textual for every verb's --help."""
    early = []
    for path in sorted(FOLDERS["cli"].rglob("*.py")):
        module, is_init = _module_name("cli", path)
        body = ast.parse(path.read_text(encoding="utf-8")).body
        top = ast.Module(body=[node for node in body if isinstance(node, (ast.Import, ast.ImportFrom))],
                         type_ignores=[])
        early += [f"{path.relative_to(REPO)}:{line}" for line, name in _imported_names(top, module, is_init)
                  if _target_package(name or "") == "tui"]
    assert not early, early


def test_the_table_covers_every_package_in_pyproject():
    tomllib = pytest.importorskip("tomllib")
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir = config["tool"]["setuptools"]["package-dir"]
    top = {name.split(".")[1] if "." in name else name for name in package_dir}
    assert top == set(ALLOWED), "give every package a row in ALLOWED"
    for name, folder in package_dir.items():
        short = name.split(".")[1] if "." in name else name
        assert FOLDERS[short] == REPO / folder, name


def _source_files():
    for folder in FOLDERS.values():
        yield from sorted(folder.rglob("*.py"))


def test_every_public_error_derives_from_hefsearch_error():
    builtin_errors = {name for name, obj in vars(builtins).items()
                      if isinstance(obj, type) and issubclass(obj, BaseException)}
    wrong = []
    for path in _source_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                direct = [b.id for b in node.bases if isinstance(b, ast.Name) and b.id in builtin_errors]
                if direct and node.name != "HefsearchError":
                    wrong.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.name}({', '.join(direct)})")
    assert not wrong, "errors must derive from hefsearch.base.errors.HefsearchError:\n" + "\n".join(wrong)


def test_the_scanner_sees_function_level_and_relative_imports():
    """The check itself: a lazy relative import deep in a function is found and resolved."""
    source = "def f():\n    from ...search import searcher\n    import hefsearch.tui.app\n"
    names = list(_imported_names(ast.parse(source), ["hefsearch", "index", "sub", "mod"], False))
    assert sorted(names) == [(2, "hefsearch.search"), (3, "hefsearch.tui.app")]
