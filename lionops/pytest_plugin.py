"""pytest plugin entry point (``pytest11``) for lionops users.

Record/replay fixtures are added here by the replay feature.
"""
