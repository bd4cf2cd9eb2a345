from .autocast_optim_wrapper import AutocastOptimWrapper

__all__ = ['AutocastOptimWrapper']
