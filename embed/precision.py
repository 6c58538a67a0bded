"""Precision profiles: which parts of the encoder body get 16 bits on the NPU (torch- and DFC-free).

Shared by the compiler (``compile/hef/model_script.py``: a DFC model script) and the NPU simulation
(fake-quantising the same sites of the ONNX body), so a profile means the same in both.

A transformer layer is split into *site groups*, the places an 8-bit build loses precision. A
profile maps every group to 8 or 16 bits and says how the attention mask is applied:
``mask="softmax"`` (the raw 0/1 mask into every softmax, the DFC's
``set_input_mask_to_softmax()``) or ``mask="additive"`` (the graph's ``(1 - mask) * mask_value``
added to the scores and quantised with them). Built in: ``a8`` (all 8-bit); ``balanced``
(default: 16 bits on the residual adds, the LayerNorm internals, the FFN output projections);
``zoo-a16`` (16 bits where Hailo's own Hailo-10H text encoders put them, hailo_model_zoo
``clip_vit_b_32_text_encoder.alls`` and ``siglip2_b_32_256_text_encoder.alls``, plus the
LayerNorm internals by our reading of their ``layer_norm_decomposition``: docs/compiling.md);
``residual-a16`` (the Hailo-10H first rung: the input, the residual adds and the LayerNorm
internals, no conv: Hailo's Hailo-10H Qwen2-1.5B recipe; docs/compiling.md).

A user profile is a JSON file (or TOML on Python 3.11+)::

    {"name": "my-profile",            # optional; default: the file name
     "base": "a8",                    # optional; the profile the bits start from (default a8)
     "mask": "softmax",               # optional: "softmax" (default) or "additive"
     "bits": {"residual_add": 16, "layernorm": 16, "ffn_out": 8}}

The flat form ``{"residual_add": 16}`` is accepted too; unknown groups and widths are errors.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from hefsearch.base.errors import HefsearchError

BIT_WIDTHS = (8, 16)
MASK_MODES = ("softmax", "additive")


@dataclass(frozen=True)
class SiteGroup:
    name: str
    description: str
    #: on the attention path (scores, softmax, context): 16 bits here crashed the DFC 5.3.0
    #: allocator in the public report, so the compiler warns before trying it
    attention_path: bool = False


#: every site group, in the order of a transformer layer
SITE_GROUPS: dict[str, SiteGroup] = {g.name: g for g in (
    SiteGroup("input", "the embeddings input layer"),
    SiteGroup("layernorm", "LayerNorm internals: the x-mean and squared-deviation tensors of a decomposed LayerNorm"),
    SiteGroup("qkv", "query/key/value projections"),
    SiteGroup("attention_scores", "Q·K^T scores (with scale and mask add)", attention_path=True),
    SiteGroup("softmax", "attention softmax", attention_path=True),
    SiteGroup("attention_context", "softmax·V", attention_path=True),
    SiteGroup("attention_out", "attention output projection"),
    SiteGroup("residual_add", "the two residual adds of every layer"),
    SiteGroup("ffn_in", "FFN input (intermediate) projection"),
    SiteGroup("ffn_act", "FFN activation (GELU)"),
    SiteGroup("ffn_out", "FFN output projection"),
    SiteGroup("output", "the last_hidden_state output layer"),
)}

#: --fallback drops 16 bits group by group in this order, then ends at plain a8
FALLBACK_ORDER = ("ffn_out", "layernorm", "residual_add")


class PrecisionProfileError(HefsearchError):
    """A precision profile name or file is invalid."""

    title = "precision profile error"


@dataclass(frozen=True)
class PrecisionProfile:
    """Bits per site group (every group listed) and how the mask is applied."""

    name: str
    bits: Mapping[str, int]
    mask: str = "softmax"
    source: str | None = field(default=None, compare=False)  # file it came from, if any

    def __post_init__(self):
        full = {g: 8 for g in SITE_GROUPS}
        for g, b in dict(self.bits).items():
            if g not in SITE_GROUPS:
                raise PrecisionProfileError(
                    f"Unknown site group {g!r} in precision profile {self.name!r}.",
                    f"Known groups: {', '.join(SITE_GROUPS)}.",
                )
            if b not in BIT_WIDTHS:
                raise PrecisionProfileError(
                    f"Site group {g!r} in precision profile {self.name!r} has {b!r} bits; use 8 or 16.")
            full[g] = int(b)
        if self.mask not in MASK_MODES:
            raise PrecisionProfileError(
                f"Mask mode {self.mask!r} in precision profile {self.name!r} is unknown.",
                f"Use one of: {', '.join(MASK_MODES)}.",
            )
        object.__setattr__(self, "bits", full)

    def bits_for(self, group: str) -> int:
        return self.bits[group]

    @property
    def sixteen_bit(self) -> tuple[str, ...]:
        """The groups at 16 bits, in layer order."""
        return tuple(g for g in SITE_GROUPS if self.bits[g] == 16)

    @property
    def attention_sixteen_bit(self) -> tuple[str, ...]:
        """16-bit groups on the attention path (likely BackendAllocatorException on DFC 5.3.0)."""
        return tuple(g for g in self.sixteen_bit if SITE_GROUPS[g].attention_path)

    @property
    def is_all_8bit(self) -> bool:
        return not self.sixteen_bit

    def without(self, *groups: str, name: str | None = None) -> "PrecisionProfile":
        """A copy with ``groups`` back at 8 bits."""
        bits = dict(self.bits)
        for g in groups:
            bits[g] = 8
        return PrecisionProfile(name or f"{self.name}-{'-'.join(groups)}", bits, self.mask, self.source)

    def same_bits(self, other: "PrecisionProfile") -> bool:
        return dict(self.bits) == dict(other.bits) and self.mask == other.mask

    def describe(self) -> str:
        """One line for humans: ``balanced (16-bit: residual_add, layernorm, ffn_out; mask in softmax)``."""
        sixteen = ", ".join(self.sixteen_bit) or "none"
        return f"{self.name} (16-bit: {sixteen}; mask {'in softmax' if self.mask == 'softmax' else 'additive'})"

    def to_dict(self) -> dict:
        """For manifests and reports; :func:`profile_from_dict` reads it back."""
        d = {"name": self.name, "mask": self.mask, "bits": dict(self.bits), "sixteen_bit": list(self.sixteen_bit)}
        if self.source:
            d["source"] = self.source
        return d


def _a8() -> PrecisionProfile:
    return PrecisionProfile("a8", {})


def _balanced() -> PrecisionProfile:
    return PrecisionProfile("balanced", {"residual_add": 16, "layernorm": 16, "ffn_out": 16})


def _zoo_a16() -> PrecisionProfile:
    # the groups the zoo's a16 lines reach in a text encoder: input_layer1, the residual ew_add
    # layers and the conv layers (projections); the LayerNorm internals through its uniform-
    # precision decomposition (own reading); the score adds stay 8-bit (attention path)
    return PrecisionProfile("zoo-a16", {"input": 16, "layernorm": 16, "qkv": 16, "attention_out": 16,
                                        "residual_add": 16, "ffn_in": 16, "ffn_out": 16})


def _residual_a16() -> PrecisionProfile:
    # Hailo's Qwen2-1.5B recipe for Hailo-10H (DFC 5.3.0) puts a16_w16 on input_layer1 and the
    # residual adds, beside set_input_mask_to_softmax() and a uniform-precision LayerNorm
    # decomposition (the internals, by our reading, at the 16 bits of the adds feeding them, as
    # zoo-a16); its convs keep 8-bit activations except the FFN down projection (a16_w4_a16),
    # left out here: no a16 conv before the 8-bit script
    return PrecisionProfile("residual-a16", {"input": 16, "residual_add": 16, "layernorm": 16})


#: built-in profiles by name
PROFILES: dict[str, PrecisionProfile] = {"a8": _a8(), "balanced": _balanced(), "zoo-a16": _zoo_a16(),
                                         "residual-a16": _residual_a16()}
DEFAULT_PROFILE = "balanced"


def profile_from_dict(data: Mapping, *, name: str = "custom", source: str | None = None) -> PrecisionProfile:
    """Build a profile from the documented file format (nested or flat form)."""
    if not isinstance(data, Mapping):
        raise PrecisionProfileError(f"Precision profile {source or name} must be a JSON/TOML object.")
    data = dict(data)
    if "bits" in data:
        bits = data.pop("bits")
        if not isinstance(bits, Mapping):
            raise PrecisionProfileError(f"'bits' in precision profile {source or name} must be an object.")
        base_name = data.pop("base", "a8")
        mask = data.pop("mask", None)
        name = data.pop("name", name)
        data.pop("sixteen_bit", None)
        data.pop("source", None)
        if data:
            raise PrecisionProfileError(
                f"Unknown keys {', '.join(sorted(data))} in precision profile {source or name}.",
                "Allowed: name, base, mask, bits.",
            )
    else:  # flat form: every key is a group, except the optional name/base/mask
        base_name = data.pop("base", "a8")
        mask = data.pop("mask", None)
        name = data.pop("name", name)
        bits = data
    if base_name not in PROFILES:
        raise PrecisionProfileError(
            f"Base profile {base_name!r} in {source or name} is unknown.", f"Use one of: {', '.join(PROFILES)}.")
    base = PROFILES[base_name]
    merged = dict(base.bits)
    for g, b in bits.items():
        if isinstance(b, bool) or not isinstance(b, int):
            raise PrecisionProfileError(f"Site group {g!r} in {source or name} must be 8 or 16, not {b!r}.")
        merged[g] = b
    return PrecisionProfile(str(name), merged, mask or base.mask, source)


def load_profile(spec: str | Path | PrecisionProfile | None) -> PrecisionProfile:
    """A built-in profile by name (``a8``, ``balanced``; None = default) or a JSON/TOML file."""
    if isinstance(spec, PrecisionProfile):
        return spec
    if spec is None:
        return PROFILES[DEFAULT_PROFILE]
    if str(spec) in PROFILES:
        return PROFILES[str(spec)]
    path = Path(spec).expanduser()
    if not path.is_file():
        raise PrecisionProfileError(
            f"Precision {str(spec)!r} is neither a built-in profile nor a file.",
            f"Use {' or '.join(PROFILES)}, or a JSON file such as "
            '{"bits": {"residual_add": 16, "layernorm": 16, "ffn_out": 8}}.',
        )
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".toml":
        try:
            import tomllib
        except ImportError:  # Python 3.10
            raise PrecisionProfileError(
                f"{path} is TOML, which needs Python 3.11+.", "Write the profile as JSON instead.") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise PrecisionProfileError(f"{path} is not valid TOML ({e}).") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise PrecisionProfileError(f"{path} is not valid JSON ({e}).") from None
    return profile_from_dict(data, name=path.stem, source=str(path))


def fallback_ladder(profile: PrecisionProfile) -> list[PrecisionProfile]:
    """The profiles ``--fallback`` tries in turn: ``profile``, then without 16-bit FFN output
    projections, then also without LayerNorm internals, then also without residual adds, then
    plain ``a8``. Steps that change nothing are skipped."""
    ladder = [profile]
    dropped: list[str] = []
    for g in FALLBACK_ORDER:
        dropped.append(g)
        step = profile.without(*dropped, name=f"{profile.name}-no-{'-'.join(dropped)}".replace("_", "-"))
        if not step.same_bits(ladder[-1]):
            ladder.append(step)
    a8 = PrecisionProfile("a8", {}, profile.mask)
    if not a8.same_bits(ladder[-1]):
        ladder.append(a8)
    elif ladder[-1].name != "a8" and len(ladder) > 1:
        ladder[-1] = a8  # same bits as a8: call it by its name
    return ladder


# -- where each group sits in the exported ONNX body --------------------------------------------
# Node names of the torch export of Hugging Face BERT/XLM-R encoders (compile/export/torch_body.py), e.g.
# /encoder/layer.0/attention/self/query/MatMul, /encoder/layer.0/output/Add.
_LAYER = r"/encoder/layer\.\d+"
_NODE_RULES: tuple[tuple[str, re.Pattern, frozenset[str]], ...] = (
    ("qkv", re.compile(_LAYER + r"/attention/self/(query|key|value)/"), frozenset({"MatMul", "Add", "Gemm"})),
    ("attention_context", re.compile(_LAYER + r"/attention/self/MatMul_1$"), frozenset({"MatMul"})),
    ("attention_scores", re.compile(_LAYER + r"/attention/self/(MatMul|Mul|Div|Add)(_\d+)?$"),
     frozenset({"MatMul", "Mul", "Div", "Add"})),
    ("softmax", re.compile(_LAYER + r"/attention/self/Softmax"), frozenset({"Softmax"})),
    ("attention_out", re.compile(_LAYER + r"/attention/output/dense/"), frozenset({"MatMul", "Add", "Gemm"})),
    ("residual_add", re.compile(_LAYER + r"/(attention/)?output/Add$"), frozenset({"Add"})),
    ("ffn_in", re.compile(_LAYER + r"/intermediate/dense/"), frozenset({"MatMul", "Add", "Gemm"})),
    ("ffn_act", re.compile(_LAYER + r"/intermediate/intermediate_act_fn/"),
     frozenset({"Div", "Erf", "Add", "Mul", "Tanh", "Pow", "Sigmoid", "Gelu"})),
    ("ffn_out", re.compile(_LAYER + r"/output/dense/"), frozenset({"MatMul", "Add", "Gemm"})),
)


def classify_onnx_node(op_type: str, name: str) -> str | None:
    """The site group of one node of the exported body, or None (shape plumbing, mask prep).

    Every ``LayerNormalization`` node (including the embedding LayerNorm) is ``layernorm``.
    """
    if op_type == "LayerNormalization":
        return "layernorm"
    for group, pattern, ops in _NODE_RULES:
        if op_type in ops and pattern.search(name):
            if group == "attention_scores" and op_type == "MatMul" and name.endswith("MatMul_1"):
                continue
            return group
    return None
