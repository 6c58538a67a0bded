"""The streams a compiled HEF really has, by role, for its manifest entry.

Read from the HEF with HailoRT when the compile host has it (the Hailo AI Software Suite does:
:func:`hefsearch.embed.hef_file.read_hef`), matched to roles the way the runtime matches them
(:mod:`hefsearch.embed.hef_contract`); else taken from the compiled network, where the output
streams are named after the layer that feeds each output layer. The manifest's ``streams_from``
says which.
"""

from __future__ import annotations

import logging
from pathlib import Path

from hefsearch.embed.hef_contract import HefContract, check_contract
from hefsearch.embed.mask_layout import MaskLayout

from .dfc_onnx import EMBEDDINGS, MASK, NET_NAME, OUTPUT

log = logging.getLogger("hefsearch.compile")


def _stream_dict(spec) -> dict:
    d = {"name": spec.name, "shape": [int(x) for x in spec.shape], "order": spec.order, "type": spec.type}
    if spec.flags and spec.flags.upper() != "NONE":
        d["flags"] = spec.flags
    return d


def compiled_streams(hef_path: Path, runner, layers, layout: MaskLayout, seq: int, hidden: int, say) -> dict:
    """The streams the compiled HEF really has, by role (embeddings, attention_mask,
    last_hidden_state), for the manifest: read from the HEF with HailoRT when this environment has
    it (the Hailo AI Software Suite does), else from the compiled runner's network, where the
    output streams are named after the layer that feeds each output layer (after LayerNorm
    decomposition, which renames layers) and the input shapes are the parsed ones (the allocator
    may still fold them; the runtime matches by element count)."""
    try:
        from hefsearch.embed.hef_file import read_hef

        hef = read_hef(hef_path)
    except Exception as e:  # no HailoRT here, or it cannot read this HEF
        log.info("reading %s with HailoRT failed (%s); taking the streams from the compiled network", hef_path, e)
        hef = None
    by_role = {x.role: x for x in layers}
    if hef is not None:
        # which stream is which: the runtime's own matching (recorded name, else element count)
        contract = HefContract(seq, hidden, by_role[EMBEDDINGS].name, by_role[MASK].name, mask=layout)
        check = check_contract(contract, hef.inputs, hef.outputs, hef.sorted_outputs)
        inputs = {role: _stream_dict(spec) for role, spec in
                  ((EMBEDDINGS, check.embeddings), (MASK, check.attention_mask)) if spec is not None}
        order = [o.name for o in check.outputs]
        outputs = {OUTPUT: {"names": order, "shape": [1, int(seq), int(hidden)],
                            "streams": [_stream_dict(o) for o in check.outputs]}}
        say("compiled streams (from the HEF): " + ", ".join(
            [f"{r} {d['name']} {d['shape']}" for r, d in inputs.items()] + [f"output {n}" for n in order]))
        return {"inputs": inputs, "outputs": outputs, "source": "hef"}
    hn = runner.get_hn_dict()
    inputs = {role: {"name": x.name, "shape": [int(d) for d in x.sample_shape]} for role, x in by_role.items()}
    out_layers = hn.get("net_params", {}).get("output_layers_order") or \
        [n for n, l in hn["layers"].items() if l.get("type") == "output_layer"]
    net = hn.get("name", NET_NAME)
    names = []
    for name in out_layers:
        feeding = (hn["layers"].get(name, {}).get("input") or [name])[0]
        names.append(feeding if "/" in feeding else f"{net}/{feeding}")
    outputs = {OUTPUT: {"names": names, "shape": [1, int(seq), int(hidden)]}}
    say("compiled streams (from the compiled network; HailoRT not installed here): "
        + ", ".join([f"{r} {d['name']}" for r, d in inputs.items()] + [f"output {n}" for n in names]))
    return {"inputs": inputs, "outputs": outputs, "source": "compiled network"}


