"""The pytest plugin of a book, as modules: `hooks` (the plugin a book's conftest.py names), `options`, `items`,
`report` and `stash`. Each imports the engine, which knows nothing of pytest."""
