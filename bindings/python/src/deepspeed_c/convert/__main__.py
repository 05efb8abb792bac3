"""python -m deepspeed_c.convert: see cli.main."""
import sys

from .cli import main

sys.exit(main())
