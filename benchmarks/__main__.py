"""`python -m benchmarks` (`make bench`): see `python -m benchmarks --help`."""

import sys

from ._run import main

if __name__ == "__main__":
    sys.exit(main())
