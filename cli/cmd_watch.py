"""``hefsearch watch``: keep the library current as its folders change."""

from __future__ import annotations

import signal
import sys

import click

from hefsearch.base import settings

from .options import library_option


def watch_options(f):
    """The options ``watch`` and ``serve --watch`` share."""
    options = [
        click.option("--poll/--no-poll", "poll", default=None,
                     help="Poll the folders instead of waiting for file events [default: poll only on "
                          "network and FUSE mounts (NFS, SMB, sshfs...), where events do not arrive]."),
        click.option("--poll-interval", type=click.FloatRange(0.2, 3600), default=2.0, show_default=True,
                     metavar="SECONDS", help="How often to poll."),
        click.option("--debounce", "debounce_ms", type=click.IntRange(50, 60_000), default=1000,
                     show_default=True, metavar="MS",
                     help="Gather changes for at most this long before indexing them (a run starts "
                          "sooner once the folders are quiet for 200 ms)."),
        click.option("--rescan", "rescan_min", type=click.FloatRange(0, 10_000), default=60.0, show_default=True,
                     metavar="MINUTES", help="Also check every file this often (0: only at start)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def watch_settings(poll, poll_interval, debounce_ms, rescan_min):
    from hefsearch.app.watch import WatchOptions

    return WatchOptions(poll=poll, poll_interval_s=poll_interval, debounce_ms=debounce_ms,
                        step_ms=min(200, debounce_ms), rescan_s=rescan_min * 60)


def print_watch_event(event) -> None:
    """One line per watcher event on stderr (the journal, under systemd)."""
    from datetime import datetime

    from hefsearch.base.terminal_text import for_terminal

    colour = {"error": "red", "busy": "yellow", "mode": "yellow"}.get(event.kind)
    click.secho(f"{datetime.now():%H:%M:%S} {for_terminal(event.message)}", fg=colour, err=True)
    if event.run is not None:
        for path, reason in event.run.report.failed[:20]:
            click.secho(f"  not indexed: {for_terminal(path)}: {for_terminal(reason)}", fg="yellow", err=True)


def stop_on_signals(watcher) -> None:
    """SIGTERM (systemctl stop) and SIGINT (Ctrl+C) end the watcher cleanly."""
    def handler(signum, frame):
        watcher.stop()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


@click.command("watch")
@click.argument("folders", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=str))
@library_option()
@watch_options
@click.option("--print-systemd-unit", "print_unit", is_flag=True,
              help="Print a systemd user unit that runs this same command, and exit.")
def watch_cmd(folders, library_path, poll, poll_interval, debounce_ms, rescan_min, print_unit):
    """Follow the library's folders (or FOLDERS) and keep the library current.

    At start every file is checked as 'hefsearch index' checks it (only new and changed files
    are read), so whatever changed while no watcher ran is indexed first; then each change
    (created, saved, renamed, deleted) is indexed within about a second, under the same rules
    as 'index' (ignore files, secret files, size limit). Searches, the TUI and a server keep
    working meanwhile; the write lock and the NPU are taken only while a change is indexed.

    \b
    Run it as a service on a Pi:
      mkdir -p ~/.config/systemd/user
      hefsearch watch --print-systemd-unit > ~/.config/systemd/user/hefsearch-watch.service
      systemctl --user enable --now hefsearch-watch
    'hefsearch status' shows whether a watcher runs and how fresh the library is.
    """
    if print_unit:
        _print_unit(folders, library_path, poll, poll_interval, debounce_ms, rescan_min)
        return
    from hefsearch.app.folders import library_location
    from hefsearch.app.watch import Watcher

    watcher = Watcher(library_location(library_path), folders,
                      watch_settings(poll, poll_interval, debounce_ms, rescan_min), on_event=print_watch_event)
    stop_on_signals(watcher)
    watcher.run()


def _print_unit(folders, library_path, poll, poll_interval, debounce_ms, rescan_min) -> None:
    import os
    import shutil
    from pathlib import Path

    from hefsearch.app.folders import library_location
    from hefsearch.app.watch import systemd_unit

    beside = Path(sys.executable).with_name("hefsearch")  # this venv's, absolute: systemd has another PATH
    exe = str(beside) if beside.exists() else shutil.which("hefsearch")
    argv = [*([exe] if exe else [sys.executable, "-m", "hefsearch"]), "watch",
            "--library", str(library_location(library_path)), *(os.path.abspath(f) for f in folders)]
    if poll is not None:
        argv.append("--poll" if poll else "--no-poll")
    for flag, value, default in (("--poll-interval", poll_interval, 2.0), ("--debounce", debounce_ms, 1000),
                                 ("--rescan", rescan_min, 60.0)):
        if value != default:
            argv += [flag, f"{value:g}"]
    # every hefsearch setting of this shell (the home, bundle, backend, device, threads ...), so
    # the service runs as this command would; not the server's token (a secret in a unit file)
    env = {k: v for k, v in sorted(os.environ.items())
           if k.startswith("HEFSEARCH_") and v and k not in (settings.TOKEN.name, settings.LIBRARY.name)}
    click.echo(systemd_unit(argv, env), nl=False)
