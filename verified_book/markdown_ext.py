"""The old path of `verified_book.integration.markdown_ext`, which books written on the engine import."""

import sys

from verified_book.integration import markdown_ext as _module

sys.modules[__name__] = _module
