"""``hefsearch tui --rerank off|N`` reaches the app's settings."""

from __future__ import annotations


def test_tui_rerank_option_reaches_the_app(npu_only_library, monkeypatch):
    """`hefsearch tui --rerank off|N` starts the app with that depth (tui/app.py puts it on
    every request it submits)."""
    from click.testing import CliRunner

    from hefsearch.cli.main import main
    from hefsearch.tui import factory

    seen = []

    class App:
        def __init__(self, settings):
            self.settings = settings

        def run(self):
            seen.append(self.settings)

    monkeypatch.setattr(factory, "make_app", lambda session, settings: App(settings))
    path = str(npu_only_library.path)
    npu_only_library.close()
    for value, depth in (("off", 0), ("12", 12)):
        res = CliRunner().invoke(main, ["tui", "--library", path, "--rerank", value])
        assert res.exit_code == 0, res.output
        assert seen[-1].rerank == depth
