"""``python -m splitlab``: see :mod:`splitlab.cli`."""
from .cli import main

raise SystemExit(main())
