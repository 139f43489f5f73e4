"""bcolz 1.x directories: ``meta/``, ``data/`` and the undo journal."""
