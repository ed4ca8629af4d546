"""Every command embstab prints for a user to paste passes each argument unchanged and runs nothing else."""

from __future__ import annotations

import re
import subprocess

import pytest

from embstab._shell import command, quote
from embstab.errors import DataNotFoundError

HOSTILE = ["$(touch PWNED)", "`touch PWNED`", "a\"b", "it's", "with space", "semi;touch PWNED", "new\nline",
           "tab\there", "back\\slash", "", "-rf", "ünïcode ✓", "\x7f", "'$'\\x41'"]


def _echoed(line: str, cwd) -> list[str]:
    """The arguments bash hands to a program when ``line`` is pasted (printf shows them one per NUL)."""
    done = subprocess.run(["bash", "-c", f"printf '%s\\0' {line}"], cwd=cwd, capture_output=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode().split("\0")[:-1]


@pytest.mark.parametrize("arg", HOSTILE)
def test_a_quoted_argument_reaches_the_program_unchanged_and_runs_nothing(arg, tmp_path):
    assert _echoed(quote(arg), tmp_path) == [arg]
    assert not (tmp_path / "PWNED").exists()
    assert "\n" not in quote(arg)  # a printed command stays one line


def test_a_command_quotes_every_argument(tmp_path):
    line = command("embstab", "kg", "convert", "$(touch PWNED)", "two words")
    assert _echoed(line, tmp_path) == ["embstab", "kg", "convert", "$(touch PWNED)", "two words"]
    assert not (tmp_path / "PWNED").exists()


def test_the_fetch_command_of_a_missing_dataset_is_quoted(tmp_path):
    msg = str(DataNotFoundError("x$(touch PWNED)"))
    line = re.search(r"run `(.*)` first", msg).group(1)
    assert _echoed(line, tmp_path) == ["embstab", "data", "fetch", "x$(touch PWNED)"]
    assert not (tmp_path / "PWNED").exists()


def test_the_download_command_of_a_missing_hub_model_is_quoted(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from embstab.contextual.errors import ModelNotDownloadedError
    from embstab.contextual.hub import downloaded_dir

    monkeypatch.setenv("EMBSTAB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(ModelNotDownloadedError) as info:
        downloaded_dir("org/model@rev;touch PWNED")
    line = re.search(r"run `(.*)` first", str(info.value)).group(1)
    assert _echoed(line, tmp_path)[-2:] == ["--revision", "rev;touch PWNED"]
    assert not (tmp_path / "PWNED").exists()
