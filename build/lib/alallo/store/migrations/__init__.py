"""Alembic's scripts of the store's schema (``env.py``, ``versions/``), shipped with the package.

The code that runs them is :mod:`alallo.store._migrations`.
"""
