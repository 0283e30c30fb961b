import sys

from messages.generator import main

sys.exit(main())
