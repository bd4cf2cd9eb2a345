import sapiens_mm.utils  # noqa: F401  (first: says when sapiens_mm is shadowed)
from .optim_wrappers import *  # noqa: F401,F403
from .optimizers import *  # noqa: F401,F403
from .fileio import *  # noqa: F401,F403
from .fsdp import *  # noqa: F401,F403
from .hooks import *  # noqa: F401,F403
