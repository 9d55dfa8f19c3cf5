"""What a book's claims are written with: the claim registry and the inputs they read."""
