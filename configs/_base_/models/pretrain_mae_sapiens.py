# MAE pretraining model: mmpretrain's MAE with the Sapiens encoder, official
# Sapiens settings. 1024x1024 input, 16 px patches (64x64 = 4096 patches),
# 75% of them masked, fixed 2D sin-cos position embeddings (encoder and
# decoder), decoder 512 wide / 8 deep / 16 heads, L2 loss on per-patch
# normalised pixels of the masked patches only.
# The leaf config sets the encoder arch and the decoder input width from the
# size _base_ (configs/_base_/models/sapiens_*.py).
model = dict(
    type='mmpretrain.MAE',
    data_preprocessor=dict(
        type='mmpretrain.SelfSupDataPreprocessor',
        mean=[123.675, 116.28, 103.53],
        std=[58.395, 57.12, 57.375],
        to_rgb=True),
    backbone=dict(
        type='mmpretrain.SapiensMAEViT',
        arch='sapiens_0.3b',  # set by the leaf config
        img_size=1024,
        patch_size=16,
        mask_ratio=0.75,
        final_norm=True),
    neck=dict(
        type='mmpretrain.MAEPretrainDecoder',
        num_patches=4096,  # (img_size / patch_size) ** 2
        patch_size=16,
        in_chans=3,
        embed_dim=1024,  # encoder width, set by the leaf config
        decoder_embed_dim=512,
        decoder_depth=8,
        decoder_num_heads=16,
        mlp_ratio=4.),
    head=dict(
        type='mmpretrain.MAEPretrainHead',
        norm_pix=True,
        patch_size=16,
        loss=dict(type='mmpretrain.PixelReconstructionLoss', criterion='L2')),
    init_cfg=[
        dict(type='Xavier', layer='Linear', distribution='uniform'),
        dict(type='Constant', layer='LayerNorm', val=1.0, bias=0.0)
    ])
