"""This book's pytest wiring: the engine's plugin, which reads book.toml for everything else."""

pytest_plugins = ["verified_book.integration.pytest.hooks"]
