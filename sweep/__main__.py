from sweep.cli import entry

entry()
