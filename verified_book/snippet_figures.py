"""The old path of `verified_book.engine.snippet_figures`, which books written on the engine import."""

import sys

from verified_book.engine import snippet_figures as _module

sys.modules[__name__] = _module
