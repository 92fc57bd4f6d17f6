"""``python -m jsonltape`` runs the command line."""

from .cli import main

main()
