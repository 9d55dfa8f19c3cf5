"""The old path of `verified_book.integration.pytest_plugin`, which books written on the engine import."""

import sys

from verified_book.integration import pytest_plugin as _module

sys.modules[__name__] = _module
