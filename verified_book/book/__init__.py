"""Reading a book: its pages' bound figures and unbound numbers, printed numbers and their precision, snippet output
blocks."""
