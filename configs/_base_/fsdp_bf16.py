# Train a large Sapiens model with FSDP: mmengine's FlexibleRunner +
# FSDPStrategy shard parameters, gradients and optimizer states over the
# GPUs; each encoder layer is one FSDP unit (gathered one at a time).
# A leaf config lists a task config first and this file second, then turns on
# activation checkpointing and bf16 autocast (those keys exist in the task
# config, and mmengine forbids the same key in two _base_ files):
#
#   _base_ = ['../seg/goliath/sapiens_2b-200e_goliath-1024x768.py',
#             '../_base_/fsdp_bf16.py']
#   model = dict(backbone=dict(with_cp=True))
#   optim_wrapper = dict(type='FSDPAmpOptimWrapper', dtype='bfloat16')
#
# FSDPAmpOptimWrapper is mmengine's AmpOptimWrapper with gradient clipping by
# the norm of the whole (sharded) gradient; tools/train.py also swaps it in
# for a plain OptimWrapper / AmpOptimWrapper in an FSDP config.
# tools/train.py builds a FlexibleRunner because runner_type is set.
# Checkpoints are full (unsharded) state dicts gathered on rank 0, so they
# load anywhere (tools/test.py, sapiens_mm.checkpoint.load_checkpoint).
runner_type = 'FlexibleRunner'
strategy = dict(
    type='FSDPStrategy',
    model_wrapper=dict(
        auto_wrap_policy=dict(
            type='class_name_auto_wrap_policy',
            class_names=['TransformerEncoderLayer']),
        sharding_strategy='FULL_SHARD',
        use_orig_params=True),  # parameter names kept: layer-wise lr decay
    state_dict_cfg='full')
