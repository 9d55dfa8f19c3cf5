"""The engine of a verified book: it knows no book, only how to check one.

A book is a folder with a `book.toml` (`verified_book.engine.config`), Markdown pages whose
printed figures are bound to claims (`bindings`, `figures`), and topic modules that
declare those claims (`registry`). `check` computes each claim on each backend and judges
every figure against it; `results` keeps one file per machine; `integration.pytest` and
`mkdocs_plugin` wire the engine into a test run and a site build.
"""
