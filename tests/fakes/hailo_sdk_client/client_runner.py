"""Fake ``ClientRunner``: parse an ONNX body, take a model script, "optimise", emulate, compile.

Behaviour copied from the public report behind hefsearch issue 5 (DFC 5.3.0, transformer
encoders), its author's follow-up (community thread 19530) and Hailo's public scripts, nothing
more:

- start nodes may be graph inputs, ONNX node names (the report's ``/embeddings/Add_1`` and
  ``/Mul``, the zoo BERT's ``/bert/embeddings/Add_1``) or tensor names (the zoo BERT's
  ``/bert/Mul_output_0``); a node starts the network at that node (:func:`_cut_at`), and the
  input layer's ``original_names`` is the start name given;
- ``translate_onnx_model`` elevates a 3-D NWC input to a 4-D NHWC layer with H=1, so a
  [N,S,H] input becomes ``[-1, 1, S, H]``; a 4-D input with an NHWC format keeps its dims
  (``[N,1,1,S]`` -> ``[-1, 1, 1, S]``); a 4-D input without a format is read as NCHW. A format
  whose length differs from the input's rank is rejected ("Input format ... doesn't match its
  rank"), e.g. a 4-D format for the 3-D embeddings.
- ``optimize`` with 3-D calibration arrays raises ``IndexError`` (the report's crash in
  LayerNorm decomposition); calibration must be a dict keyed by the parsed input-layer names
  (``KeyError`` otherwise) holding ``(N,) + input_shape[1:]`` arrays.
- The walls of the public Hailo-10H report (shared/reference/seeds/000_*.txt, DFC 5.3.0) and of
  its author's follow-up (community thread 19530, as described in hefsearch issue 36), on by
  default for DFC 5.3.x building ``hailo10h`` as the follow-up has them (class switches, None =
  that default):

  - ``FAIL_A16_ON``: ``compile`` raises ``BackendAllocatorException`` "after finding valid
    partitions" when the script puts ``a16_w16`` on a layer the rule names: "attention" (matmul,
    softmax and the ops between them: the follow-up's first step, "attention crash", and the
    default everywhere), "any" (the report's first reading, which the follow-up withdrew: every
    a16 build it tried crashed), or a set of HN layer types;
  - ``NAN_EXPONENT``: ``optimize`` raises ``AccelerasNanExponentError`` ("nan exponent"; class
    and wording are the fake's own, the real ones are not public) when the script puts a16 on
    more than one conv layer (the follow-up: one a16 conv compiled, a16 convs then failed so);
  - ``UNKNOWN_A16_FAILURE`` (default off): ``optimize`` raises an exception of the class given
    (``True``: the fake's ``AccelerasNanExponentError``) whenever the script has any a16 layer,
    for tests with an exception no code can know by name;
  - ``SPATIAL_DEFUSE`` (default off): ``compile`` with any a16 layer raises
    ``AllocatorDefuseError`` ("needs super-defuse", the follow-up's third step): "always", or
    "unless_legacy" (passes when the script has ``allocator_param(spatial_defuse_legacy=True)``,
    the zoo's line for clip_vit_b_32_text_encoder on Hailo-10H, which may or may not be what the
    thread needed: unconfirmed);
  - ``NEGATIVE_EXPONENT_WALL``: ``optimize`` raises ``NegativeSlopeExponentNonFixable`` ("...
    ew_sub_softmax ... Desired shift is 8.0, but op has only 8 data bits") when the script has
    ``model_optimization_config(negative_exponent, ...)`` and a softmax layer is not at a16
    (the report: "fixed by putting the softmax at a16_w16").

  ``WRAP_WALLS`` raises either wall wrapped in another exception (cause set), as a caller of the
  SDK's internals may see it.
- ``OUTPUT_BASIS``: the outputs (every emulation context and the compiled HEF) in another channel
  basis, "permuted" by default for DFC 5.3.x + ``hailo10h`` (the report: SDK_NATIVE and the HEF
  both at cosine ~0.1 against ONNX because Hailo reorders channels; basis-invariant metrics held).
- ``compile`` returns bytes: a small JSON "HEF" in the format the fake HailoRT
  (``tests/fakes/hailo_platform``, ``tests/fakes/fake_hef.py``) reads, so a fake-compiled HEF runs there;
  it carries the DFC version that made it (``sdk_version``, as the real HEF header does: hailort
  ``hef.proto``), which the fake HailoRT compares with its own version.
  Like a real HEF (docs/hailo-facts.md): input streams are the input layers, folded by the
  allocator's automatic spatial reshape ([1, 128, C] -> [16, 8, C], the zoo's all_minilm) unless
  the script says ``allocator_param(enable_auto_spatial_reshapes=False)``; output streams are
  named after the layer that feeds the output layer, and ``optimize()`` decomposes LayerNorm
  layers into new ones, so that name exists only in the optimised/compiled network (the name
  ``ew_add2_<ln>`` is the fake's own: the real decomposed names are not public, and hefsearch
  must not depend on them).
- A 4-D input with an NGWC format (the zoo's ``masked_fill=NGWC``) parses to [-1, 1, W, G*C].
- ``set_input_mask_to_softmax()``: the mask input layer must feed the attention-score adds
  (each an ``ew_add`` of the scores, read by a ``softmax``) directly, as the zoo's MiniLM
  (``masked_fill``, NGWC), or through one Mul by a constant, as the report's ``/Mul`` start node
  ([N,1,1,S], NHWC: mask -> Mul -> Add); any other topology (e.g. through Sub and Mul) is
  refused when the script is loaded. With it, the network takes the mask as 0/1
  values applied inside every softmax whatever the ONNX does with that input (the zoo's
  calibration calls it ``multiplicative_mask``; ``tests/fakes/hailo_semantics.py``); emulation
  and the "device" compute that, and calibration of that input must be 0/1. DFC 3.x before 3.34
  does not know the command (a user report on DFC 3.33; the zoo first uses it with 3.34); each
  DFC line builds only its own chips (zoo ``base_parsers.py`` on master vs v2.18; the refusal's
  wording is the fake's own).
- Own choices where the sources are silent: the exception messages, where the softmax-topology
  check runs (when the script is loaded), the fold rule (only [1, W, C] with W divisible by 8).

Emulation runs the ONNX body with onnxruntime; ``SDK_QUANTIZED`` adds uniform 8-bit rounding of
the input and the output (16-bit where the script asks for it on those layers), with ranges
taken from the calibration set.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import zipfile
from pathlib import Path

import numpy as np

from hailo_semantics import mask_inside_softmax, to_basis

from .exceptions import (AccelerasNanExponentError, AccelerasValueError, AllocatorDefuseError,
                         BackendAllocatorException, HailoNNException, ModelScriptError,
                         NegativeSlopeExponentNonFixable, ParsingException)
from .exposed_definitions import Dims, InferenceContext

#: every call made on any runner, in order: tests assert e.g. that optimize never ran
CALLS: list[str] = []

_PLUMBING = {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Reshape", "Transpose", "Constant",
             "Identity", "Cast"}
_TYPES = {"Add": "ew_add", "Sub": "ew_sub", "Mul": "ew_mult", "Div": "ew_div", "Erf": "activation",
          "Softmax": "softmax", "LayerNormalization": "layer_normalization"}
_KNOWN_COMMANDS = {"set_input_mask_to_softmax", "model_optimization_config", "pre_quantization_optimization",
                   "model_optimization_flavor", "quantization_param", "post_quantization_optimization",
                   "performance_param", "resources_param", "allocator_param", "compilation_param"}


def _dfc_version() -> tuple[int, int]:
    import hailo_sdk_client

    parts = str(hailo_sdk_client.__version__).split("+")[0].split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    except ValueError:
        return 5, 3


def _dfc_release() -> str:
    import hailo_sdk_client

    return str(hailo_sdk_client.__version__).split("+")[0]


def _dfc_major() -> int:
    return _dfc_version()[0]


def _report_line(hw_arch: str) -> bool:
    """The stack the public Hailo-10H report used: DFC 5.3.x building hailo10h."""
    return hw_arch == "hailo10h" and _dfc_version()[:2] == (5, 3)


def _format_name(fmt) -> list[str]:
    return [d.value if isinstance(d, Dims) else str(d).lower() for d in fmt]


class ClientRunner:
    #: HN layer types whose a16_w16 crashes the fake allocator: "any", "attention", a set of
    #: types such as {"ew_add"}, or None: "any" on the report's line (DFC 5.3.x, hailo10h), else
    #: "attention"
    FAIL_A16_ON: str | set | None = None
    #: negative_exponent with an 8-bit softmax fails in optimize(); None: on the report's line
    NEGATIVE_EXPONENT_WALL: bool | None = None
    #: a16 on more than one conv fails optimize() with a "nan exponent"; None: on the report's line
    NAN_EXPONENT: bool | None = None
    #: any a16 layer fails optimize() with this exception class (True: AccelerasNanExponentError)
    UNKNOWN_A16_FAILURE: type | bool | None = None
    #: compile() with a16 layers wants spatial defuse: None/False, "always", "unless_legacy"
    SPATIAL_DEFUSE: str | bool | None = None
    #: raise the walls wrapped in another exception
    WRAP_WALLS: bool = False
    #: "identity", "permuted", "rotated", or None: "permuted" on the report's line
    OUTPUT_BASIS: str | None = None

    def _rule(self, name: str):
        value = getattr(self, name)
        if value is not None:
            return value
        report = _report_line(self.hw_arch)
        return {"FAIL_A16_ON": "attention", "NEGATIVE_EXPONENT_WALL": report, "NAN_EXPONENT": report,
                "OUTPUT_BASIS": "permuted" if report else "identity"}[name]

    def _wall(self, exc: Exception) -> Exception:
        if not self.WRAP_WALLS:
            return exc
        wrapper = HailoNNException(f"{type(exc).__name__} during the build; see the cause")
        wrapper.__cause__ = exc
        return wrapper

    def __init__(self, hw_arch: str = "hailo8", har: str | None = None):
        CALLS.append("__init__")
        major = _dfc_major()
        supported = ("hailo10h", "hailo15h", "hailo15m", "hailo15l") if major >= 5 else ("hailo8", "hailo8l", "hailo8r")
        if hw_arch not in supported:
            raise HailoNNException(f"Unsupported hw_arch {hw_arch} for this Dataflow Compiler "
                                   f"(supported: {', '.join(supported)})")
        self.hw_arch = hw_arch
        self._hn: dict | None = None
        self._onnx: bytes | None = None
        self._input_map: dict[str, dict] = {}  # hn input layer -> {"onnx": name, "layout": ...}
        self._script = ""
        self._a16: list[str] = []
        self._optimized = False
        self._ranges: dict = {}
        self._active_context = None
        if har is not None:
            self.load_har(har)

    # -- parsing ------------------------------------------------------------------------
    @property
    def model_name(self) -> str:
        return self._hn["name"] if self._hn else ""

    def translate_onnx_model(self, model, net_name, start_node_names=None, end_node_names=None,
                             net_input_shapes=None, net_input_format=None, **_kwargs):
        CALLS.append("translate_onnx_model")
        import onnx

        m = onnx.load(str(model))
        g = m.graph
        net_input_shapes = dict(net_input_shapes or {})
        net_input_format = dict(net_input_format or {})
        starts: dict[str, str] = {}  # input tensor -> the start name it was asked for
        if start_node_names and any(s not in {i.name for i in g.input} for s in start_node_names):
            m, starts = _cut_at(m, list(start_node_names), end_node_names)
            g = m.graph
            for tensor, start in starts.items():
                for d in (net_input_shapes, net_input_format):
                    if start in d:
                        d[tensor] = d.pop(start)
        inits = {i.name for i in g.initializer}
        consts = {n.output[0] for n in g.node if n.op_type == "Constant"}
        for n in g.node:  # constant propagation (e.g. Identity of an initializer)
            if n.input and all(t in inits or t in consts for t in n.input if t):
                consts.update(n.output)
        layers: dict[str, dict] = {}
        counters: dict[str, int] = {}
        producer: dict[str, str] = {}  # onnx tensor -> hn layer

        def new_layer(kind: str, orig: list[str], **extra) -> str:
            counters[kind] = counters.get(kind, 0) + 1
            name = f"{net_name}/{kind}{counters[kind]}"
            layers[name] = {"type": kind, "original_names": list(orig), "input": [], **extra}
            return name

        for inp in g.input:
            dims = [d.dim_value if d.dim_value else d.dim_param for d in inp.type.tensor_type.shape.dim]
            shape = list(net_input_shapes.get(inp.name, dims))
            if any(not isinstance(d, int) for d in shape[1:]):
                raise ParsingException(f"Input {inp.name} has dynamic dims {shape}; pass net_input_shapes")
            fmt = net_input_format.get(inp.name)
            if fmt is not None and len(fmt) != len(shape):
                raise ParsingException(
                    f"Input format {_format_name(fmt)} of {inp.name} doesn't match its rank ({len(shape)})")
            if len(shape) == 3:
                hn_shape, layout = [-1, 1, shape[1], shape[2]], "nwc"
            elif len(shape) == 4 and fmt is not None and _format_name(fmt) == ["batch", "height", "width", "channels"]:
                hn_shape, layout = [-1, *shape[1:]], "nhwc"
            elif len(shape) == 4 and fmt is not None and _format_name(fmt) == ["batch", "groups", "width", "channels"]:
                hn_shape, layout = [-1, 1, shape[2], shape[1] * shape[3]], "ngwc"
            elif len(shape) == 4:
                hn_shape, layout = [-1, shape[2], shape[3], shape[1]], "nchw"
            else:
                raise ParsingException(f"Unsupported input rank {len(shape)} for {inp.name}")
            name = new_layer("input_layer", [starts.get(inp.name, inp.name)], input_shapes=[hn_shape],
                             output_shapes=[hn_shape])
            self._input_map[name] = {"onnx": inp.name, "layout": layout, "onnx_shape": shape}
            producer[inp.name] = name

        for node in g.node:
            data_inputs = [t for t in node.input if t and t not in inits and t not in consts]
            if node.op_type in _PLUMBING:
                src = [producer[t] for t in data_inputs if t in producer]
                if src:
                    producer[node.output[0]] = src[0]
                continue
            prev = [producer[t] for t in data_inputs if t in producer]
            if node.op_type == "MatMul":
                kind = "conv" if len(data_inputs) == 1 else "matmul"
            elif node.op_type == "Add" and len(data_inputs) == 1 and prev and layers[prev[0]]["type"] == "conv" \
                    and len(layers[prev[0]]["original_names"]) == 1:
                layers[prev[0]]["original_names"].append(node.name)  # bias folded into the conv
                producer[node.output[0]] = prev[0]
                continue
            else:
                kind = _TYPES.get(node.op_type)
                if kind is None:
                    raise ParsingException(f"Unsupported ONNX op {node.op_type} ({node.name})")
            name = new_layer(kind, [node.name], attention=kind in {"matmul", "softmax"})
            layers[name]["input"] = prev
            for t in node.output:
                producer[t] = name
        # the attention path: every layer between a scores matmul and its softmax
        for name, layer in layers.items():
            if layer["type"] != "softmax":
                continue
            todo = list(layer["input"])
            while todo:
                cur = todo.pop()
                lay = layers[cur]
                if lay["type"] in {"matmul", "input_layer"}:
                    continue
                lay["attention"] = True
                todo.extend(lay["input"])
        ends = list(end_node_names or [o.name for o in g.output])
        out_names = []
        for end in ends:
            tensor = end
            node_outs = {n.name: n.output[0] for n in g.node}
            if end in node_outs:
                tensor = node_outs[end]
            if tensor not in producer:
                raise ParsingException(f"End node {end} was not found in the model")
            s = net_input_shapes.get(g.input[0].name, [1, 1, 1])
            shape = [-1, 1, s[1], s[2]]
            name = new_layer("output_layer", [end], input_shapes=[shape], output_shapes=[shape])
            layers[name]["input"] = [producer[tensor]]
            out_names.append(name)
        self._hn = {"name": net_name, "net_params": {"output_layers_order": out_names}, "layers": layers}
        self._onnx = m.SerializeToString()
        self._optimized = False
        return self._hn, {}

    def get_hn_dict(self) -> dict:
        CALLS.append("get_hn_dict")
        self._need_model()
        return json.loads(json.dumps(self._hn))

    get_hn = get_hn_dict

    def _need_model(self):
        if self._hn is None:
            raise RuntimeError("No model: call translate_onnx_model or load_har first")

    # -- model script -------------------------------------------------------------------
    def load_model_script(self, model_script, append: bool = False):
        CALLS.append("load_model_script")
        self._need_model()
        text = str(model_script)
        p = Path(text) if "\n" not in text and len(text) < 4096 else None
        if p is not None and p.is_file():
            text = p.read_text()
        short = {n.split("/", 1)[-1]: n for n in self._hn["layers"]}
        a16: list[str] = []
        for raw in text.splitlines():
            line = raw.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.match(r"^(\w+)\s*\((.*)\)$", line)
            if not m or m.group(1) not in _KNOWN_COMMANDS:
                raise ModelScriptError(f"Model script: cannot parse {raw!r}")
            cmd, args = m.groups()
            if cmd == "set_input_mask_to_softmax":
                if _dfc_version() < (3, 34):
                    raise ModelScriptError(f"Model script: unknown command {cmd}")
                self._check_softmax_mask_topology()
            if cmd == "quantization_param":
                lm = re.match(r"^\[([^\]]*)\]\s*,\s*(.*)$", args) or re.match(r"^\{([^}]*)\}\s*,\s*(.*)$", args) \
                    or re.match(r"^([\w/]+)\s*,\s*(.*)$", args)
                if not lm:
                    raise ModelScriptError(f"Model script: bad layer list in {raw!r}")
                names = [n.strip() for n in lm.group(1).split(",") if n.strip()]
                for n in names:
                    if "*" in n:
                        continue
                    if n not in short and n not in self._hn["layers"]:
                        raise ModelScriptError(f"Model script: layer {n} does not exist in the model")
                if "precision_mode=a16_w16" in lm.group(2):
                    for n in names:
                        if "*" in n:
                            pat = re.compile("^" + n.replace("*", ".*") + "$")
                            a16 += [full for s, full in short.items() if pat.match(s)]
                        else:
                            a16.append(short.get(n, n))
        self._script = (self._script + "\n" + text) if append else text
        self._a16 = sorted(set(self._a16 + a16)) if append else sorted(set(a16))

    def _commands(self) -> list[str]:
        return [ln.split("#", 1)[0].strip() for ln in self._script.splitlines() if ln.split("#", 1)[0].strip()]

    def _softmax_mask(self) -> bool:
        return any(c.startswith("set_input_mask_to_softmax") for c in self._commands())

    def _negative_exponent(self) -> bool:
        return any(c.startswith("model_optimization_config") and "negative_exponent" in c for c in self._commands())

    def _users(self) -> dict:
        users: dict = {}
        for name, layer in self._hn["layers"].items():
            for src in layer.get("input", []):
                users.setdefault(src, []).append(name)
        return users

    def _mask_targets(self, name: str, users: dict) -> list[str]:
        """The layers an input feeds, looking through one ew_mult by a constant: the public
        Hailo-10H report starts at the mask ``/Mul`` itself, so its mask input reaches the score
        adds through that Mul (mask -> Mul -> Add -> softmax); the zoo's MiniLM feeds them directly."""
        layers = self._hn["layers"]
        out = []
        for u in users.get(name, []):
            if layers[u]["type"] == "ew_mult" and layers[u]["input"] == [name]:
                out += users.get(u, [])
            else:
                out.append(u)
        return out

    def _mask_layer(self) -> str | None:
        layers = self._hn["layers"]
        users = self._users()
        for name, layer in layers.items():
            if layer["type"] == "input_layer" and any(
                    layers[u]["type"] == "ew_add" and any(layers[w]["type"] == "softmax" for w in users.get(u, []))
                    for u in self._mask_targets(name, users)):
                return name
        return None

    def _check_softmax_mask_topology(self):
        layers = self._hn["layers"]
        users = {}
        for name, layer in layers.items():
            for src in layer.get("input", []):
                users.setdefault(src, []).append(name)
        inputs = [n for n, l in layers.items() if l["type"] == "input_layer"]
        # the data input goes into a LayerNorm or a conv; the other one is the mask
        masks = [n for n in inputs if not any(layers[u]["type"] in ("conv", "layer_normalization")
                                              for u in users.get(n, []))]
        if not masks:
            raise ModelScriptError("set_input_mask_to_softmax: the network has no mask input layer")
        for name in masks:
            outs = self._mask_targets(name, users)
            bad = [u for u in outs if layers[u]["type"] != "ew_add"
                   or not any(layers[w]["type"] == "softmax" for w in users.get(u, []))
                   or not any(layers[i]["type"] in ("matmul", "ew_mult", "ew_div") for i in layers[u]["input"]
                              if i != name and name not in layers[i]["input"])]
            if bad or not outs:
                raise ModelScriptError(
                    f"set_input_mask_to_softmax: input layer {name} must feed the attention-score adds directly "
                    f"(ew_add of the scores into softmax); it feeds {[layers[u]['type'] for u in outs]}")
            shape = layers[name]["input_shapes"][0]
            if shape[1] != 1 or shape[3] % shape[2]:
                raise ModelScriptError(
                    f"set_input_mask_to_softmax: input layer {name} has shape {shape}; expected [-1, 1, S, heads*S]")

    # -- optimisation ---------------------------------------------------------------------
    def optimize_full_precision(self, calib_data=None):
        CALLS.append("optimize_full_precision")

    def optimize(self, calib_data, data_type=None, work_dir=None):
        CALLS.append("optimize")
        self._need_model()
        inputs = [n for n, l in self._hn["layers"].items() if l["type"] == "input_layer"]
        if not isinstance(calib_data, dict):
            if len(inputs) != 1:
                raise AccelerasValueError("A multi-input model needs a dict of calibration arrays")
            calib_data = {inputs[0]: calib_data}
        for name in inputs:
            if name not in calib_data:
                raise KeyError(name)
        n_rows = None
        for name in inputs:
            arr = np.asarray(calib_data[name])
            expected = self._hn["layers"][name]["input_shapes"][0]
            if arr.ndim != len(expected):
                # what the report saw: 3-D calibration breaks LayerNorm decomposition
                raise IndexError("list index out of range")
            if list(arr.shape[1:]) != list(expected[1:]):
                raise AccelerasValueError(f"Data shape {arr.shape} does not match input {name} shape {expected}")
            n_rows = arr.shape[0] if n_rows is None else min(n_rows, arr.shape[0])
        if self._softmax_mask():
            mask_layer = self._mask_layer()
            vals = np.asarray(calib_data[mask_layer])[: min(n_rows, 64)]
            if not np.isin(vals, (0.0, 1.0)).all():
                raise AccelerasValueError(f"set_input_mask_to_softmax: calibration of {mask_layer} must be 0/1")
        if self._negative_exponent() and self._rule("NEGATIVE_EXPONENT_WALL"):
            softmaxes = [n for n, l in self._hn["layers"].items() if l["type"] == "softmax"]
            eight = [n for n in softmaxes if n.split("/", 1)[-1] not in self._a16 and n not in self._a16]
            if eight:
                net = self._hn["name"]
                raise self._wall(NegativeSlopeExponentNonFixable(
                    f"Quantization failed in layer {net}/ew_sub_softmax{softmaxes.index(eight[0]) + 1}: "
                    "Desired shift is 8.0, but op has only 8 data bits"))
        unknown = self.UNKNOWN_A16_FAILURE
        if unknown and self._a16:
            cls = unknown if isinstance(unknown, type) else AccelerasNanExponentError
            raise cls(f"Quantization failed in layer {self._a16[0]}: an exception hefsearch cannot know by name")
        a16_convs = [n for n in self._a16 if self._hn["layers"].get(n, {}).get("type") == "conv"]
        if len(a16_convs) > 1 and self._rule("NAN_EXPONENT"):
            raise AccelerasNanExponentError(f"Quantization failed in layer {a16_convs[1]}: nan exponent")
        sub = {k: np.asarray(calib_data[k])[: min(n_rows, 64)] for k in inputs}
        out = self._run_onnx(sub)
        self._decompose_layer_norms()
        self._ranges = {
            "input": {k: [float(v.min()), float(v.max())] for k, v in sub.items()},
            "output": [float(out.min()), float(out.max())],
        }
        self._optimized = True

    def _decompose_layer_norms(self):
        """LayerNorm layers become several layers during optimisation (zoo scripts address them as
        ``ew_sub1_<ln>``, ``square1_<ln>``...); the last one takes the place of the LayerNorm."""
        layers = self._hn["layers"]
        renames = {}
        for name, layer in list(layers.items()):
            if layer["type"] != "layer_normalization":
                continue
            net, short = name.split("/", 1)
            new = f"{net}/ew_add2_{short}"
            renames[name] = new
            layers[new] = {**layer, "type": "ew_add", "decomposed_from": short}
            del layers[name]
        for layer in layers.values():
            layer["input"] = [renames.get(i, i) for i in layer.get("input", [])]

    # -- emulation ------------------------------------------------------------------------
    @contextlib.contextmanager
    def infer_context(self, context: InferenceContext):
        CALLS.append(f"infer_context:{context.name}")
        if context not in (InferenceContext.SDK_NATIVE, InferenceContext.SDK_FP_OPTIMIZED,
                           InferenceContext.SDK_QUANTIZED, InferenceContext.SDK_BIT_EXACT):
            raise RuntimeError(f"{context} needs a device")
        if context in (InferenceContext.SDK_QUANTIZED, InferenceContext.SDK_BIT_EXACT) and not self._optimized:
            raise RuntimeError("The model is not optimized: call optimize() before quantized emulation")
        ctx = {"context": context}
        self._active_context = ctx
        try:
            yield ctx
        finally:
            self._active_context = None

    def infer(self, context, dataset, batch_size: int | None = None, data_count: int | None = None):
        CALLS.append("infer")
        if context is None or context is not self._active_context:
            raise RuntimeError("infer() needs the context object from an active infer_context()")
        inputs = [n for n, l in self._hn["layers"].items() if l["type"] == "input_layer"]
        if not isinstance(dataset, dict):
            dataset = {inputs[0]: dataset}
        data = {}
        for name in inputs:
            arr = np.asarray(dataset[name], dtype=np.float32)
            expected = self._hn["layers"][name]["input_shapes"][0]
            if list(arr.shape[1:]) != list(expected[1:]):
                raise AccelerasValueError(f"Data shape {arr.shape} does not match input {name} shape {expected}")
            data[name] = arr[:data_count] if data_count else arr
        quant = context["context"] in (InferenceContext.SDK_QUANTIZED, InferenceContext.SDK_BIT_EXACT)
        if quant:
            for name in inputs:
                lo, hi = self._ranges["input"][name]
                data[name] = _fake_quant(data[name], lo, hi, 16 if name in self._a16 else 8)
        out = to_basis(self._run_onnx(data), self._rule("OUTPUT_BASIS"))  # every context: the report's SDK_NATIVE too
        if quant:
            lo, hi = self._ranges["output"]
            out_layer = self._hn["net_params"]["output_layers_order"][0]
            out = _fake_quant(out, lo, hi, 16 if out_layer in self._a16 else 8)
        return out[:, None, :, :]  # NHWC with H=1, as the parsed output layer holds it

    def _network_onnx(self) -> bytes:
        """The network as compiled: with the mask command, the mask input applied as a 0/1 mask
        inside every softmax (tests/fakes/hailo_semantics.py)."""
        if not self._softmax_mask():
            return self._onnx
        mask = self._input_map[self._mask_layer()]["onnx"]
        return mask_inside_softmax(self._onnx, mask)

    def _run_onnx(self, data: dict) -> np.ndarray:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(self._network_onnx(), sess_options=opts, providers=["CPUExecutionProvider"])
        feeds = {}
        for name, info in self._input_map.items():
            arr = np.asarray(data[name], dtype=np.float32)
            if info["layout"] == "nwc":
                arr = arr[:, 0]
            elif info["layout"] == "nchw":
                arr = np.transpose(arr, (0, 3, 1, 2))
            elif info["layout"] == "ngwc":
                n, _, w, gc = arr.shape
                g = gc // w
                arr = arr.reshape(n, w, g, w).transpose(0, 2, 1, 3)
            feeds[info["onnx"]] = np.ascontiguousarray(arr)
        return sess.run(None, feeds)[0]

    # -- compilation ----------------------------------------------------------------------
    def compile(self) -> bytes:
        CALLS.append("compile")
        self._need_model()
        if not self._optimized:
            raise RuntimeError("compile() needs an optimized model")
        layers = self._hn["layers"]
        rule = self._rule("FAIL_A16_ON")
        bad = []
        for name in self._a16:
            layer = layers.get(name, {})
            if rule == "any" or (rule == "attention" and layer.get("attention")) or \
                    (isinstance(rule, (set, frozenset)) and layer.get("type") in rule):
                bad.append(name)
        if bad:
            # the report: "[info] Found valid partition to 4 contexts ... [error] Failed to produce
            # compiled graph ... BackendAllocatorException: Compilation failed with unexpected crash"
            raise self._wall(BackendAllocatorException(
                f"Found valid partition to 4 contexts; Failed to produce compiled graph "
                f"(16-bit layers {bad[:3]}): Compilation failed with unexpected crash"))
        defuse = self.SPATIAL_DEFUSE
        legacy = "spatial_defuse_legacy=True" in self._script.replace(" ", "")
        if self._a16 and (defuse == "always" or (defuse == "unless_legacy" and not legacy)):
            raise AllocatorDefuseError("Failed to produce compiled graph: needs super-defuse")
        # the same JSON "HEF" the fake HailoRT (tests/fakes/hailo_platform) reads; its device
        # runs the parsed ONNX carried inside
        import base64

        fold = "enable_auto_spatial_reshapes=False" not in self._script.replace(" ", "")
        seq, hidden = None, None
        inputs, mask_input = [], None
        for n, l in layers.items():
            if l["type"] != "input_layer":
                continue
            info = self._input_map[n]
            shape = list(l["input_shapes"][0][1:])
            lo, hi = self._ranges["input"][n]
            if info["onnx"] == "embeddings":
                seq, hidden = shape[1], shape[2]
            else:
                if info["layout"] == "ngwc":
                    mask_input = {"layout": "scores", "heads": shape[2] // shape[1], "softmax": self._softmax_mask()}
                elif info["layout"] == "nhwc" and self._softmax_mask():
                    mask_input = {"layout": "keys01", "heads": 1, "softmax": True}
                else:
                    mask_input = {"layout": "keys", "heads": 1, "softmax": False}
            lo, hi = min(lo, 0.0), max(hi, 0.0)
            scale = (hi - lo) / 255 or 1.0
            quant = [[scale, float(round(-lo / scale))]]
            if fold and shape[0] == 1 and shape[1] > 8 and shape[1] % 8 == 0:
                shape = [shape[1] // 8, 8, shape[2]]  # the allocator's automatic spatial reshape
            inputs.append({"name": n, "role": info["onnx"], "shape": shape, "order": "NHWC", "type": "UINT8",
                           "quant": quant})
        lo, hi = self._ranges["output"]
        lo, hi = min(lo, 0.0), max(hi, 0.0)
        outputs = []
        for n in self._hn["net_params"]["output_layers_order"]:
            bits = 16 if n in self._a16 else 8
            scale = (hi - lo) / (2**bits - 1) or 1.0
            feeding = layers[n]["input"][0]  # HailoRT names an output stream after the layer feeding it
            outputs.append({"name": feeding, "shape": layers[n]["output_shapes"][0][1:], "order": "FCR",
                            "type": "UINT16" if bits == 16 else "UINT8",
                            "quant": [[scale, float(round(-lo / scale))]]})
        hef = {
            "fake_hef": 1,
            "compiled_by": "fake hailo_sdk_client",
            "sdk_version": _dfc_release(),  # the real header's sdk_version (hailort hef.proto)
            "hw_arch": self.hw_arch,
            "network_group": self.model_name,
            "onnx_b64": base64.b64encode(self._network_onnx()).decode(),
            "output_basis": self._rule("OUTPUT_BASIS"),
            "seq_len": seq,
            "hidden": hidden,
            "inputs": inputs,
            "outputs": outputs,
            "mask_input": mask_input,
            "sorted_outputs": [o["name"] for o in outputs],
            "a16_layers": self._a16,
        }
        return json.dumps(hef).encode()

    # -- HAR ------------------------------------------------------------------------------
    def save_har(self, har_path):
        CALLS.append("save_har")
        self._need_model()
        state = {"hw_arch": self.hw_arch, "hn": self._hn, "input_map": self._input_map, "script": self._script,
                 "a16": self._a16, "optimized": self._optimized, "ranges": self._ranges}
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            z.writestr("state.json", json.dumps(state))
            z.writestr("model.onnx", self._onnx)
        Path(har_path).write_bytes(buf.getvalue())

    def load_har(self, har=None):
        CALLS.append("load_har")
        with zipfile.ZipFile(str(har)) as z:
            state = json.loads(z.read("state.json"))
            self._onnx = z.read("model.onnx")
        self.hw_arch = state["hw_arch"]
        self._hn = state["hn"]
        self._input_map = state["input_map"]
        self._script = state["script"]
        self._a16 = state["a16"]
        self._optimized = state["optimized"]
        self._ranges = state["ranges"]


def _cut_at(model, start_node_names: list[str], end_node_names) -> tuple:
    """The model cut at its start nodes, as the parser cuts it: a graph input stays; an ONNX node
    name (the report's ``/embeddings/Add_1`` and ``/Mul``, the zoo BERT's
    ``/bert/embeddings/Add_1``) starts the network at that node, its first non-constant input
    becoming a network input; a tensor name (the zoo BERT's ``/bert/Mul_output_0``) becomes an
    input itself (hailo-api.md section 2). Which input of a node with several becomes the network
    input is the fake's own choice. Returns the cut model and {input tensor: start name}."""
    import onnx
    from onnx.utils import Extractor

    g = model.graph
    graph_inputs = {i.name for i in g.input}
    inits = {i.name for i in g.initializer} | {n.output[0] for n in g.node if n.op_type == "Constant"}
    by_name = {n.name: n for n in g.node}
    produced = {t for n in g.node for t in n.output}
    starts: dict[str, str] = {}
    for start in start_node_names:
        if start in graph_inputs or start in produced:
            starts[start] = start
        elif start in by_name:
            data = [t for t in by_name[start].input if t and t not in inits]
            if not data:
                raise ParsingException(f"Start node {start} has no data input")
            starts[data[0]] = start
        else:
            raise ParsingException(f"Start node {start} was not found in the model")
    node_outs = {n.name: n.output[0] for n in g.node}
    ends = [node_outs.get(e, e) for e in (end_node_names or [o.name for o in g.output])]
    inferred = onnx.shape_inference.infer_shapes(model)
    cut = Extractor(inferred).extract_model(list(starts), ends)
    return cut, starts


def _fake_quant(x: np.ndarray, lo: float, hi: float, bits: int) -> np.ndarray:
    lo, hi = min(lo, 0.0), max(hi, 0.0)
    scale = (hi - lo) / (2**bits - 1) or 1.0
    q = np.clip(np.round((x - lo) / scale), 0, 2**bits - 1)
    return (q * scale + lo).astype(np.float32)
