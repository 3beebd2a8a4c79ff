"""Command-line interface (click); one module per command group."""
