"""Process isolation: the worker processes that run plugin code (explainers, models, encoders,
datasets, metrics), their sandbox entry, the zygote, the scheduling core, the wire formats of
their replies, and the Ray relay. Internal to the runner: outside code reaches it through
:mod:`xaibench.runner`."""
