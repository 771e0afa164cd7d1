"""What the tests share: helpers imported as ``from support.<module> import
...`` and the fixture plugins conftest.py registers (docs/testing.md). No
test module imports another test module."""
