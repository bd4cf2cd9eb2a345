from .sapiens2_vision_transformer import Sapiens2VisionTransformer
from .sapiens_vision_transformer import SapiensVisionTransformer

__all__ = ['SapiensVisionTransformer', 'Sapiens2VisionTransformer']
