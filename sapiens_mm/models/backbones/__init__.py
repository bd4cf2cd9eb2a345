from .sapiens_vision_transformer import SapiensVisionTransformer

__all__ = ['SapiensVisionTransformer']
