from .hooks import *  # noqa: F401,F403
from .optim_wrappers import *  # noqa: F401,F403
from .optimizers import *  # noqa: F401,F403
