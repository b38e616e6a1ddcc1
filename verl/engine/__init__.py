"""The hybrid engine: the actor's weights serve both training and generation.

Step callbacks that see each step's intermediate products land here with the
Python API (see ROADMAP, capability 3).
"""
