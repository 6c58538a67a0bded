"""Fixtures of the quality area: a tiny BERT whose 8-bit simulation visibly differs from FP32,
its ``a8`` simulation, and a library indexed with that simulation only. Registered for every
test module in conftest.py; a module may define its own ``sim_bundle`` (pytest's override).

The tiny BERT's random initialisation gives near-uniform attention and tiny activations, where
quantisation barely matters. ``make_sharp_bundle`` sharpens it (query/key weights x20, the other
dense weights x15, word embeddings x10) so attention is peaked and the residual stream carries
it: then 8 bits and the mask handling show their effect as on a real model.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.library_helpers import sim_library


def make_edited_bundle(tiny_model: Path, work: Path, edit, name: str) -> Path:
    """Export a copy of ``tiny_model`` after ``edit(name, parameter)`` ran on every parameter
    (in place, without gradients); returns ``work/<name>-bundle``."""
    import torch
    from transformers import BertModel

    from hefsearch.compile.export.bundle import export_bundle

    folder = work / f"{name}-model"
    shutil.copytree(tiny_model, folder)
    model = BertModel.from_pretrained(tiny_model)
    with torch.no_grad():
        for pname, p in model.named_parameters():
            edit(pname, p)
    model.save_pretrained(folder)
    out = work / f"{name}-bundle"
    export_bundle(str(folder), out)
    return out


def _sharpen(name: str, p) -> None:
    if "query.weight" in name or "key.weight" in name:
        p.mul_(20)
    elif "dense.weight" in name or "value.weight" in name:
        p.mul_(15)
    elif "word_embeddings" in name:
        p.mul_(10)


def make_sharp_bundle(tiny_model: Path, work: Path) -> Path:
    return make_edited_bundle(tiny_model, work, _sharpen, "sharp")


@pytest.fixture(scope="session")
def sharp_bundle(tiny_bert_model, tmp_path_factory) -> Path:
    """The tiny BERT sharpened so that its 8-bit simulation visibly differs from FP32.
    Copy it before writing simulations into it."""
    return make_sharp_bundle(tiny_bert_model, tmp_path_factory.mktemp("sharp"))


@pytest.fixture(scope="module")
def sim_bundle(sharp_bundle, tmp_path_factory) -> Path:
    """A copy of the sharpened bundle with its ``a8`` NPU simulation built."""
    from hefsearch.compile.sim.build import build_sim

    out = tmp_path_factory.mktemp("rr") / "bundle"
    shutil.copytree(sharp_bundle, out)
    build_sim(out, "a8")
    return out


@pytest.fixture
def npu_only_library(tmp_path, sim_bundle):
    """A library indexed with the simulated NPU only: no FP32 vectors yet."""
    lib = sim_library(tmp_path, sim_bundle, n_files=10, paragraphs=3)
    yield lib
    lib.close()
