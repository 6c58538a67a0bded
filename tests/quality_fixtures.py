"""Test helpers of the quality area: a tiny BERT whose 8-bit simulation visibly differs from FP32.

The tiny BERT's random initialisation gives near-uniform attention and tiny activations, where
quantisation barely matters. ``make_sharp_bundle`` sharpens it (query/key weights x20, the other
dense weights x15, word embeddings x10) so attention is peaked and the residual stream carries
it: then 8 bits and the mask handling show their effect as on a real model.
"""

from __future__ import annotations

import shutil
from pathlib import Path


def make_sharp_bundle(tiny_model: Path, work: Path) -> Path:
    import torch
    from transformers import BertModel

    from hefsearch.compile.export import export_bundle

    folder = work / "sharp-model"
    shutil.copytree(tiny_model, folder)
    model = BertModel.from_pretrained(tiny_model)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "query.weight" in name or "key.weight" in name:
                p.mul_(20)
            elif "dense.weight" in name or "value.weight" in name:
                p.mul_(15)
            elif "word_embeddings" in name:
                p.mul_(10)
    model.save_pretrained(folder)
    out = work / "sharp-bundle"
    export_bundle(str(folder), out)
    return out
