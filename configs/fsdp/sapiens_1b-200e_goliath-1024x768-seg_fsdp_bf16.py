# Goliath body-part segmentation, Sapiens 1b, trained with FSDP +
# activation checkpointing + bf16 autocast (see configs/_base_/fsdp_bf16.py).
#   bash tools/dist_train.sh configs/fsdp/sapiens_1b-200e_goliath-1024x768-seg_fsdp_bf16.py 8
_base_ = [
    '../seg/goliath/sapiens_1b-200e_goliath-1024x768.py',
    '../_base_/fsdp_bf16.py',
]
model = dict(backbone=dict(with_cp=True))
optim_wrapper = dict(type='FSDPAmpOptimWrapper', dtype='bfloat16')
