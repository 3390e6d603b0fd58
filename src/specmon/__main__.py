"""`python -m specmon` runs the same command line as the `specmon` script."""

from specmon.cli.main import main

raise SystemExit(main())
