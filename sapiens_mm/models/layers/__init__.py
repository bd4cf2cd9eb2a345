"""Building blocks of the backbones (one module per file)."""
from .grouped_query_attention import GroupedQueryAttention
from .patch_conv2d import PatchConv2d
from .rms_norm import RMSNorm
from .rope_position_embedding import ROPE_DTYPES, RopePositionEmbedding, apply_rope
from .sapiens2_transformer_block import Sapiens2TransformerBlock
from .sapiens2_window_tokenizer import Sapiens2WindowTokenizer

__all__ = [
    'GroupedQueryAttention', 'PatchConv2d', 'RMSNorm', 'ROPE_DTYPES',
    'RopePositionEmbedding', 'apply_rope', 'Sapiens2TransformerBlock',
    'Sapiens2WindowTokenizer'
]
