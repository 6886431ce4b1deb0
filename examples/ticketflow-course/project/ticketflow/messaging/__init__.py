"""Messaging: audit events, the audit consumer, and bounded replay."""
