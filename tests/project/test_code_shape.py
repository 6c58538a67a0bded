"""Shape rules as a test: no product module over 700 lines, no function over 60 lines on the
query and sync paths, the reference backend's name written only where it is defined, no issue
numbers in product code, no ``_private`` name imported from another module, and module
docstrings of at most 25 lines. A rule broken fails here with the place to look."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ["hefsearch", "base", "embed", "compile", "readers", "index", "search", "evaluate", "diagnose", "app", "serve", "cli", "tui"]
QUERY_PATH = [r"search/.*\.py", r"app/session\.py", r"cli/cmd_search\.py", r"serve/.*\.py",
              r"index/.*(space|faiss|segment|vector).*\.py"]
SYNC_PATH = [r"index/(sync|crawl|extract|chunk|library|store|documents|formats|filetypes).*\.py",
             r"app/(reindex|indexing|folders)\.py", r"cli/cmd_index\.py"]
MAX_MODULE, MAX_FUNCTION = 700, 60


def _modules():
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")


def _matches(rel: str, patterns) -> bool:
    return any(re.fullmatch(p, rel) for p in patterns)


def test_no_product_module_over_700_lines():
    long = [f"{rel}: {src.count(chr(10))} lines" for rel, src in _modules() if src.count("\n") > MAX_MODULE]
    assert not long, "split these along their seams:\n" + "\n".join(long)


def test_no_function_over_60_lines_on_the_query_and_sync_paths():
    long = []
    for rel, src in _modules():
        if not _matches(rel, QUERY_PATH + SYNC_PATH):
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION:
                    long.append(f"{rel}:{node.lineno} {node.name}() {n} lines")
    assert not long, "name the stages of these:\n" + "\n".join(long)


# The registry's keys and the CPU backend's own name are the definitions; every other module
# asks embed/reference.py for the reference encoder.
REFERENCE_DEFINED_IN = {"embed/reference.py", "embed/backends/__init__.py", "embed/backends/cpu.py",
                        "compile/robust/devices.py"}  # there "cpu" is a torch device, not a backend


def test_the_reference_backend_is_named_only_where_it_is_defined():
    from hefsearch.embed.reference import REFERENCE_BACKEND

    stray = []
    for rel, src in _modules():
        if rel in REFERENCE_DEFINED_IN:
            continue
        for node in ast.walk(ast.parse(src)):
            if isinstance(node, ast.Constant) and node.value == REFERENCE_BACKEND:
                stray.append(f"{rel}:{node.lineno}")
    assert not stray, "use embed.reference (REFERENCE_BACKEND, open_reference_encoder):\n" + "\n".join(stray)


# Product code says what and why; the history behind it (issue numbers) lives in
# docs/decisions.md and the commit log. bench/ and tests/ may name the issue they measure.
ISSUE_NUMBER = re.compile(r"issue[ -]?#?\d+|issues? #\d+", re.IGNORECASE)
PRODUCT_SUFFIXES = {".py", ".html", ".css", ".js", ".tcss", ".json", ".md", ".txt"}


def _product_files():
    for top in PRODUCT:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in PRODUCT_SUFFIXES and "__pycache__" not in path.parts:
                yield path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8", errors="replace")


def issue_numbers(text: str) -> list[int]:
    """Line numbers of ``text`` that name an issue by number."""
    return [n for n, line in enumerate(text.splitlines(), 1) if ISSUE_NUMBER.search(line)]


def test_the_issue_number_rule_sees_the_usual_spellings():
    text = "ok: an issue with 4 parts\n(issue 13)\nissue-40 branch\nIssue #7\nsee issues #12\nissue12\n"
    assert issue_numbers(text) == [2, 3, 4, 5, 6]


def test_no_issue_numbers_in_product_code():
    found = [f"{rel}:{n}" for rel, text in _product_files() for n in issue_numbers(text)]
    assert not found, ("say what and why instead of naming an issue (history: docs/decisions.md):\n"
                       + "\n".join(found))


# A name with a leading underscore is its module's own business: a module that needs another
# module's helper imports a public name, made public in the module that owns it.
def _module_name(rel: str) -> str:
    """'index/spaces.py' -> 'hefsearch.index.spaces'; 'embed/backends/__init__.py' -> 'hefsearch.embed.backends'."""
    parts = rel.removesuffix(".py").split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts if parts[0] == "hefsearch" else ["hefsearch", *parts])


def private_imports(rel: str, src: str) -> list[str]:
    """``from X import _name`` in module ``rel`` where X is another module (relative imports
    resolved), as 'rel:line X._name'."""
    me = _module_name(rel)
    package = me if rel.endswith("__init__.py") else me.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(src)):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = node.module or ""
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            source = ".".join(base + ([source] if source else []))
        found += [f"{rel}:{node.lineno} {source}.{a.name}" for a in node.names
                  if a.name.startswith("_") and not a.name.startswith("__") and source != me]
    return found


def test_the_private_import_rule_sees_relative_and_absolute_imports():
    src = ("from .faiss_index import _faiss, make_index\nfrom hefsearch.serve.http import _refuse\n"
           "from . import _helpers\nfrom .spaces import _own\nfrom __future__ import annotations\n")
    assert private_imports("index/spaces.py", src) == [
        "index/spaces.py:1 hefsearch.index.faiss_index._faiss", "index/spaces.py:2 hefsearch.serve.http._refuse",
        "index/spaces.py:3 hefsearch.index._helpers"]


def test_no_module_imports_another_modules_private_names():
    found = [hit for rel, src in _modules() for hit in private_imports(rel, src)]
    assert not found, ("make the helper public (no underscore) in the module that owns it:\n"
                       + "\n".join(found))


# A module docstring says what the module is for; the reasons and history behind it go to
# docs/decisions.md, measured figures to docs/performance.md.
MAX_DOCSTRING = 25


def docstring_lines(src: str) -> int:
    """Lines of text of the module docstring (a closing quote on a line of its own adds none)."""
    doc = ast.get_docstring(ast.parse(src), clean=False)
    return len(doc.splitlines()) if doc else 0


def test_docstring_lines_counts_the_lines_of_text():
    assert docstring_lines('"""One line."""\nx = 1\n') == 1
    assert docstring_lines('"""Three\n\nlines.\n"""\n') == 3
    assert docstring_lines("x = 1\n") == 0


def test_module_docstrings_are_at_most_25_lines():
    long = [f"{rel}: {n} lines" for rel, src in _modules() if (n := docstring_lines(src)) > MAX_DOCSTRING]
    assert not long, ("say what the module is for; reasons go to docs/decisions.md, figures to "
                      "docs/performance.md:\n" + "\n".join(long))


# --- no function takes more than 7 parameters, click declarations aside --------------------------
MAX_PARAMETERS = 7


def is_declaration(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A click command: its parameters are its flags, declared by the framework."""
    return any(ast.unparse(d).startswith("click.") or ".command(" in ast.unparse(d) or ".group(" in ast.unparse(d)
               for d in node.decorator_list)


def parameters(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    """The parameters a caller passes (``self`` and ``cls`` not counted)."""
    a = node.args
    names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs]
    return names[1:] if names and names[0] in ("self", "cls") else names


def too_many_parameters(rel: str, src: str) -> list[str]:
    return [f"{rel}:{node.lineno} {node.name}() takes {len(parameters(node))}"
            for node in ast.walk(ast.parse(src))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not is_declaration(node)
            and len(parameters(node)) > MAX_PARAMETERS]


def test_no_function_takes_more_than_7_parameters():
    """Values that travel together go in one object (a request, options, a target); only a
    click command takes a parameter per flag. bench/ is held to the same."""
    bench = ((p.relative_to(ROOT).as_posix(), p.read_text(encoding="utf-8")) for p in sorted((ROOT / "bench").rglob("*.py")))
    many = [line for rel, src in [*_modules(), *bench] for line in too_many_parameters(rel, src)]
    assert not many, "group what travels together into one object:\n" + "\n".join(many)


def test_the_parameter_rule_counts_what_a_caller_passes():
    src = ("import click\n"
           "def f(a, b, c, d, e, f, g, h): pass\n"
           "class C:\n    def m(self, a, b, c, d, e, f, g): pass\n"
           "@click.command('x')\ndef cmd(a, b, c, d, e, f, g, h, i): pass\n")
    assert too_many_parameters("x.py", src) == ["x.py:2 f() takes 8"]
