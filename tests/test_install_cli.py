"""Installing like a user: a wheel built from this tree, installed into a fresh virtual
environment, finds its bundled study and GPU kernel source from a directory outside the
repository, and its command line runs."""

from __future__ import annotations

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
    run(sys.executable, "-m", "venv", "--system-site-packages", str(venv))
    python = venv / "bin" / "python"
    run(str(python), "-m", "pip", "install", "--no-deps", "-q", str(wheel))
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = run(str(python), "-c", CHECK, cwd=outside, env=env)
    assert proc.stdout.startswith("OK")
    help_text = run(str(venv / "bin" / "embstab"), "study", "--help", cwd=outside, env=env).stdout
    assert "--recompute" in help_text and "TLS" in help_text
