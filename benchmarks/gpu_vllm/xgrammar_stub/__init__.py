# Stub: vLLM 0.26.0 imports xgrammar at module level; structured output is not used in these runs.
__version__ = "0.0.0-stub"


class _Any:
    def __init__(self, *a, **k):
        pass

    def __call__(self, *a, **k):
        return _Any()

    def __getattr__(self, n):
        return _Any()

    def __class_getitem__(cls, item):
        return cls


def __getattr__(name):
    return type(name, (_Any,), {})
