"""The project's tools: ``python tools.py <command> [options]`` runs ``ctclust.tools``."""
from ctclust.tools import main

if __name__ == "__main__":
    main()
