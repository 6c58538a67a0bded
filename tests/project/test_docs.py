"""The documentation holds together: a short README that leads with install and a quick start,
every relative link pointing at a file and heading that exist, every page of docs/ one link away
from the README, and the generated ``--help`` blocks (cog) equal to what the commands print."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import click
import cogapp  # noqa: F401  (the test extra must carry it: run_cog runs it by module)

from hefsearch.cli.main import main

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
README_MAX_BYTES = 12 * 1024  # issue 24: the README at most 12 KB; the rest lives in docs/


def doc_files() -> list[Path]:
    return [README, REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def cog_files() -> list[Path]:
    """The files ``make docs`` regenerates: the Makefile's COG_FILES, so both use one list."""
    text = (REPO / "Makefile").read_text(encoding="utf-8")
    m = re.search(r"^COG_FILES\s*:?=\s*(.+)$", text, flags=re.M)
    assert m, "the Makefile names the files with cog blocks in COG_FILES"
    return [REPO / name for name in m.group(1).split()]


# -- markdown, as GitHub renders it ---------------------------------------------------------
FENCE = re.compile(r"^(```|~~~)")
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
IMAGE = re.compile(r"\!\[[^\]]*\]\(([^)\s]+)\)")
EXPLICIT_ID = re.compile(r"""<a\s+(?:id|name)=["']([^"']+)["']""")


def prose_lines(text: str):
    """(line number, line) outside fenced code blocks, inline code spans blanked out."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        if not fenced:
            yield n, re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation removed, spaces to
    hyphens (letters of every script, digits, ``_`` and ``-`` stay)."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = text.replace("`", "").strip().lower()
    kept = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM")
    return kept.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    found: set[str] = set(EXPLICIT_ID.findall(text))
    seen: dict[str, int] = {}
    fenced = False
    for line in text.splitlines():
        if FENCE.match(line.lstrip()):
            fenced = not fenced
            continue
        m = None if fenced else re.match(r"^#{1,6}\s+(.+?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
    return found


def relative_links(path: Path):
    """(line number, target) of every link and image that is not a URL."""
    for n, line in prose_lines(path.read_text(encoding="utf-8")):
        for target in LINK.findall(line) + IMAGE.findall(line):
            if not re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:, ...
                yield n, target


def broken_links(path: Path) -> list[str]:
    wrong = []
    for n, target in relative_links(path):
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        where = f"{path.relative_to(REPO) if path.is_relative_to(REPO) else path}:{n}: {target}"
        if not dest.exists():
            wrong.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            wrong.append(f"{where} (no heading or anchor '{anchor}' in {dest.name})")
    return wrong


# -- the README -----------------------------------------------------------------------------
def test_the_readme_is_short():
    size = len(README.read_bytes())
    assert size <= README_MAX_BYTES, (
        f"README.md is {size:,} bytes, over {README_MAX_BYTES:,}: move the detail to a page in docs/ "
        "and link it")


def test_the_readme_leads_with_install_and_a_quick_start():
    lines = README.read_text(encoding="utf-8").splitlines()
    sections = [(n, line) for n, line in enumerate(lines) if line.startswith("## ")]
    assert sections[0][1] == "## Install" and sections[1][1].startswith("## Quick start"), sections[:2]
    assert sections[0][0] < 20, "Install comes within the README's first lines"
    start, end = sections[1][0], sections[2][0]
    quick = "\n".join(lines[start:end])
    assert start < 40 and "make demo" in quick and "make test" in quick
    for step in ("hefsearch index ~/Documents", "hefsearch search", "hefsearch tui"):
        assert step in quick, f"the quick start shows {step!r}"


def test_every_page_of_docs_is_one_link_from_the_readme():
    linked = {(README.parent / t.partition("#")[0]).resolve() for _n, t in relative_links(README)}
    pages = sorted((REPO / "docs").glob("*.md"))
    assert pages, "docs/ holds the README's topics"
    missing = [p.name for p in pages if p.resolve() not in linked]
    assert not missing, f"pages of docs/ the README does not link: {missing}"
    assert (REPO / "CONTRIBUTING.md").resolve() in linked


def test_every_relative_link_points_to_an_existing_file_and_heading():
    wrong = [w for path in doc_files() for w in broken_links(path)]
    assert not wrong, "broken links:\n" + "\n".join(wrong)


def test_the_link_check_finds_a_missing_file_and_a_missing_heading(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## What does 8-bit cost?\n\n<a id=\"x\"></a>\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## Über `serve` & co.\n\n"
        "[ok](other.md#what-does-8-bit-cost) [ok](other.md#x) [ok](#über-serve--co) "
        "[url](https://example.org/none.md)\n"
        "[gone](nowhere.md) [bad](other.md#nothing-here) [bad](#no-such)\n"
        "`[in code](nowhere.md)`\n```\n[in a fence](nowhere.md)\n```\n")
    wrong = broken_links(page)
    assert len(wrong) == 3, wrong
    assert "nowhere.md (no such file)" in wrong[0] and "'nothing-here'" in wrong[1]
    assert "'no-such'" in wrong[2]


# -- the generated --help -------------------------------------------------------------------
def commands(cmd: click.Command, path: list[str]):
    yield path, cmd
    if isinstance(cmd, click.Group):
        ctx = click.Context(cmd, info_name=path[-1])
        for name in cmd.list_commands(ctx):
            yield from commands(cmd.get_command(ctx, name), path + [name])


def run_cog(*args: str) -> tuple[int, str]:
    # In a fresh process, as `make docs` runs it: click keeps each command's help option once
    # made, so a test that invoked a verb directly (no group, plain --help) would change what
    # the same process prints for it through the group (-h, --help).
    proc = subprocess.run([sys.executable, "-m", "cogapp", *args], cwd=REPO, capture_output=True, text=True)
    return proc.returncode, proc.stdout + proc.stderr


def test_every_file_with_generated_blocks_is_regenerated_by_make_docs():
    with_blocks = {p.resolve() for p in doc_files() if "[[[cog" in p.read_text(encoding="utf-8")}
    assert with_blocks, "docs/cli-reference.md holds the generated --help"
    assert with_blocks == {p.resolve() for p in cog_files()}


def test_the_generated_help_matches_the_commands():
    status, out = run_cog("--check", "--diff", *map(str, cog_files()))
    assert status == 0, f"{out}\nthe --help in the docs is out of date: run `make docs` and commit it"


def test_the_help_check_fails_on_a_stale_copy(tmp_path):
    reference = REPO / "docs" / "cli-reference.md"
    stale = tmp_path / "cli-reference.md"
    text = reference.read_text(encoding="utf-8")
    usage = "Usage: hefsearch search [OPTIONS] QUERY"
    assert usage in text
    stale.write_text(text.replace(usage, usage + " [OLD]"), encoding="utf-8")
    status, out = run_cog("--check", str(stale))
    assert status != 0 and "cli-reference.md" in out
    shutil.copy(reference, stale)
    assert run_cog("--check", str(stale))[0] == 0


def test_the_reference_shows_every_verb_without_paths_of_this_machine():
    text = (REPO / "docs" / "cli-reference.md").read_text(encoding="utf-8")
    headings = {line[3:] for line in text.splitlines() if line.startswith("## ")}
    verbs = [" ".join(path) for path, _cmd in commands(main, ["hefsearch"])]
    assert len(verbs) > 15 and not [v for v in verbs if v not in headings]
    for verb in verbs:
        assert f"Usage: {verb} " in text, verb
    for local in {str(REPO), str(Path.home()), tempfile.gettempdir()}:
        assert local not in text, f"the generated help names {local}, a path of this machine"


def test_the_readme_makes_no_speed_claims_and_the_performance_page_marks_its_figures():
    # figures live in docs/performance.md, each with its script, load and spread (issue 22)
    ratios = re.findall(r"\b\d+(?:\.\d+)?x\b|\d+(?:\.\d+)?\s*% of", README.read_text(encoding="utf-8"))
    assert not ratios, f"speed claims in the README: {ratios}"
    text = (REPO / "docs" / "performance.md").read_text(encoding="utf-8")
    fresh = text.index("## Fresh figures")
    assert fresh < text.index("Measured earlier") < text.index("## Speed and memory")
    # every fresh row names its script's load
    rows = [ln for ln in text[fresh:text.index("Measured earlier")].splitlines() if ln.startswith("| ") and "`" in ln]
    assert rows and all(re.search(r"\| [\d.]+( ?(->|-) ?[\d.]+)? \|$", ln) for ln in rows), rows


# -- citations a reader can follow ----------------------------------------------------------
PRODUCT_DIRS = ("app", "bench", "cli", "compile", "diagnose", "embed", "evaluate", "index", "readers", "search", "serve", "tui")


def test_product_code_and_docs_cite_sources_a_user_can_reach():
    """The project's own reference folder (``shared/reference/...``) is not in the repository: a
    message, docstring or page citing it sends a user nowhere. The public Hailo-10H report is
    cited by where it lives (the Hailo Community forum) instead."""
    files = doc_files() + [p for d in PRODUCT_DIRS for p in sorted((REPO / d).rglob("*.py"))]
    assert len(files) > 50
    wrong = [f"{p.relative_to(REPO)}:{n}" for p in files
             for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"shared/reference|reference/seeds/", line)]
    assert wrong == [], "cites a folder that is not in the repository: " + ", ".join(wrong)


def test_the_architecture_page_is_a_blueprint_whose_paths_exist():
    """A blueprint (at most 15 KB: history goes to decisions.md, figures to performance.md) that
    stays true: every module or test file it names is there (test files by their path under tests/)."""
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert len(text.encode()) <= 15_000
    named = set(re.findall(r"`([\w/]+\.py)\b", text)) | set(re.findall(r"\b((?:[a-z_]+/)+[a-z_]+\.py)\b", text))
    missing = [p for p in sorted(named) if "/" in p and not (REPO / p).exists() and not (REPO / "tests" / p).exists()]
    assert not missing, f"docs/ARCHITECTURE.md names files that are not there: {missing}"
