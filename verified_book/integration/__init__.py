"""The engine's doors: the pytest plugin, the MkDocs plugin and Markdown extension, the command line, xdist scheduling,
the live preview."""
