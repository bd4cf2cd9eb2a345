"""Run Sapiens models on images, folders, videos or a webcam.

    .venv/bin/python tools/infer.py photo.jpg --checkpoints \
        sapiens_0.3b_goliath_best_goliath_AP_573.pth --out-dir outputs

See ``.venv/bin/python tools/infer.py --help``; the same CLI is
``python -m sapiens_mm``. It runs ``sapiens_mm.__main__`` as the program
(through :mod:`runpy`, as ``python -m`` does), so its arguments are checked
before torch and the OpenMMLab packages load.
"""
import runpy

if __name__ == '__main__':
    runpy.run_module('sapiens_mm', run_name='__main__')
