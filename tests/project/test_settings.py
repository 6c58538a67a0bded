"""Every HEFSEARCH_* variable is declared once in base/settings.py and read through it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hefsearch.base import settings

ROOT = Path(__file__).resolve().parents[2]
_NAME = re.compile("HEFSEARCH_[A-Z][A-Z_]*")
PACKAGES = ("app", "base", "cli", "compile", "diagnose", "embed", "evaluate", "index", "search", "serve", "tui",
            "hefsearch")


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _direct_reads(tree: ast.AST) -> list[int]:
    """Lines that read a HEFSEARCH_* variable by its literal name, or name one outside settings."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _NAME.fullmatch(node.value):
            lines.append(node.lineno)  # a variable's bare name as a value: it belongs in settings.py
        if isinstance(node, ast.Subscript) and _is_environ(node.value) and isinstance(node.ctx, ast.Load) \
                and _names_hefsearch(node.slice):
            lines.append(node.lineno)
        if isinstance(node, ast.Call) and node.args and _names_hefsearch(node.args[0]):
            f = node.func
            if (isinstance(f, ast.Attribute) and f.attr in ("get", "pop") and _is_environ(f.value)) or \
                    (isinstance(f, (ast.Attribute, ast.Name)) and getattr(f, "attr", getattr(f, "id", "")) == "getenv"):
                lines.append(node.lineno)
    return sorted(set(lines))


def _names_hefsearch(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("HEFSEARCH_")


def test_no_product_module_reads_a_hefsearch_variable_directly():
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path == ROOT / "base" / "settings.py":
                continue
            lines = _direct_reads(ast.parse(path.read_text(encoding="utf-8")))
            offenders += [f"{path.relative_to(ROOT)}:{n}" for n in lines]
    assert not offenders, "read HEFSEARCH_* through hefsearch.base.settings: " + ", ".join(offenders)


def test_the_check_catches_each_direct_form():
    for src in ('os.environ.get("HEFSEARCH_X")', 'os.environ["HEFSEARCH_X"]', 'os.getenv("HEFSEARCH_X")',
                'getenv("HEFSEARCH_X")', 'ENV = "HEFSEARCH_LIBRARY"'):
        assert _direct_reads(ast.parse(src)), src
    assert not _direct_reads(ast.parse('settings.BUNDLE.value()\nk.startswith("HEFSEARCH_")'))


def test_each_setting_is_declared_once_and_reads_the_environment(monkeypatch):
    names = [s.name for s in settings.ALL]
    assert len(names) == len(set(names)) and all(n.startswith("HEFSEARCH_") for n in names)
    assert all(s.meaning and s.default for s in settings.ALL)
    monkeypatch.delenv("HEFSEARCH_SIM", raising=False)
    assert settings.SIM.value() is None and settings.SIM.value("x") == "x"
    monkeypatch.setenv("HEFSEARCH_SIM", "")
    assert settings.SIM.value("x") == ""  # set but empty is as os.environ.get gives it
    monkeypatch.setenv("HEFSEARCH_SIM", "a8")
    assert settings.SIM.value() == "a8"
