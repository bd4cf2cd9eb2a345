# Goliath 308-keypoint pose, Sapiens 2b, trained with FSDP +
# activation checkpointing + bf16 autocast (see configs/_base_/fsdp_bf16.py).
#   bash tools/dist_train.sh configs/fsdp/sapiens_2b-210e_goliath-1024x768-pose_fsdp_bf16.py 8
_base_ = [
    '../pose/goliath/sapiens_2b-210e_goliath-1024x768.py',
    '../_base_/fsdp_bf16.py',
]
model = dict(backbone=dict(with_cp=True))
optim_wrapper = dict(type='FSDPAmpOptimWrapper', dtype='bfloat16')
