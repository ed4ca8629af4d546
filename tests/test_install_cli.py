"""Installing like a user: a wheel built from this tree, installed into a fresh virtual
environment, finds its bundled study and GPU kernel source from a directory outside the
repository, and its command line runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

CHECK = """
import importlib.resources, pathlib, sys
import embstab
from embstab.cli.study import find_study_file
root = pathlib.Path(embstab.__file__).resolve().parent
assert str(root).startswith(sys.prefix), (root, sys.prefix)
study = find_study_file("default.yaml")
assert study.is_file() and str(study.resolve()).startswith(str(root)), study
assert find_study_file("quick.yaml").is_file()
kernel = importlib.resources.files("embstab.kernels") / "quantize.cu"
assert kernel.is_file() and "__global__" in kernel.read_text()
assert (importlib.resources.files("embstab") / "py.typed").is_file()
print("OK", study)
"""


def _share_this_interpreters_packages(python: Path) -> None:
    """Let the fresh venv of ``python`` import the dependencies this interpreter imports.

    ``venv --system-site-packages`` is not enough: run from inside a virtual environment, it
    exposes the *base* interpreter's site-packages, not the environment the dependencies were
    installed into. A ``.pth`` file listing this interpreter's ``sys.path`` works from both. Its
    entries come after the venv's own site-packages, so the installed wheel still shadows any other
    embstab, and plain paths in a ``.pth`` load no further ``.pth`` files (an editable install's
    import hook stays out). The checkout itself is left out.
    """
    def query(code: str) -> str:
        return subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout

    own = {os.path.realpath(p) for p in query("import sys; print('\\n'.join(sys.path))").splitlines() if p}
    purelib = Path(query("import sysconfig; print(sysconfig.get_path('purelib'))").strip())
    extra = []
    for entry in sys.path:
        real = os.path.realpath(entry) if entry else ""
        if (real and os.path.isdir(real) and real not in own and real not in extra
                and not Path(real).is_relative_to(REPO)):
            extra.append(real)
    (purelib / "embstab_test_dependencies.pth").write_text("".join(f"{p}\n" for p in extra))


def test_wheel_installs_with_bundled_pipelines_and_kernels(tmp_path):
    src = tmp_path / "src"
    # build from a copy: an in-tree build would leave build/ and egg-info in the checkout
    shutil.copytree(REPO, src, ignore=shutil.ignore_patterns(".git", "tests", "notebooks", "benchmarks", "build",
                                                               "*.egg-info", "__pycache__", ".pytest_cache"))
    wheels = tmp_path / "wheels"

    def run(*cmd, **kw):
        return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=600, **kw)

    run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(src))
    wheel = next(wheels.glob("embstab-*.whl"))
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", str(venv))
    python = venv / "bin" / "python"
    run(str(python), "-m", "pip", "install", "--no-deps", "-q", str(wheel))
    # after the install: pip in the venv must not see (and refuse to replace) an embstab outside it
    _share_this_interpreters_packages(python)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = run(str(python), "-c", CHECK, cwd=outside, env=env)
    assert proc.stdout.startswith("OK")
    help_text = run(str(venv / "bin" / "embstab"), "study", "--help", cwd=outside, env=env).stdout
    assert "--recompute" in help_text and "TLS" in help_text
