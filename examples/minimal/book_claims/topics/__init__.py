"""The minimal book's topics: every module here declares claims, loaded by the engine from book.toml."""
