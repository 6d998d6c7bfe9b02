"""streamfold's immutable intermediate representation: types, scalar expressions, relations.

Everything after the binder works on these nodes only. Nodes are frozen dataclasses compared and
hashed by value, so a pass or a test can say ``assert rewritten == Project(...)``.
"""
