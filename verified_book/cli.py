"""The old path of `verified_book.integration.cli`, which books written on the engine import."""

import sys

from verified_book.integration import cli as _module

sys.modules[__name__] = _module
