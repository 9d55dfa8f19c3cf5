"""The verified book's engine and its claims.

`claims.registry` declares claims, `claims.topics` holds them by topic, `claims.bindings`
reads the book, `claims.check` judges figures, `claims.results` stores what each machine
found, and `claims.pytest_plugin` and `claims.mkdocs_plugin` wire them into pytest and MkDocs.
"""
