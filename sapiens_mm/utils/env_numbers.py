"""Numbers read from environment variables (limits a user may set)."""
import math
import os

__all__ = ['env_positive_number']


def env_positive_number(name: str, default: float) -> float:
    """The positive, finite number in the environment variable ``name``
    (read now), or ``default`` when it is unset or empty.

    Raises:
        ValueError: It holds something else (one line naming it).
    """
    text = os.environ.get(name, '').strip()
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        value = float('nan')
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f'${name}={text!r} is not a positive number; set it '
                         f'to e.g. {default:g} or unset it.')
    return value
