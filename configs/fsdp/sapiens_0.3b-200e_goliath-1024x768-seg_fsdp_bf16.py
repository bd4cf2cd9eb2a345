# Goliath body-part segmentation, Sapiens 0.3b, trained with FSDP +
# activation checkpointing + bf16 autocast (see configs/_base_/fsdp_bf16.py).
# 0.3b fits one GPU without FSDP; this config is the same recipe as the 1b /
# 2b ones, for tools/analysis/gpu_train_check.py's rows at both sizes.
#   bash tools/dist_train.sh configs/fsdp/sapiens_0.3b-200e_goliath-1024x768-seg_fsdp_bf16.py 8
_base_ = [
    '../seg/goliath/sapiens_0.3b-200e_goliath-1024x768.py',
    '../_base_/fsdp_bf16.py',
]
model = dict(backbone=dict(with_cp=True))
optim_wrapper = dict(type='FSDPAmpOptimWrapper', dtype='bfloat16')
