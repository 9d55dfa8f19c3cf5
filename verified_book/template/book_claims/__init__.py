"""The minimal book's content: its claims (topics) and stated inputs (data)."""
