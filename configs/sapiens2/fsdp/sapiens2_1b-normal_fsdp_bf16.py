# Sapiens2 1b normal, trained with FSDP + activation checkpointing + bf16
# autocast (see configs/_base_/fsdp_bf16.py), as the official recipe trains
# the large models (FSDP2, bf16; the dense estimators checkpoint the
# backbone). Each Sapiens2 block is one FSDP unit.
#   bash tools/dist_train.sh configs/sapiens2/fsdp/sapiens2_1b-normal_fsdp_bf16.py 8
_base_ = [
    '../normal/sapiens2_1b-normal_folder-1024x768.py',
    '../../_base_/fsdp_bf16.py',
]
strategy = dict(
    model_wrapper=dict(
        auto_wrap_policy=dict(class_names=['Sapiens2TransformerBlock'])))
model = dict(backbone=dict(with_cp=True))
optim_wrapper = dict(type='FSDPAmpOptimWrapper', dtype='bfloat16')
