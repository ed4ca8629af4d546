import sys

from embstab.cli import main

sys.exit(main())
