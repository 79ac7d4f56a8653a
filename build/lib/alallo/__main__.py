"""``python -m alallo`` is the ``alallo`` command."""

from alallo.cli import main

main()
