"""``python -m selectgraph``: the command line, as the ``selectgraph`` script runs it."""

from selectgraph.cli import main

main()
