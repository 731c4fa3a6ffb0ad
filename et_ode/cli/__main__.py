"""`python -m et_ode.cli ...`: the `et-ode` command, for environments without the console
script on PATH (a `pip install --target` folder, a frozen interpreter)."""

import sys

from ._main import main

if __name__ == "__main__":
    sys.exit(main())
