"""Contract fake of HailoRT's Python package ``hailo_platform`` (tests only).

Mimics only the calls hefsearch makes, as the public HailoRT sources describe them
(hailo-ai/hailort, ``hailort/libhailort/bindings/python/platform/hailo_platform``, v5.2.0 and
the ``hailo8`` branch v4.23.0): the same top-level names, the same exception classes in
``hailo_platform.pyhailort.pyhailort``, and the documented failure modes. Instead of a
device it runs the bundle's FP32 encoder-body ONNX with onnxruntime; a "HEF" is a small JSON
file describing the streams (see ``tests/fakes/fake_hef.py``). Test controls live in
``hailo_platform._fake.WORLD``.
"""

from hailo_platform.pyhailort.pyhailort import (  # noqa: F401
    HEF,
    AsyncInferJob,
    ConfigureParams,
    Device,
    FormatOrder,
    FormatType,
    HailoRTException,
    HailoSchedulingAlgorithm,
    HailoStreamInterface,
    VDevice,
)

from ._fake import WORLD as _WORLD


def __getattr__(name):
    # The real package pins __version__ at build time; the fake reads the simulated runtime.
    if name == "__version__":
        return _WORLD.version
    raise AttributeError(name)
