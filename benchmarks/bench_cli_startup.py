"""How long the command line takes to answer ``--help``, against a bare ``import numpy``.

Each command runs as a fresh ``python`` process (what a person typing it waits for), timed from
start to exit. The commands take turns, round after round, so a burst of load on a shared machine
hits them alike, and the best of ``--repeat`` rounds counts. ``import numpy`` is the floor (embstab
cannot start faster than its one unavoidable dependency); each embstab command is printed with its
ratio to it.

Run: ``python benchmarks/bench_cli_startup.py [--repeat 3]`` from the root of the checkout to time:
``python -m embstab`` finds the package in the current directory first, and the subprocesses
inherit it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c 'import numpy'", ["-c", "import numpy"]),
    ("embstab --help", ["-m", "embstab", "--help"]),
    ("embstab train --help", ["-m", "embstab", "train", "--help"]),
    ("embstab downstream --help", ["-m", "embstab", "downstream", "--help"]),
    ("embstab contextual pretrain --help", ["-m", "embstab", "contextual", "pretrain", "--help"]),
    ("embstab kg train --help", ["-m", "embstab", "kg", "train", "--help"]),
]


def run_once(args: list[str]) -> float:
    """The wall time, in seconds, of one run of ``python ARGS``.

    Parameters
    ----------
    args : list of str
        Arguments after the interpreter.

    Returns
    -------
    float
        Seconds from start to exit.

    Raises
    ------
    RuntimeError
        If the command exits with a non-zero code.
    """
    start = time.perf_counter()
    done = subprocess.run([sys.executable, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"python {' '.join(args)} exited {done.returncode}: {done.stderr.decode()[-500:]}")
    return elapsed


def main() -> None:
    """Time every command of :data:`COMMANDS` and print seconds and the ratio to ``import numpy``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per command; the best counts (default 3)")
    opts = parser.parse_args()
    if hasattr(os, "getloadavg"):
        print("load average (1, 5, 15 min): " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    times = dict.fromkeys((label for label, _ in COMMANDS), float("inf"))
    for _ in range(opts.repeat):  # rounds over all commands: a burst of load hits them alike
        for label, args in COMMANDS:
            times[label] = min(times[label], run_once(args))
    floor = times[COMMANDS[0][0]]
    width = max(len(label) for label in times)
    print(f"{'command':<{width}}  {'best s':>7}  {'x numpy':>7}   (best of {opts.repeat})")
    for label, seconds in times.items():
        print(f"{label:<{width}}  {seconds:7.3f}  {seconds / floor:7.2f}")


if __name__ == "__main__":
    main()
