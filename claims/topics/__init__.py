"""The book's claims, one module per topic; importing a module registers its claims."""
