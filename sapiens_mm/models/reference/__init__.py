"""Plain-PyTorch reference implementations, written independently of the
registered modules, to check them and to time them against."""
from .sapiens2_reference import Sapiens2Reference, sapiens2_reference_forward

__all__ = ['Sapiens2Reference', 'sapiens2_reference_forward']
