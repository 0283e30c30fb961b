import sys

from tools.audit.cli import main

sys.exit(main())
