"""Precision profile + parsed network -> Dataflow Compiler model script (.alls text).

The parsed network (``ClientRunner.get_hn_dict()``) lists every layer with the ONNX nodes it
came from (``original_names``). Each layer is put in a site group of
:mod:`hefsearch.embed.precision` through those names, so a profile's "16 bits on the residual
adds" becomes ``quantization_param([ew_add2, ew_add4, ...], precision_mode=a16_w16)`` with the
layers of *this* parse, never a guessed glob.

Two recipes, each the one public record for its chips (docs/compiling.md has them line by line,
docs/hailo-facts.md their sources):

- ``hailo10h`` (:data:`RECIPE_HAILO10H`): the script of the only sentence-encoder HEF on record
  for a Hailo-10H (a public user report, DFC 5.3.0), line for line at 8 bits. The
  ``negative_exponent`` line fails in optimize() with an 8-bit softmax there, so it is written
  only when the softmax is 16-bit (the report's fix). A 16-bit rung adds the lines of Hailo's own
  Hailo-10H scripts and one ``quantization_param`` line per 16-bit site group, each under a
  comment naming the public file, commit and line it follows: with a16 convs (``zoo-a16``) the
  zoo's text encoders' (:data:`ZOO_A16_LINES`, no mask input there), without (``residual-a16``)
  the Qwen2 recipe's (:data:`QWEN_A16_LINES`, beside the mask command).
- ``zoo`` (:data:`RECIPE_ZOO`, Hailo-8/8L): the model zoo's transformer text-encoder scripts
  (all_minilm_l6_v2, bert_base_uncased), then one ``quantization_param`` line per 16-bit group.

The user's extra lines (``--alls-extra``) come last, verbatim, in both. That a LayerNorm group's
precision reaches the internals the DFC decomposes it into is an assumption not verified on a
real DFC.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from hefsearch.embed.precision import SITE_GROUPS, PrecisionProfile, classify_onnx_node

MATMUL_CORRECTION = "pre_quantization_optimization(matmul_correction, layers={matmul*}, correction_type=zp_comp_block)"
MASK_COMMAND = "set_input_mask_to_softmax()"
NEGATIVE_EXPONENT = "model_optimization_config(negative_exponent, layers={*}, rank=0)"
EW_ADD_UNFUSED = "pre_quantization_optimization(ew_add_fusing, policy=disabled)"
EQUALIZATION = "pre_quantization_optimization(equalization, policy=enabled)"
#: Hailo's 12-layer text encoders on Hailo-10H (hailo_model_zoo master, DFC 5.2, the generic scripts
#: its core/main_utils.py uses for that chip; on chip 89.5 vs 90.6 float, 49.5 FPS for CLIP ViT-B/32).
#: Cited at commit c83fc03; line numbers are that commit's.
ZOO_COMMIT = "c83fc03"
ZOO_CLIP_TEXT = "hailo_model_zoo/cfg/alls/generic/clip_vit_b_32_text_encoder.alls"
ZOO_SIGLIP_TEXT = "hailo_model_zoo/cfg/alls/generic/siglip2_b_32_256_text_encoder.alls"
#: Hailo's own Qwen2-1.5B-Instruct recipe for Hailo-10H (DFC 5.3.0), the one public Hailo-10H script with
#: a16 lines and set_input_mask_to_softmax() together, in a copy said to be extracted unmodified from
#: Hailo's qwen2_1.5b_instruct.q.har; line numbers are that file's at commit c870419
QWEN_HAILO10H = "l-nmch/hailo-10h-llm-compiler recipes/hailo-qwen2-1.5b-instruct.alls (c870419)"
#: where a user finds the public Hailo-10H report (it is not in this repository)
REPORT_SOURCE = ('Hailo Community forum, community.hailo.ai: a user\'s follow-up to the thread "DFC conversion '
                 'failures with transformer-based models (SwinV2, ViT, ConvNeXt)"')
MULTIPROC_OFF = "model_optimization_config(globals, multiproc_policy=disabled)"
LN_UNIFORM = ("pre_quantization_optimization(layer_norm_decomposition, equalization=disabled, "
              "bit_decomposition_mode=uniform_precision)")
#: what a Hailo-10H 16-bit rung with a16 convs (zoo-a16) writes beside its a16 lines: (line, sources)
ZOO_A16_LINES = (
    (MULTIPROC_OFF, (f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} line 2", f"{ZOO_SIGLIP_TEXT}@{ZOO_COMMIT} line 2")),
    (EW_ADD_UNFUSED, (f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} line 3", f"{ZOO_SIGLIP_TEXT}@{ZOO_COMMIT} line 3")),
    (MATMUL_CORRECTION, (f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} line 5", f"{ZOO_SIGLIP_TEXT}@{ZOO_COMMIT} line 5")),
    (LN_UNIFORM, (f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} line 12",)),
)
#: written after the a16 lines: the feature splitters back to 8 bits (a glob that may match no layer
#: of our parse: a question for hardware), and the allocator's legacy spatial defuse (perhaps the
#: "super-defuse" community thread 19530 was asked for; unconfirmed)
ZOO_A16_TAIL = (
    ("quantization_param({conv_feature_splitter[0-9]*_[2-3]}, precision_mode=a8_w8)",
     (f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} line 11", f"{ZOO_SIGLIP_TEXT}@{ZOO_COMMIT} line 10")),
    ("allocator_param(spatial_defuse_legacy=True)",
     (f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} line 14", f"{ZOO_SIGLIP_TEXT}@{ZOO_COMMIT} line 12")),
)
#: what a Hailo-10H 16-bit rung without a16 convs (residual-a16) writes beside its a16 lines: the lines
#: the Qwen2 recipe has beside its a16 input and residual adds, in the zoo's form where both have one
#: (the Qwen2 recipe corrects only its QK matmuls, with zp_comp_block_3; its LayerNorm line has more
#: arguments)
QWEN_A16_LINES = (
    (MULTIPROC_OFF, (f"{QWEN_HAILO10H} line 15", f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} line 2")),
    (EW_ADD_UNFUSED, (f"{QWEN_HAILO10H} line 8", f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} line 3")),
    (MATMUL_CORRECTION, (f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} line 5", f"{ZOO_SIGLIP_TEXT}@{ZOO_COMMIT} line 5",
                         f"{QWEN_HAILO10H} (matmul_correction, zp_comp_block_3, on its QK matmuls)")),
    (LN_UNIFORM, (f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} line 12",
                  f"{QWEN_HAILO10H} (the same with eq_consumer, square_reduce_sum_groups, token_equalization)")),
)
#: the site groups whose layers are convs: a profile with one at 16 bits has a16 convs
CONV_GROUPS = ("qkv", "attention_out", "ffn_in", "ffn_out")
_ZOO_A16 = f"{ZOO_CLIP_TEXT}@{ZOO_COMMIT} lines 6-8, {ZOO_SIGLIP_TEXT}@{ZOO_COMMIT} lines 7-9"
#: site group -> the public a16 line its quantization_param line follows on Hailo-10H (zoo-a16)
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
#: the same for a profile without a16 convs (residual-a16): the Qwen2 recipe's a16 lines
QWEN_SOURCES = {
    "input": f"quantization_param([<net>/input_layer1], precision_mode=a16_w16) in {QWEN_HAILO10H} line 17",
    "residual_add": f"quantization_param([<every block's ew_add4>], ...) and ([<ew_add5>], precision_mode=a16_w16) "
                    f"in {QWEN_HAILO10H} lines 18-19 (the residual adds)",
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


@dataclass(frozen=True)
class ScriptSettings:
    """What a model script says besides the precision: the calibration set's size and batch,
    the optimisation and compression levels, the user's ``--alls-extra`` lines, the ``recipe``
    it follows, and ``mask_command``: whether the mask input is declared with
    ``set_input_mask_to_softmax()`` (None: when the profile applies the mask inside softmax)."""

    calibset_size: int
    batch_size: int = 8
    optimization_level: int = 0
    compression_level: int = 0
    extra_lines: list[str] | tuple[str, ...] = ()
    recipe: str = RECIPE_ZOO
    mask_command: bool | None = None


def build_model_script(profile: PrecisionProfile, hn: dict, settings: ScriptSettings) -> str:
    """The .alls text for ``profile`` on the parsed network ``hn``, written by ``settings.recipe``."""
    recipe, extra_lines, mask_command = settings.recipe, settings.extra_lines, settings.mask_command
    if recipe not in RECIPES:
        raise ValueError(f"unknown model-script recipe {recipe!r}")
    sites = site_layers(hn)
    command = profile.mask == "softmax" if mask_command is None else bool(mask_command)
    calibration = (f"model_optimization_config(calibration, batch_size={int(settings.batch_size)}, "
                   f"calibset_size={int(settings.calibset_size)})")
    flavor = (f"model_optimization_flavor(optimization_level={int(settings.optimization_level)}, "
              f"compression_level={int(settings.compression_level)})")
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


def has_a16_convs(profile: PrecisionProfile) -> bool:
    """True when ``profile`` puts 16 bits on a projection (conv) layer."""
    return any(profile.bits_for(g) == 16 for g in CONV_GROUPS)


def _hailo10h_sixteen_bit(lines: list[str], profile: PrecisionProfile, sites: dict, command: bool) -> None:
    """Appends the rest of a Hailo-10H 16-bit rung's script after the report's lines (the user's
    lines follow): every line under a comment naming its public source. With a16 convs: the zoo's
    Hailo-10H text encoders' lines; without: the Qwen2 Hailo-10H recipe's."""
    convs = has_a16_convs(profile)
    if command and convs:
        lines.append("# note: the zoo's Hailo-10H text encoders have no mask input; their a16 conv lines are not shown "
                     "together with set_input_mask_to_softmax() in any public script")
    elif command:
        lines.append(f"# note: a16 on input_layer1 and the residual adds beside set_input_mask_to_softmax(), as in "
                     f"{QWEN_HAILO10H} lines 10, 17-19 (a decoder with a causal mask: no public bidirectional "
                     "encoder with a keys01 mask has these lines)")
    for line, files in (ZOO_A16_LINES if convs else QWEN_A16_LINES):
        _sourced(lines, line, files)
    if profile.bits_for("softmax") == 16:
        _sourced(lines, NEGATIVE_EXPONENT, (f"{REPORT_SOURCE} section 5.1 (with a 16-bit softmax only: at 8 bits it "
                                            "fails in optimize(), NegativeSlopeExponentNonFixable)",))
    sources = A16_SOURCES if convs else {**A16_SOURCES, **QWEN_SOURCES}
    for group in profile.sixteen_bit:
        layers = sites[group]
        if group == "layernorm":  # no a16 line in any public Hailo-10H script: the decomposition line does it
            lines.append("# layernorm: no quantization_param line; the layer_norm_decomposition(..., "
                         f"bit_decomposition_mode=uniform_precision) line above ({ZOO_CLIP_TEXT}, "
                         f"{QWEN_HAILO10H}) is how Hailo's Hailo-10H scripts treat it (own reading: the "
                         "internals keep the 16 bits of the residual adds feeding them; not verified on a DFC)")
            continue
        if not layers:
            lines.append(f"# {group}: 16 bits requested, but no layer of the parsed network belongs to it")
            continue
        source = sources.get(group, "no public Hailo-10H script (a user profile's own choice)")
        lines.append(f"# {group}: {SITE_GROUPS[group].description}; follows {source}")
        lines.append(f"quantization_param([{', '.join(layers)}], precision_mode=a16_w16)")
    if convs:
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
    for m in re.finditer(r"quantization_param\(\[([^\]]*)\],\s*precision_mode=a16_w16\)",
                         "\n".join(script_commands(script))):
        names += [n.strip() for n in m.group(1).split(",") if n.strip()]
    return names


#: the DFC's quantisation-aware fine-tuning (QFT): it distils the quantised network towards its
#: float one on the calibration set, inside the SDK's emulator (TensorFlow; wants a GPU). Used by
#: the model zoo's CLIP text encoders and Whisper (hailo-api.md section 3), with this learning rate.
DFC_FINETUNE_LINE = "post_quantization_optimization(finetune, policy=enabled, learning_rate=1e-5)"

