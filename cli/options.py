"""Options shared by several verbs."""

from __future__ import annotations

import click

bundle_option = click.option(
    "--bundle", "bundle", envvar="HEFSEARCH_BUNDLE", required=True, type=click.Path(file_okay=False),
    help="Model bundle folder (from 'hefsearch compile export'). Env: HEFSEARCH_BUNDLE.",
)

backend_option = click.option(
    "--backend", "backend", envvar="HEFSEARCH_BACKEND", default="auto", show_default=True,
    help="Encoder backend: auto, cpu, cpu-int8, hailo, npu-sim. auto picks the NPU when one answers and "
         "the bundle has a HEF for it, else cpu. Env: HEFSEARCH_BACKEND.",
)
