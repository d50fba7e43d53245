"""`docquery` subcommands that are more than a few lines (`config show`, `config reference`); cli.py registers them."""
