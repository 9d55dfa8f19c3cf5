"""What a reader sees: figures with their marks and panels, the machines page, the plots."""
