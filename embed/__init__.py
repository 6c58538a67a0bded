"""hefsearch.embed: the model bundle, the host pipeline and the encoder backends.

Importing this package loads no ML framework and no hardware SDK; backends import theirs
when opened.
"""

from .bundle import Bundle, EncoderEntry
from .encoder import EncodeStats, Encoder
from hefsearch.base.errors import BackendUnavailable, BundleError, DeviceError, HefsearchError

__all__ = [
    "Bundle",
    "EncoderEntry",
    "Encoder",
    "EncodeStats",
    "HefsearchError",
    "BundleError",
    "BackendUnavailable",
    "DeviceError",
]
