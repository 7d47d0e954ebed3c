"""``python -m selectgraph``: the command line, as the ``selectgraph`` script runs it."""

from selectgraph.cli import main

if __name__ == "__main__":
    main()
