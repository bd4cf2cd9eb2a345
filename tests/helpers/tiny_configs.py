"""The shipped tiny-arch configs of the four tasks, shared by the tests that
build whole task models (inferencer, export)."""
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TINY = {
    'pose': ROOT / 'configs/pose/goliath/sapiens_tiny-210e_goliath-256x192.py',
    'seg': ROOT / 'configs/seg/goliath/sapiens_tiny-200e_goliath-256x192.py',
    'depth': ROOT / 'configs/depth/sapiens_tiny-200e_depth_folder-256x192.py',
    'normal':
    ROOT / 'configs/normal/sapiens_tiny-200e_normal_folder-256x192.py',
}
