"""Which int8 kernel ONNX Runtime runs on a Raspberry Pi 5's Cortex-A76, seen under emulation (as root).

    python scripts/pi_kernels.py INT8_ONNX [--cpu cortex-a76]

Needs the arm64 root `make pi-check` builds (scripts/pi_check.py; $HEFSEARCH_PI_CHECK_CACHE) with
onnxruntime in its venv. qemu-user shows the host's /proc/cpuinfo, on which ONNX Runtime's
cpuinfo library fails (and crashes once /sys is there), so the root gets a Pi's /proc/cpuinfo
(Pi 5: Cortex-A76 part 0xd0b and its Features line; or a Pi 4's) bound over its own, and qemu
emulates that CPU (``QEMU_CPU``). The int8 body runs once with qemu logging every guest
instruction it translates (``QEMU_LOG=in_asm``); the script counts the dot-product
(``udot``/``sdot``) and ``i8mm`` (``ummla``/``smmla``) encodings among them: MLAS picks its u8s8
kernel from those features (onnxruntime/core/mlas/lib/platform.cpp). Selection only: timings
under emulation mean nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

CACHE = Path(os.environ.get("HEFSEARCH_PI_CHECK_CACHE", "/var/cache/hefsearch-pi-check"))
ROOT = CACHE / "trixie-arm64"
PYTHON = "/home/pi/hefsearch-venv/bin/python"
#: what each board's kernel reports (/proc/cpuinfo "Features", "CPU part"): ONNX Runtime's cpuinfo
#: library reads them, so the file must match the CPU qemu emulates
BOARDS = {"cortex-a76": ("fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc "
                         "dcpop asimddp", "0xd0b", "0x4"),  # Pi 5
          "cortex-a72": ("fp asimd evtstrm crc32 cpuid", "0xd08", "0x0")}  # Pi 4
PROBE = """
import ctypes, sys, numpy as np, onnxruntime as ort
libc = ctypes.CDLL(None); libc.getauxval.restype = ctypes.c_ulong
print("HWCAP asimddp", bool(libc.getauxval(16) & (1 << 20)), "HWCAP2 i8mm", bool(libc.getauxval(26) & (1 << 13)))
so = ort.SessionOptions(); so.intra_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], so, providers=["CPUExecutionProvider"])
x = np.random.default_rng(0).standard_normal((2, 16, s.get_inputs()[0].shape[2]), dtype=np.float32)
s.run(None, {"embeddings": x, "attention_mask": np.ones((2, 16), dtype=np.int64)})
print("onnxruntime", ort.__version__, "ran the int8 body")
"""


def kind(word: int) -> str | None:
    """The int8 multiply-accumulate an A64 instruction word encodes, if any (Arm ARM encodings)."""
    if word & 0xBF00F400 == 0x2F00E000:
        return "udot"
    if word & 0xBF00F400 == 0x0F00E000:
        return "sdot"
    if word & 0xBF20FC00 in (0x2E009400, 0x0E009400) and (word >> 22) & 3 == 2:
        return "udot" if word & 0x20000000 else "sdot"
    if word & 0xFFE0FC00 == 0x6E80A400:
        return "ummla"
    if word & 0xFFE0FC00 == 0x4E80A400:
        return "smmla"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="an encoder.cpu-int8.onnx")
    ap.add_argument("--cpu", default="cortex-a76", choices=sorted(BOARDS),
                    help="the CPU qemu emulates (default: the Pi 5's; cortex-a72: the Pi 4's)")
    args = ap.parse_args()
    if not (ROOT / PYTHON.lstrip("/")).exists():
        sys.exit(f"No arm64 root with a venv at {ROOT}: run 'make pi-check' first.")
    tmp = ROOT / "tmp"
    shutil.copy(args.model, tmp / "kernels-int8.onnx")
    (tmp / "kernels-probe.py").write_text(PROBE)
    cpuinfo = tmp / "kernels-cpuinfo"
    features, part, variant = BOARDS[args.cpu]
    block = (f"BogoMIPS\t: 108.00\nFeatures\t: {features}\nCPU implementer\t: 0x41\nCPU architecture: 8\n"
             f"CPU variant\t: {variant}\nCPU part\t: {part}\nCPU revision\t: 1\n\n")
    cpuinfo.write_text("".join(f"processor\t: {i}\n{block}" for i in range(os.cpu_count() or 1)))
    mounts = [(["-t", "proc", "proc"], ROOT / "proc"), (["--bind", str(cpuinfo)], ROOT / "proc/cpuinfo"),
              (["-t", "sysfs", "sysfs"], ROOT / "sys")]
    done = []
    try:
        for how, where in mounts:
            subprocess.run(["mount", *how, str(where)], check=True)
            done.append(where)
        env = dict(os.environ, QEMU_CPU=args.cpu, QEMU_LOG="in_asm", QEMU_LOG_FILENAME="/tmp/kernels-qemu.log")
        proc = subprocess.run(["chroot", str(ROOT), PYTHON, "/tmp/kernels-probe.py", "/tmp/kernels-int8.onnx"],
                              env=env, capture_output=True, text=True, timeout=900)
    finally:
        for where in reversed(done):
            subprocess.run(["umount", str(where)], check=False)
    print(proc.stdout.strip() or proc.stderr.strip()[-1000:])
    seen: set[int] = set()
    log = tmp / "kernels-qemu.log"
    with open(log, errors="replace") as f:
        for line in f:
            m = re.match(r"0x[0-9a-f]+:\s+([0-9a-f]{8})\s", line)
            if m:
                seen.add(int(m.group(1), 16))
    counts = Counter(k for k in map(kind, seen) if k)
    print(f"qemu -cpu {args.cpu}: {len(seen)} distinct instructions translated; int8 dot/matrix instructions "
          f"among them: {dict(counts) or 'none'}")
    for name in ("kernels-int8.onnx", "kernels-probe.py", "kernels-cpuinfo", "kernels-qemu.log"):
        (tmp / name).unlink(missing_ok=True)
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
