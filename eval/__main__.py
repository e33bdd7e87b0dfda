"""`python -m eval`."""

from eval.cli import main

main()
