"""A stopped run does not wait for the encoder's batch: ``encode_stoppable`` runs it in a helper
thread, and a KeyboardInterrupt (Ctrl+C, SIGTERM) in the waiting thread tells the encoder to
stop and waits only for it to end, never for the rest of the batch."""

from __future__ import annotations

import _thread
import threading

import numpy as np
import pytest

from hefsearch.embed import Encoder
from hefsearch.embed.encoder import EncodeStopped
from hefsearch.index.sync_batches import encode_stoppable


class SlowEncoder:
    """Encodes one text per step until told to stop (a batch far longer than the test)."""

    def __init__(self):
        self.stop = None
        self.steps = 0
        self.stop_calls = 0

    def encode_passages(self, texts):
        for _ in range(100_000):
            if self.stop is not None and self.stop.is_set():
                raise EncodeStopped("stopped")
            self.steps += 1
            threading.Event().wait(0.01)
        return np.zeros((len(texts), 4), np.float32)

    def stop_running(self):
        self.stop_calls += 1
        self.stop.set()


def test_an_interrupt_stops_the_batch_in_flight():
    enc = SlowEncoder()
    threading.Timer(0.3, _thread.interrupt_main).start()  # Ctrl+C, as the main thread gets it
    with pytest.raises(KeyboardInterrupt):
        encode_stoppable(enc, ["a"] * 10)
    assert enc.stop_calls == 1
    assert not [t for t in threading.enumerate() if t.name == "hefsearch-encode" and t.is_alive()]  # ended
    assert enc.steps < 1000  # cut short: the batch would take 1,000 s


def test_vectors_and_errors_come_back_from_the_helper_thread(tiny_bert_bundle):
    with Encoder.open(tiny_bert_bundle, backend="cpu", threads=1) as enc:
        texts = ["the train leaves at noon", "an invoice is due"]
        assert np.allclose(encode_stoppable(enc, texts), enc.encode_passages(texts))
        assert enc.stop is None  # nothing left set for the encoder's next user

        enc.backend.stop_running()  # a run asked to stop before it began ends at its first operator
        e, mask, _ = enc._prepare(texts, [0, 1], "")
        with pytest.raises(Exception, match="terminate"):
            enc.backend.run(e, mask)
        assert encode_stoppable(enc, texts).shape == (2, enc.dim)  # the next encode runs again
