"""Vector-space fingerprints (ARCHITECTURE.md section 5): vectors of different encoders never mix.

A fingerprint is the sha256 of the canonical JSON of what determines the vectors: the bundle's
model hash, the encoder kind and file hash (and precision), pooling, normalisation, the token
budget and any post-transform.
"""

from __future__ import annotations

import hashlib
import json


def space_fingerprint(parts: dict) -> str:
    canonical = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:24]


def describe_difference(expected: dict, got: dict) -> str:
    """Name the fields in which two fingerprint part dicts differ, for error messages."""
    keys = sorted(set(expected) | set(got))
    diffs = [f"{k}: {expected.get(k)!r} vs {got.get(k)!r}" for k in keys if expected.get(k) != got.get(k)]
    return "; ".join(diffs) or "no difference in the recorded parts"
