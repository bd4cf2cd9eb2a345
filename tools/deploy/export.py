"""Export a Sapiens task model to ONNX and / or torch.export (.pt2).

    python tools/deploy/export.py --config CONFIG --checkpoint CKPT \
        --format both --out-dir exported

See ``python tools/deploy/export.py --help`` and the README, "Deployment".
"""
from sapiens_mm.cli.deploy import cli

if __name__ == '__main__':
    cli(prog='tools/deploy/export.py')
