# The official 200-epoch segmentation schedule stretched to 400 epochs
# (LIP / CIHP).
_base_ = ['./seg_200e.py']
max_epochs = 400
param_scheduler = [
    dict(
        type='LinearLR', start_factor=1e-3, by_epoch=False, begin=0,
        end=400),
    dict(
        type='PolyLR',
        power=1.0,
        eta_min=0.0,
        begin=0,
        end=max_epochs,
        by_epoch=True),
]
train_cfg = dict(max_epochs=max_epochs)
