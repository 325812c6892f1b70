"""``python -m foureyes.cli``: the same as the ``foureyes`` command."""

from foureyes.cli.main import main

main()
