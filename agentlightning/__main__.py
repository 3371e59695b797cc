import sys

from agentlightning.cli import main

sys.exit(main())
