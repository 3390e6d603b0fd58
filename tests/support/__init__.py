"""Helpers shared by the tests (fakes, servers, Pilot steps); conftest files keep only fixtures."""
