import sys

from embstab.cli import main

# guarded: Dask's worker processes re-import the main module, which must not run the CLI again
if __name__ == "__main__":
    sys.exit(main())
