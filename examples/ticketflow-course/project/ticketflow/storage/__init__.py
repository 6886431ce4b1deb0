"""Durable storage: the SQL audit projection."""
