"""This book's content: its claims by topic (`claims.topics`), its stated inputs
(`claims/data/`), the measurements that are its own (`claims.probes`) and its charts
(`claims.plots`). The engine that checks them is `verified_book`; `book.toml` says where
each part is.
"""
