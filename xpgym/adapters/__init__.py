"""Adapters from xpgym episodes to RL trainers. Each module imports its trainer lazily."""
