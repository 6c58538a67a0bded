"""Precision profile + parsed network -> Dataflow Compiler model script (.alls text).

The parsed network (``ClientRunner.get_hn_dict()``) lists every layer with the ONNX nodes it
came from (``original_names``). Each layer is put in a site group of
:mod:`hefsearch.embed.precision` through those names, so a profile's "16 bits on the residual
adds" becomes ``quantization_param([ew_add2, ew_add4, ...], precision_mode=a16_w16)`` with the
layers of *this* parse, never a guessed glob.

Two recipes, each the one public record for its chips:

- ``hailo10h`` (:data:`RECIPE_HAILO10H`): the script of the only sentence-encoder HEF on record
  for a Hailo-10H (a user report on the Hailo Community forum, community.hailo.ai, a follow-up to
  the thread "DFC conversion failures with transformer-based models (SwinV2, ViT, ConvNeXt)"; DFC
  5.3.0; its author's own follow-up is community thread 19530), line for line at 8 bits::

      model_optimization_config(calibration, batch_size=16, calibset_size=1024)
      pre_quantization_optimization(equalization, policy=enabled)
      model_optimization_flavor(optimization_level=0, compression_level=0)
      set_input_mask_to_softmax()

  Nothing else: the same report found ``model_optimization_config(negative_exponent, ...,
  rank=0)`` to fail in optimize() with an 8-bit softmax (``NegativeSlopeExponentNonFixable``), so
  that line is written only when the softmax is 16-bit (the report's fix). A 16-bit rung adds
  the lines Hailo's own 12-layer text encoders for Hailo-10H carry beside their a16 lines
  (:data:`ZOO_A16_LINES`, each written under a comment naming its file in hailo_model_zoo), then
  one ``quantization_param`` line per 16-bit site group, each under a comment naming the public
  line it follows (:data:`A16_SOURCES`). Those zoo encoders have no mask input, so these lines
  are not shown anywhere together with ``set_input_mask_to_softmax()``; the script says so.
- ``zoo`` (:data:`RECIPE_ZOO`, Hailo-8/8L): the model zoo's transformer text-encoder scripts
  (all_minilm_l6_v2 and bert_base_uncased): the mask command first when the mask mode uses it,
  calibration, equalization, ``ew_add_fusing`` off, the flavour, ``matmul_correction``
  zp_comp_block and ``negative_exponent`` rank 0 (both in every zoo text-encoder script), then
  one ``quantization_param`` line per 16-bit site group.

The user's extra lines (``--alls-extra``) come last, verbatim, in both.

The LayerNorm group targets the parsed ``layer_normalization`` layers; the DFC decomposes them
during optimisation (into ``ew_sub1_<ln>``, ``square1_<ln>`` ... as zoo scripts name them), and
that the precision request reaches those internals is an assumption not verified on a real DFC.
"""

from __future__ import annotations

import re
from pathlib import Path

from hefsearch.embed.precision import SITE_GROUPS, PrecisionProfile, classify_onnx_node

MATMUL_CORRECTION = "pre_quantization_optimization(matmul_correction, layers={matmul*}, correction_type=zp_comp_block)"
MASK_COMMAND = "set_input_mask_to_softmax()"
NEGATIVE_EXPONENT = "model_optimization_config(negative_exponent, layers={*}, rank=0)"
EW_ADD_UNFUSED = "pre_quantization_optimization(ew_add_fusing, policy=disabled)"
EQUALIZATION = "pre_quantization_optimization(equalization, policy=enabled)"
#: Hailo's 12-layer text encoders on Hailo-10H (hailo_model_zoo v5.2; the generic scripts its
#: core/main_utils.py uses for that chip; on chip 89.5 vs 90.6 float, 49.5 FPS for CLIP ViT-B/32)
ZOO_CLIP_TEXT = "hailo_model_zoo/cfg/alls/generic/clip_vit_b_32_text_encoder.alls"
ZOO_SIGLIP_TEXT = "hailo_model_zoo/cfg/alls/generic/siglip2_b_32_256_text_encoder.alls"
#: where a user finds the public Hailo-10H report (it is not in this repository)
REPORT_SOURCE = ('Hailo Community forum, community.hailo.ai: a user\'s follow-up to the thread "DFC conversion '
                 'failures with transformer-based models (SwinV2, ViT, ConvNeXt)"')
#: what a Hailo-10H 16-bit rung writes beside its a16 lines: (line, the public files it is in)
ZOO_A16_LINES = (
    ("model_optimization_config(globals, multiproc_policy=disabled)", (ZOO_CLIP_TEXT, ZOO_SIGLIP_TEXT)),
    (EW_ADD_UNFUSED, (ZOO_CLIP_TEXT, ZOO_SIGLIP_TEXT)),
    ("pre_quantization_optimization(layer_norm_decomposition, equalization=disabled, "
     "bit_decomposition_mode=uniform_precision)", (ZOO_CLIP_TEXT,)),
)
#: written after the a16 lines: the feature splitters back to 8 bits, and the allocator's legacy
#: spatial defuse (perhaps the "super-defuse" community thread 19530 was asked for; unconfirmed)
ZOO_A16_TAIL = (
    ("quantization_param({conv_feature_splitter[0-9]*_[2-3]}, precision_mode=a8_w8)", (ZOO_CLIP_TEXT, ZOO_SIGLIP_TEXT)),
    ("allocator_param(spatial_defuse_legacy=True)", (ZOO_CLIP_TEXT,)),
)
_ZOO_A16 = f"{ZOO_CLIP_TEXT}, {ZOO_SIGLIP_TEXT}"
#: site group -> the public a16 line its quantization_param line follows on Hailo-10H
A16_SOURCES = {
    "input": f"quantization_param(input_layer1, precision_mode=a16_w16) in {_ZOO_A16}",
    "residual_add": f"quantization_param({{ew_add*}}, precision_mode=a16_w16) in {_ZOO_A16} "
                    "(residual adds only: the score adds are on the attention path)",
    "qkv": f"quantization_param({{conv*}}, precision_mode=a16_w16) in {_ZOO_A16}",
    "attention_out": f"quantization_param({{conv*}}, precision_mode=a16_w16) in {_ZOO_A16}",
    "ffn_in": f"quantization_param({{conv*}}, precision_mode=a16_w16) in {_ZOO_A16}",
    "ffn_out": f"quantization_param({{conv*}}, precision_mode=a16_w16) in {_ZOO_A16}",
    "softmax": f"the 16-bit softmax of the public Hailo-10H report, section 5 ({REPORT_SOURCE})",
    "attention_scores": f"16 bits on the score path, tried in the public Hailo-10H report, section 5 ({REPORT_SOURCE})",
}
RECIPE_HAILO10H = "hailo10h"
RECIPE_ZOO = "zoo"
RECIPES = (RECIPE_HAILO10H, RECIPE_ZOO)
#: the public Hailo-10H report calibrated with 1024 rows in batches of 16
REPORT_CALIBSET, REPORT_BATCH = 1024, 16
HEADER = "# hefsearch model script (generated by 'hefsearch compile hef'; edits are overwritten)"


def short_name(layer: str) -> str:
    """``net/ew_add3`` -> ``ew_add3`` (model scripts name layers without the network prefix)."""
    return layer.split("/", 1)[-1]


def _op_of(node_name: str) -> str:
    """The ONNX op type a torch-exported node name ends with: ``.../MatMul_1`` -> ``MatMul``."""
    return re.sub(r"_\d+$", "", node_name.rstrip("/").rsplit("/", 1)[-1])


def layer_group(layer: dict) -> str | None:
    """The site group of one parsed layer, or None."""
    kind = layer.get("type", "")
    if kind == "input_layer":
        return "input"
    if kind == "output_layer":
        return "output"
    for orig in layer.get("original_names") or []:
        group = classify_onnx_node(_op_of(orig), orig)
        if group:
            return group
    if kind == "layer_normalization":
        return "layernorm"
    return None


def site_layers(hn: dict) -> dict[str, list[str]]:
    """Site group -> parsed layer names (short, in network order); every group is present. The
    ``input`` group is the first input layer only, the embeddings (the zoo's ``input_layer1``):
    the mask input is never put at 16 bits."""
    out: dict[str, list[str]] = {g: [] for g in SITE_GROUPS}
    for name, layer in hn["layers"].items():
        group = layer_group(layer)
        if group == "input" and out["input"]:
            continue
        if group:
            out[group].append(short_name(name))
    return out


def recipe_for(hw_arch: str) -> str:
    """The script recipe on record for a chip: the Hailo-10H report's, else the zoo's."""
    return RECIPE_HAILO10H if hw_arch == "hailo10h" else RECIPE_ZOO


def build_model_script(
    profile: PrecisionProfile,
    hn: dict,
    *,
    calibset_size: int,
    batch_size: int = 8,
    optimization_level: int = 0,
    compression_level: int = 0,
    extra_lines: list[str] | tuple[str, ...] = (),
    recipe: str = RECIPE_ZOO,
    mask_command: bool | None = None,
) -> str:
    """The .alls text for ``profile`` on the parsed network ``hn``, written by ``recipe``.

    ``mask_command``: whether the mask input is declared with ``set_input_mask_to_softmax()``
    (default: when the profile applies the mask inside softmax).
    """
    if recipe not in RECIPES:
        raise ValueError(f"unknown model-script recipe {recipe!r}")
    sites = site_layers(hn)
    command = profile.mask == "softmax" if mask_command is None else bool(mask_command)
    calibration = (f"model_optimization_config(calibration, batch_size={int(batch_size)}, "
                   f"calibset_size={int(calibset_size)})")
    flavor = (f"model_optimization_flavor(optimization_level={int(optimization_level)}, "
              f"compression_level={int(compression_level)})")
    lines = [HEADER, f"# precision profile: {profile.describe()}"]
    if recipe == RECIPE_HAILO10H:
        lines.append(f"# recipe: the public Hailo-10H report (DFC 5.3.0), {REPORT_SOURCE}")
        lines += [calibration, EQUALIZATION, flavor]
        if command:
            lines.append(MASK_COMMAND)
        if profile.sixteen_bit:
            _hailo10h_sixteen_bit(lines, profile, sites, command)
            return _with_extra(lines, extra_lines)
    else:
        lines.append("# recipe: the model zoo's transformer text encoders (all_minilm_l6_v2, bert_base_uncased)")
        if command:
            lines.append(MASK_COMMAND)
        lines += [calibration, EQUALIZATION, EW_ADD_UNFUSED, flavor, MATMUL_CORRECTION, NEGATIVE_EXPONENT]
    for group in profile.sixteen_bit:
        layers = sites[group]
        if not layers:
            lines.append(f"# {group}: 16 bits requested, but no layer of the parsed network belongs to it")
            continue
        lines.append(f"# {group}: {SITE_GROUPS[group].description}")
        lines.append(f"quantization_param([{', '.join(layers)}], precision_mode=a16_w16)")
    return _with_extra(lines, extra_lines)


def _with_extra(lines: list[str], extra_lines) -> str:
    """The script's text: ``lines``, then the user's own (--alls-extra) under a comment."""
    extra = [ln.rstrip() for ln in extra_lines if ln.strip()]
    if extra:
        lines.append("# user lines (--alls-extra)")
        lines += extra
    return "\n".join(lines) + "\n"


def _sourced(lines: list[str], line: str, files) -> None:
    lines.append(f"# from {', '.join(files)}")
    lines.append(line)


def _hailo10h_sixteen_bit(lines: list[str], profile: PrecisionProfile, sites: dict, command: bool) -> None:
    """Appends the rest of a Hailo-10H 16-bit rung's script after the report's lines (the user's
    lines follow): every line under a comment naming its public source."""
    if command:
        lines.append("# note: the zoo's Hailo-10H text encoders have no mask input; these lines are not shown "
                     "together with set_input_mask_to_softmax() in any public script")
    for line, files in ZOO_A16_LINES:
        _sourced(lines, line, files)
    if profile.bits_for("softmax") == 16:
        _sourced(lines, NEGATIVE_EXPONENT, (f"{REPORT_SOURCE} section 5.1 (with a 16-bit softmax only: at 8 bits it "
                                            "fails in optimize(), NegativeSlopeExponentNonFixable)",))
    for group in profile.sixteen_bit:
        layers = sites[group]
        if group == "layernorm":  # no a16 line in any public Hailo-10H script: the decomposition line does it
            lines.append("# layernorm: no quantization_param line; the layer_norm_decomposition(..., "
                         f"bit_decomposition_mode=uniform_precision) line above ({ZOO_CLIP_TEXT}) is how the "
                         "zoo's Hailo-10H encoders treat it (own reading: the internals keep the 16 bits of "
                         "the residual adds feeding them; not verified on a DFC)")
            continue
        if not layers:
            lines.append(f"# {group}: 16 bits requested, but no layer of the parsed network belongs to it")
            continue
        source = A16_SOURCES.get(group, "no public Hailo-10H script (a user profile's own choice)")
        lines.append(f"# {group}: {SITE_GROUPS[group].description}; follows {source}")
        lines.append(f"quantization_param([{', '.join(layers)}], precision_mode=a16_w16)")
    for line, files in ZOO_A16_TAIL:
        _sourced(lines, line, files)


def script_commands(script: str) -> list[str]:
    """The command lines of a script, without comments and blank lines (for reports and tests)."""
    out = []
    for raw in script.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            out.append(line)
    return out


def read_extra_lines(path: str | Path | None) -> list[str]:
    if not path:
        return []
    return Path(path).expanduser().read_text(encoding="utf-8").splitlines()


def sixteen_bit_layers(script: str) -> list[str]:
    """Layer names a script sets to a16_w16 (for reports and tests)."""
    names: list[str] = []
    for m in re.finditer(r"quantization_param\(\[([^\]]*)\],\s*precision_mode=a16_w16\)", script):
        names += [n.strip() for n in m.group(1).split(",") if n.strip()]
    return names


#: the DFC's quantisation-aware fine-tuning (QFT): it distils the quantised network towards its
#: float one on the calibration set, inside the SDK's emulator (TensorFlow; wants a GPU). Used by
#: the model zoo's CLIP text encoders and Whisper (hailo-api.md section 3), with this learning rate.
DFC_FINETUNE_LINE = "post_quantization_optimization(finetune, policy=enabled, learning_rate=1e-5)"

