"""The old path of `verified_book.authoring.registry`, which books written on the engine import."""

import sys

from verified_book.authoring import registry as _module

sys.modules[__name__] = _module
