# Official depth / normal schedule: the segmentation one (AdamW 5e-4, betas
# (0.9, 0.999), weight decay 0.1, layer-wise lr decay 0.85, grad clip 1.0,
# 400-iteration linear warm-up, poly(1.0) decay to 0 over 200 epochs).
# Validation every 10 epochs (the official configs have no evaluator).
_base_ = ['./seg_200e.py']
train_cfg = dict(val_interval=10)
