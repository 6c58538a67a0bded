"""``hefsearch inspect BUNDLE|HEF``: a HEF's streams and whether they match the manifest."""

from __future__ import annotations

import sys

import click

from .options import echo_json, json_option


@click.command("inspect")
@click.argument("target", type=click.Path(exists=True))
@json_option("Print the results as JSON.")
def inspect_cmd(target, as_json):
    """Show the streams of TARGET's HEF(s): names, shapes, format type and order, quantisation.

    TARGET is a bundle folder (every HEF it lists) or one .hef file (checked against the
    manifest of the bundle folder it sits in, if any). Reading a HEF needs HailoRT
    (hailo_platform); no device is needed. Exit code 1 when a HEF does not match its manifest.
    """
    from hefsearch.diagnose.doctor import inspect_target

    items = inspect_target(target)
    if as_json:
        echo_json([i.to_dict() for i in items])
    else:
        for i, item in enumerate(items):
            if i:
                click.echo()
            _print_item(item)
    bad = any(it.error or (it.streams is not None and it.streams.check is not None and not it.streams.check.ok)
              for it in items)
    sys.exit(1 if bad else 0)


def _print_item(item) -> None:
    click.secho(str(item.path), bold=True)
    e = item.entry
    if e is not None:
        click.echo(f"  manifest: {item.manifest_text()}")
        ins, outs = e.extra.get("inputs") or {}, e.extra.get("outputs") or {}
        for role, d in list(ins.items()) + list(outs.items()):
            names = d.get("names") or [d.get("name")]
            click.echo(f"    {role:18s} {', '.join(str(n) for n in names)}  {d.get('shape')}")
    if item.error:
        click.secho(f"  cannot read the HEF: {item.error}", fg="red")
        if item.hint:
            click.echo(f"  hint: {item.hint}")
        return
    s = item.streams
    click.echo(f"  network group(s): {', '.join(s.network_groups)}")
    for title, specs in (("inputs", s.inputs), ("outputs", s.outputs)):
        click.echo(f"  {title}:")
        for spec in specs:
            q = ", ".join(f"scale {sc:.6g} zp {zp:g}" for sc, zp in spec.quant[:2])
            more = f" (+{len(spec.quant) - 2})" if len(spec.quant) > 2 else ""
            click.echo(f"    {spec.name:28s} shape {list(spec.shape)!s:16s} {spec.type:7s} {spec.order:5s} {q}{more}")
    if len(s.outputs) > 1:
        click.echo(f"  HailoRT output order: {', '.join(s.sorted_outputs)}")
    for n in s.notes:
        click.echo(f"  note: {n}")
    if s.check is None:
        click.echo("  manifest: not checked (the HEF is not listed in a bundle manifest)")
        return
    for n in s.check.notes:
        click.echo(f"  note: {n}")
    if s.check.ok:
        click.secho("  matches the manifest", fg="green")
    else:
        click.secho("  does NOT match the manifest:", fg="red")
        for p in s.check.problems:
            click.echo(f"    - {p}")
