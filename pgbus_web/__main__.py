"""``python -m pgbus_web``: the ``pgbus-web`` command."""

from .launch import main

if __name__ == "__main__":
    main()
