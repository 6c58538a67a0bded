"""A contract fake of the Hailo Dataflow Compiler's Python client (``hailo_sdk_client``).

It mimics only the calls hefsearch makes, as Hailo's public scripts use them (hailo_model_zoo
``core/main_utils.py``, hailo-whisper ``conversion/*.py``), and the behaviour a public user
report describes for transformer encoders on DFC 5.3.0 (see client_runner.py). Everything
tested against it is verified against this fake only, never against the real DFC.
"""

from .client_runner import ClientRunner

__version__ = "5.3.0+fake"

__all__ = ["ClientRunner", "__version__"]
