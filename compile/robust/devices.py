"""Where torch runs a compile step (``compile robust --device``): the names and their check.
Torch is imported only when a device is resolved."""

from __future__ import annotations

from hefsearch.base.errors import HefsearchError

#: torch device names (not hefsearch backends): auto picks CUDA when torch sees a GPU
AUTO, CUDA, CPU = "auto", "cuda", "cpu"
DEVICES = (AUTO, CUDA, CPU)


class DeviceChoiceError(HefsearchError):
    title = "compile device"


def resolve_device(spec: str | None) -> str:
    """``auto`` -> CUDA when torch sees a CUDA device, else the CPU; ``cuda`` without one is an
    error that says why (a CPU-only torch build, or no GPU visible)."""
    import torch

    want = (spec or AUTO).strip().lower()
    if want not in DEVICES:
        raise DeviceChoiceError(f"Unknown device {spec!r}.", f"Use one of: {', '.join(DEVICES)}.")
    has_cuda = bool(torch.cuda.is_available())
    if want == AUTO:
        return CUDA if has_cuda else CPU
    if want == CUDA and not has_cuda:
        why = ("this torch is a CPU-only build" if torch.version.cuda is None
               else "torch sees no CUDA device (driver, CUDA_VISIBLE_DEVICES?)")
        raise DeviceChoiceError(f"--device cuda: {why} (torch {torch.__version__}).",
                                "Run with --device cpu (or auto), or on a host with an NVIDIA GPU and a CUDA "
                                "build of torch.")
    return want


def describe(device: str, threads: int) -> str:
    """'CUDA (NVIDIA H100)' or 'the CPU (1 thread)'."""
    if device == CUDA:
        import torch

        return f"CUDA ({torch.cuda.get_device_name(0)})"
    return f"the CPU ({max(1, threads)} thread{'s' if threads > 1 else ''})"
