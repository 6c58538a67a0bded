"""The encoder body as a torch module, cut after the embedding sum (needs the compile extra).

Inputs: ``embeddings`` [N,S,H], the word + position + token-type sum *before* the embedding
LayerNorm, and ``attention_mask`` [N,S] (0/1). Output: ``last_hidden_state`` [N,S,H].

The mask becomes an additive bias of ``mask_value`` (default -50) on padded keys. That is
enough to zero their softmax weight in FP32 (exp(-50) ~ 2e-22) while staying small enough
that an 8-bit score tensor on an NPU keeps its resolution; the dtype minimum that
transformers uses would swamp it.
"""

from __future__ import annotations

import torch
from torch import nn

DEFAULT_MASK_VALUE = -50.0


class EncoderBody(nn.Module):
    def __init__(self, model: nn.Module, mask_value: float = DEFAULT_MASK_VALUE, mask_4d: bool = False):
        super().__init__()
        self.layer_norm = model.embeddings.LayerNorm
        self.encoder = model.encoder
        self.mask_value = float(mask_value)
        #: the DFC-facing variant takes the mask already as [N,1,1,S]
        self.mask_4d = mask_4d

    def forward(self, embeddings: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.layer_norm(embeddings)
        m = attention_mask.to(hidden.dtype)
        if not self.mask_4d:
            m = m[:, None, None, :]
        bias = (1.0 - m) * self.mask_value
        return self.encoder(hidden, attention_mask=bias).last_hidden_state


def export_body_onnx(model: nn.Module, path, hidden: int, *, mask_value: float = DEFAULT_MASK_VALUE,
                     mask_4d: bool = False, opset: int = 17) -> None:
    """Write the body to ONNX with dynamic batch and sequence axes."""
    body = EncoderBody(model, mask_value=mask_value, mask_4d=mask_4d).eval()
    n, s = 2, 8
    emb = torch.randn(n, s, hidden)
    mask = torch.ones(n, 1, 1, s, dtype=torch.int64) if mask_4d else torch.ones(n, s, dtype=torch.int64)
    mask_axes = {0: "batch", 3: "sequence"} if mask_4d else {0: "batch", 1: "sequence"}
    with torch.no_grad():
        torch.onnx.export(
            body,
            (emb, mask),
            str(path),
            input_names=["embeddings", "attention_mask"],
            output_names=["last_hidden_state"],
            dynamic_axes={
                "embeddings": {0: "batch", 1: "sequence"},
                "attention_mask": mask_axes,
                "last_hidden_state": {0: "batch", 1: "sequence"},
            },
            opset_version=opset,
            do_constant_folding=True,
            dynamo=False,
        )
