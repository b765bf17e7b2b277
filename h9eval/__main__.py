import sys

from h9eval.cli import main

sys.exit(main())
