"""The commands of ``python tools.py``, one module each (``ctclust.tools.COMMANDS``): its argparse parser and
``main(argv)``, which parses and then calls the library (``datamodules``, ``evaluation``, ``launching``), where the
work is. ``common`` holds the words every command shares. Each module also runs as ``python -m
ctclust.commands.<name>``."""
