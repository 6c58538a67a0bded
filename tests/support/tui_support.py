"""Helpers for the TUI tests: a small real library built with the tiny model, and a
test-only stand-in for an 8-bit NPU encoder.

``NoisyBackend`` is NOT a simulation of any hardware: it runs the bundle's FP32 body on the CPU
and adds a fixed random linear distortion to the hidden states, so its vector space ranks
differently from FP32 (like an 8-bit encoder would) and it can be told to fail with
``DeviceError`` (like an NPU that times out). It produces an "npu-sim"-kind space so the TUI's
compare view and the search API's fallback treat it as the NPU side.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from hefsearch.embed.backends.base import Backend
from hefsearch.embed.backends.cpu import CpuBackend
from hefsearch.embed.encoder import Encoder
from hefsearch.base.errors import DeviceError

_DIARY = "\n\n".join(
    f"Day {i}: we walked along the river, counted {i * 3} boats and wrote postcards home."
    + (" In the afternoon the ferry to zanzibar left without us." if i == 12 else "")
    for i in range(1, 25))

CORPUS = {
    "travel/diary.txt": _DIARY,
    "notes/invoice-2023.txt": "Invoice 2023 for the garden work.\n\nThe invoice total was 450 euro, "
                              "paid in March.\n\nKeep every invoice for the tax office until 2030.",
    "notes/bahnhof.md": "# Bahnhof\n\nDer Bahnhof liegt im Zentrum der Stadt.\n\nVom Bahnhof faehrt "
                        "der Bus 12 zum Flughafen.",
    "notes/recipes.txt": "Pancakes need flour, milk and eggs.\n\nThe oven was delivered late; its "
                         "invoice came a week later.\n\nBake the bread at 200 degrees for forty minutes.",
    "work/quantization.md": "Quantization of transformers to 8 bit saves memory.\n\nLayerNorm is "
                            "sensitive to activation quantization.\n\nRe-ranking with FP32 vectors "
                            "recovers the lost quality.",
    "work/meeting.txt": "Meeting notes: the team agreed to ship the search tool in June.\n\nAction "
                        "items: write the README, record a demo, fix the flaky test.",
    "work/garden.txt": "The garden needs water every morning in summer.\n\nTomatoes grow best in "
                       "full sun.\n\nThe hedge was trimmed in autumn.",
    "travel/tokyo.txt": "The train from Tokyo to Kyoto takes about two hours.\n\nBuy a rail pass "
                        "before you travel.\n\nThe hotel is near the station.",
    "travel/paris.txt": "Paris in spring: the museums open late on Fridays.\n\nThe metro ticket "
                        "costs two euro.\n\nBook the tower tickets online.",
}


class NoisyBackend(Backend):
    """Test-only: FP32 on the CPU plus a fixed random distortion (see module docstring)."""

    name = "test-noisy"
    label = "NPU simulation (test noise)"
    space_kind = "npu-sim"
    seq_lens = None

    def __init__(self, bundle, *, noise: float = 1.0, seed: int = 7, **opts):
        self.inner = CpuBackend(bundle, **opts)
        self.batch_size = self.inner.batch_size
        self.noise = noise
        self.seed = seed
        rng = np.random.default_rng(seed)
        h = bundle.hidden
        self.mix = (np.eye(h) + noise * rng.standard_normal((h, h)) / np.sqrt(h)).astype(np.float32)
        #: set to make the next run() raise DeviceError, as an NPU that stopped answering
        self.fail = False

    def fingerprint_parts(self) -> dict:
        return {**self.inner.fingerprint_parts(), "encoder": "test-noisy", "noise": self.noise,
                "seed": self.seed}

    def run(self, embeddings, mask):
        if self.fail:
            raise DeviceError("simulated NPU timeout after 1000 ms", "check the device")
        return self.inner.run(embeddings, mask) @ self.mix

    def close(self) -> None:
        self.inner.close()


def cpu_encoder(bundle) -> Encoder:
    return Encoder.open(bundle, backend="cpu")


def noisy_encoder(bundle, **kw) -> Encoder:
    from hefsearch.embed.bundle import Bundle

    b = Bundle.open(bundle)
    return Encoder(b, NoisyBackend(b, **kw), backend_reason="test-noisy (test only)")


def write_corpus(root: Path, files: dict[str, str] | None = None) -> Path:
    for rel, text in (files or CORPUS).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


# -- driving the app with Textual's Pilot ---------------------------------------------------
def build_app(library, encoders: dict[str, Encoder], *, env=None, open_encoders=None, **settings):
    """The real app around ``library``: a searcher over ``encoders`` (space name -> encoder),
    a launcher that records each ``(argv, options)`` in ``app.launch_calls`` instead of running
    it, and ``TuiSettings(**settings)``."""
    from hefsearch.index.encoders import EncoderChoice
    from hefsearch.search import Searcher
    from hefsearch.tui.factory import make_app
    from hefsearch.tui.session import TuiSession
    from hefsearch.tui.settings import TuiSettings

    calls = []
    session = TuiSession(library, Searcher(library, encoders=dict(encoders)), env=env,
                             open_encoders=open_encoders and (lambda: EncoderChoice(list(open_encoders()))),
                             launcher=lambda argv, **options: calls.append((argv, options)))
    app = make_app(session, TuiSettings(**settings))
    app.launch_calls = calls
    return app


async def wait_for(pilot, condition, timeout: float = 15.0, what: str = "condition"):
    """Let the app run until ``condition()`` holds (workers answer on other threads)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await pilot.pause(0.05)


async def search(pilot, app, query: str, *, type_keys: bool = True):
    """Put ``query`` into the search input (typed key by key, or set at once for text no key
    can type) and press Enter; wait for the answer."""
    app.search_bar.query_input.value = "" if type_keys else query
    app.search_bar.query_input.focus()
    if type_keys:
        await pilot.press(*query)
    seq = app._seq
    await pilot.press("enter")
    await wait_for(pilot, lambda: app._seq > seq and app.answered_seq == app._seq, what=f"answer to {query!r}")
    await pilot.pause()

