"""The single controller: one driver program calls methods on groups of role workers.

``base`` holds what any backend shares (the ``@register`` decorator with its dispatch/collect modes, the ``Worker``
base class); ``ray`` runs worker groups as Ray actors placed by resource pools. Importing this package does not
import Ray.
"""
