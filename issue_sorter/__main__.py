import sys

from issue_sorter.cli import main

sys.exit(main())
