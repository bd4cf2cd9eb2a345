import sapiens_mm.utils  # noqa: F401  (first: says when sapiens_mm is shadowed)
from .backbones import *  # noqa: F401,F403
from .estimators import *  # noqa: F401,F403
from .heads import *  # noqa: F401,F403
from .losses import *  # noqa: F401,F403
from .selfsup import *  # noqa: F401,F403
