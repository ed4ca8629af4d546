"""Benchmark the study runner: serial in-process baseline vs a Dask LocalCluster, and a resume.

    python benchmarks/bench_study.py [STUDY.yaml] [--workers N]

Runs the study (default: pipelines/quick.yaml) three times in fresh temporary stores and prints a
table of wall times with ratios to the serial baseline:

* ``serial``  - every task in this process, one after another (what a plain loop would do);
* ``dask``    - the same plan on a LocalCluster of worker processes;
* ``resume``  - the dask run's store again: every row is found in the results database, so the
  run only plans and reads (this is what a restart after an interruption costs at the end).

All three must give identical result tables; the script checks that before printing.
"""

from __future__ import annotations

import argparse
import platform
import sys
import tempfile
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    from embstab.study import load_study, run_study  # noqa: PLC0415
    from embstab.study.executors import default_workers  # noqa: PLC0415

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("study", nargs="?", default=str(REPO / "pipelines" / "quick.yaml"))
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    spec = load_study(args.study)
    workers = args.workers or default_workers()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        serial = run_study(spec, Path(tmp) / "serial", scheduler="synchronous", progress=False)
        dask = run_study(spec, Path(tmp) / "dask", scheduler="local", workers=workers, progress=False)
        resume = run_study(spec, Path(tmp) / "dask", scheduler="local", workers=workers, progress=False)
        for run in (dask, resume):
            pd.testing.assert_frame_equal(run.results, serial.results)
        assert resume.n_new == 0 and resume.n_skipped == spec.n_rows()
        for name, run in (("serial (baseline)", serial), (f"dask LocalCluster x{workers}", dask),
                          ("resume (all cached)", resume)):
            rows.append({"run": name, "rows": len(run.results), "new rows": run.n_new, "wall s": run.wall_s,
                         "speed-up vs serial": serial.wall_s / run.wall_s})
    print(f"study {spec.name!r}: {spec.n_rows()} rows; {platform.processor() or platform.machine()}, "
          f"python {platform.python_version()}")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return 0


if __name__ == "__main__":  # LocalCluster worker processes re-import this module
    sys.exit(main())
