"""The book's pytest wiring: the engine's plugin, enabled for this project only.

The plugin reads `book.toml` for where the pages, claims and data are. A reader can
implement `pytest_claims_machine_info` here to name a machine or add a fingerprint field
the OS hides (see `verified_book/integration/hookspecs.py`).
"""
pytest_plugins = ["verified_book.integration.pytest.hooks"]
