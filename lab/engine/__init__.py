"""Engines that drive pydantic-graph's native iterator; they know nothing of stores or views."""
