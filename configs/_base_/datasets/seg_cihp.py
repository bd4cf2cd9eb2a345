# CIHP human parsing (semantic part masks), 20 classes, same pipelines as LIP.
# data_root: the extracted instance-level_human_parsing folder
# ({Training,Validation}/{Images,Category_ids}).
_base_ = ['./seg_lip.py']
dataset_type = 'CIHPBodyPartDataset'
data_root = 'data/CIHP/instance-level_human_parsing'
train_dataloader = dict(
    dataset=dict(type=dataset_type, data_root=data_root))
val_dataloader = dict(
    dataset=dict(type=dataset_type, data_root=data_root))
test_dataloader = val_dataloader
