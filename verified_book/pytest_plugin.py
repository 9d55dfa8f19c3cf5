"""The old path of the pytest plugin (`verified_book.integration.pytest.hooks`), which books written on the
engine import."""

import sys

from verified_book.integration.pytest import hooks as _module

sys.modules[__name__] = _module
