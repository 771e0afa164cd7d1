"""pgbus-web: an operator dashboard for pgbus workflows on PostgreSQL."""

__version__ = "0.1.0"
