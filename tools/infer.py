"""Run Sapiens models on images, folders, videos or a webcam.

    python tools/infer.py photo.jpg --checkpoints \
        sapiens_0.3b_goliath_best_goliath_AP_573.pth --out-dir outputs

See ``python tools/infer.py --help``; the same CLI is ``python -m sapiens_mm``.
"""
from sapiens_mm.cli.infer import cli

if __name__ == '__main__':
    cli(prog='tools/infer.py')
