"""Run a study from a source checkout: ``python pipelines/run_study.py [STUDY.yaml] [--quick] ...``.

The same as ``embstab study``; it exists so a study can be launched without installing the
console script. The ``__main__`` guard is required: a Dask LocalCluster starts its worker
processes by re-importing the main module.
"""

import sys

from embstab.cli.study import main

if __name__ == "__main__":
    sys.exit(main())
