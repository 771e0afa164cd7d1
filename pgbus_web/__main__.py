"""``python -m pgbus_web``: the ``pgbus-web`` command."""

from .cli import main

if __name__ == "__main__":
    main()
