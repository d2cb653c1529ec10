"""Sort (multi-operand) and cumulative-reduction primitives."""

__all__: list[str] = []
