"""Command line of :class:`~sapiens_mm.apis.SapiensInferencer`.

Used by ``tools/infer.py`` and ``python -m sapiens_mm``. Every option maps
to an argument of the inferencer (constructor or call).
"""
import argparse
import json
import os.path as osp
from typing import List, Optional, Sequence

from sapiens_mm.tasks import CLI_TASKS

__all__ = ['build_parser', 'models_from_args', 'main', 'cli']

def build_parser(prog: Optional[str] = None) -> argparse.ArgumentParser:
    """The argument parser of the inference CLI."""
    p = argparse.ArgumentParser(
        prog=prog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            'Run Sapiens pose / body-part segmentation / depth / normal '
            'models (and Sapiens2 pointmap / albedo models) on images, '
            'folders, videos or a webcam.'),
        epilog=(
            'Models: released models by name (--pose sapiens2-pose-0.4b, '
            'or its alias or Hub repository id facebook/sapiens2-pose-0.4b; '
            'downloaded once into the Hugging Face cache: HF_HOME, '
            'HF_TOKEN, HF_HUB_OFFLINE; python tools/download.py --list '
            'lists them), official checkpoints alone (--checkpoints, task '
            'and size recognised from the file name or weights), or per task '
            'a checkpoint (--pose CKPT) and/or a config (--pose-config CFG; '
            'a config alone runs random weights). A Transformers Sapiens2 '
            'checkpoint (folder or model.safetensors) works as a checkpoint. '
            'An exported .onnx / .pt2 '
            'file (tools/deploy/export.py) works as a checkpoint: its task '
            'and config are read from the file; it runs in fp32.\n\n'
            'Boxes are x1, y1, x2, y2 in pixels everywhere: --bboxes takes '
            'them so and the pose JSON writes them so (its bbox_format: '
            'xyxy).\n\n'
            'Outputs in OUT_DIR/<task>/: <name>.json (pose, COCO-like, '
            'boxes xyxy), '
            '<name>.npy (seg labels, depth, normals at the input resolution; '
            'depth/normals are NaN outside the person when seg runs) and '
            '<name>.png; Sapiens2 pointmaps also <name>.npy (H, W, 3) metric '
            'XYZ and <name>.ply (coloured point cloud); for videos per-frame '
            'files in <name>/ and <name>.mp4. Inputs with the same name get '
            '<name>_1, <name>_2...; OUT_DIR/outputs.json maps every input to '
            'its files. Files are written atomically; unreadable or '
            'truncated images are skipped with a message, and a run where '
            'every input fails exits with an error. --export-format adds '
            'OUT_DIR/pose_<format>/<name>.json, --save-mask OUT_DIR/mask/.'
            '\n\n'
            'Example:\n  python -m sapiens_mm photo.jpg --pose '
            'sapiens2-pose-0.4b --seg sapiens2-seg-0.4b --detector rtmdet-m'
            '\n  python tools/infer.py photo.jpg --checkpoints '
            'sapiens_0.3b_goliath_best_goliath_AP_573.pth '
            'sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194.pth '
            '--out-dir outputs\n  python tools/infer.py photo.jpg '
            '--checkpoints sapiens2_0.4b_seg.safetensors '
            'sapiens2_0.4b_pointmap.safetensors --out-dir outputs'))
    p.add_argument(
        'inputs', nargs='+',
        help='image, video or folder paths, or a webcam index (0, webcam, '
        'webcam:1)')
    p.add_argument('--out-dir', default='outputs',
                   help='output folder (default: %(default)s)')
    m = p.add_argument_group('models')
    m.add_argument('--checkpoints', nargs='+', default=[], metavar='CKPT',
                   help='released model names, official Sapiens / '
                   'Sapiens2 checkpoints (sapiens2_<size>_<task>.safetensors)'
                   ' or exported .onnx / .pt2 models; the task (and size) of '
                   'each are recognised')
    for task in CLI_TASKS:
        m.add_argument(f'--{task}', metavar='CKPT', default=None,
                       help=f'{task} model: a released model name or Hub '
                       'repository id, a checkpoint, or an exported .onnx / '
                       '.pt2')
        m.add_argument(f'--{task}-config', metavar='CFG', default=None,
                       help=f'{task} config (default: the shipped config of '
                       f'the recognised --{task} checkpoint)')
    m.add_argument('--trust-pt2', action='store_true',
                   help='trust the .pt2 models given (record their SHA-256 '
                   'in the trust store) although they were not exported '
                   'on this machine. A .pt2 graph is a program that runs '
                   'with your rights: only for files you vouch for; prefer '
                   '.onnx for models from elsewhere (docs/security.md)')
    m.add_argument('--tasks', nargs='+', choices=CLI_TASKS, default=None,
                   help='run only these of the given models\' tasks')
    r = p.add_argument_group('runtime')
    r.add_argument('--device', default=None,
                   help='cpu, cuda or cuda:N (default: cuda if available)')
    r.add_argument('--batch-size', type=int, default=1,
                   help='images / person crops per forward pass '
                   '(default: %(default)s)')
    r.add_argument('--dtype', choices=('fp32', 'bf16', 'fp16'),
                   default='fp32', help='precision (autocast; default: '
                   '%(default)s)')
    r.add_argument('--compile', action='store_true',
                   help='torch.compile the backbones (the first batch pays '
                   'for the compilation)')
    r.add_argument('--max-frames', type=int, default=None,
                   help='read at most this many frames of each video / '
                   'webcam')
    d = p.add_argument_group('person boxes (pose; x1, y1, x2, y2 pixels)')
    d.add_argument('--detector', choices=('hog', 'haar', 'none',
                                          'rtmdet-m'),
                   default='hog', help='person detector, used when '
                   '--det-model is not given: built-in OpenCV (hog, haar; no '
                   'download), or rtmdet-m, the official Sapiens RTMDet-m '
                   'person detector (mmdet; downloaded once) (default: '
                   '%(default)s); when it finds no one the whole image is '
                   'used (see --no-whole-image-fallback)')
    # mmpose's inferencer_demo.py names; the older spellings still work
    d.add_argument('--det-model', '--det-config', dest='det_model',
                   default=None,
                   help='mmdet detector config (e.g. the official RTMDet-m '
                   'person detector)')
    d.add_argument('--det-weights', '--det-checkpoint', dest='det_weights',
                   default=None, help='mmdet detector checkpoint')
    d.add_argument('--det-cat-ids', '--det-cat-id', dest='det_cat_ids',
                   type=int, nargs='+', default=[0],
                   help='person class index (or indices) of the mmdet '
                   'detector (default: 0)')
    d.add_argument('--bbox-thr', type=float, default=0.3,
                   help='detector score threshold (default: %(default)s)')
    d.add_argument('--nms-thr', type=float, default=0.3,
                   help='box NMS IoU threshold (default: %(default)s)')
    d.add_argument('--no-whole-image-fallback', action='store_true',
                   help='when the detector finds no one in an image, give '
                   'it no pose (by default pose runs on the whole image as '
                   'one person, said once per run)')
    d.add_argument('--bboxes', default=None,
                   help='person boxes used for every input instead of the '
                   'detector: a JSON file or string with [[x1, y1, x2, y2'
                   '(, score)], ...] in pixels')
    v = p.add_argument_group('video and webcam')
    v.add_argument('--no-track', action='store_true',
                   help='no track IDs (by default each person keeps an ID '
                   'from frame to frame, written to the JSON as track_id '
                   'and drawn in its own colour)')
    v.add_argument('--no-smooth', action='store_true',
                   help='do not smooth the keypoints (One-Euro filter per '
                   'track; still images are never smoothed)')
    v.add_argument('--det-interval', type=int, default=1, metavar='N',
                   help='run the person detector every N frames; between '
                   'them the boxes come from the previous frame\'s '
                   'keypoints, at least a quarter of the size of each '
                   'person\'s '
                   'last detected box (the detector runs when one '
                   'degenerates; default: %(default)s)')
    v.add_argument('--min-cutoff', type=float, default=4.0,
                   help='One-Euro cutoff at rest, Hz; lower smooths more '
                   '(default: %(default)s)')
    v.add_argument('--beta', type=float, default=4.0,
                   help='One-Euro speed coefficient (per person height per '
                   'second); higher lags less (default: %(default)s)')
    v.add_argument('--d-cutoff', type=float, default=1.0,
                   help='One-Euro cutoff of the speed estimate, Hz '
                   '(default: %(default)s)')
    v.add_argument('--stabilize-dense', action='store_true',
                   help='stabilise depth (aligned frame to frame by a '
                   'least-squares scale and shift, then averaged) and '
                   'normals (averaged, renormalised) over time')
    v.add_argument('--stabilize-alpha', type=float, default=0.5,
                   help='weight of the new frame in that average '
                   '(default: %(default)s)')
    o = p.add_argument_group('outputs')
    o.add_argument('--kpt-thr', type=float, default=0.3,
                   help='keypoints below this score are not drawn '
                   '(default: %(default)s)')
    o.add_argument('--no-draw-bbox', action='store_true',
                   help='do not draw person boxes')
    o.add_argument('--no-save-pred', action='store_true',
                   help='do not write .json / .npy predictions')
    o.add_argument('--no-save-vis', action='store_true',
                   help='do not write .png / .mp4 visualisations')
    o.add_argument('--show', action='store_true',
                   help='show results in windows (q or Esc stops)')
    o.add_argument('--wait-time', type=int, default=1,
                   help='ms to wait per shown frame (default: %(default)s)')
    o.add_argument('--no-progress', action='store_true',
                   help='no progress bar')
    o.add_argument('--skeleton-style', choices=('mmpose', 'openpose'),
                   default='mmpose',
                   help='pose drawing: over the image in the layout\'s '
                   'colours (mmpose) or ControlNet-style on black (openpose) '
                   '(default: %(default)s)')
    o.add_argument('--export-format', nargs='+', default=[],
                   choices=('coco17', 'coco_wholebody', 'openpose'),
                   metavar='FORMAT',
                   help='also write the pose in these keypoint formats: '
                   'coco17, coco_wholebody, openpose (OpenPose JSON, as '
                   'ControlNet tools read) to OUT_DIR/pose_<format>/')
    o.add_argument('--save-mask', action='store_true',
                   help='write the person foreground from seg: OUT_DIR/mask/'
                   '<name>.png (soft mask), <name>_rgba.png (cut-out) and '
                   '<name>_person<i>.png per pose box')
    from sapiens_mm.cli import add_debug_argument
    add_debug_argument(p)
    p.add_argument('--verbose', action='store_true',
                   help='also show the warnings of the OpenMMLab packages '
                   '(deprecations and notes that do not concern the run; '
                   'hidden by default)')
    return p


def models_from_args(args: argparse.Namespace) -> dict:
    """``{task: spec}`` from the model options.

    Raises:
        ValueError: No model, or two models for one task.
    """
    from sapiens_mm.apis.inferencers import task_of_checkpoint
    models = {}
    for task in CLI_TASKS:
        ckpt = getattr(args, task)
        cfg = getattr(args, f'{task}_config')
        if ckpt is not None or cfg is not None:
            models[task] = dict(config=cfg, checkpoint=ckpt)
    for ckpt in args.checkpoints:
        task = task_of_checkpoint(ckpt)
        if task in models:
            given = models[task]['checkpoint'] or models[task]['config']
            raise ValueError(f'Two {task} models given ({ckpt} and '
                             f'{given}); keep one.')
        models[task] = dict(config=None, checkpoint=ckpt)
    if not models:
        raise ValueError('No model given: use --checkpoints CKPT [CKPT ...] '
                         'or --pose/--seg/--depth/--normal/--pointmap/'
                         '--albedo CKPT (and/or '
                         '--<task>-config CFG).')
    missing = [t for t in (args.tasks or ()) if t not in models]
    if missing:
        flags = ' / '.join(f'--{t} CKPT' for t in missing)
        raise ValueError(
            f'--tasks {" ".join(args.tasks)} asks for {", ".join(missing)} '
            f'but no {" / ".join(missing)} model was given: add {flags} '
            '(or the file to --checkpoints), or drop it from --tasks.')
    return models


def _load_bboxes(text: Optional[str]):
    if text is None:
        return None
    if osp.isfile(text):
        try:
            with open(text, encoding='utf-8') as f:
                return json.load(f)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ValueError(
                f'--bboxes file {text} is not valid JSON ({e}); write '
                '[[x1, y1, x2, y2], ...] in pixels.') from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise ValueError(f'--bboxes is neither a file nor JSON: {text!r}.'
                         ) from None


def _build_inferencer(args: argparse.Namespace, models: dict):
    """The inferencer of the parsed options."""
    from sapiens_mm.apis.inferencers import SapiensInferencer
    return SapiensInferencer(
        models=models,
        tasks=args.tasks,
        device=args.device,
        batch_size=args.batch_size,
        dtype=args.dtype,
        compile=args.compile,
        detector=args.detector,
        det_model=args.det_model,
        det_weights=args.det_weights,
        det_cat_ids=args.det_cat_ids,
        bbox_thr=args.bbox_thr,
        nms_thr=args.nms_thr,
        kpt_thr=args.kpt_thr,
        track=not args.no_track,
        smooth=not args.no_smooth,
        det_interval=args.det_interval,
        tracker_cfg=dict(min_cutoff=args.min_cutoff, beta=args.beta,
                         d_cutoff=args.d_cutoff),
        stabilize_dense=args.stabilize_dense,
        stabilize_alpha=args.stabilize_alpha,
        whole_image_fallback=not args.no_whole_image_fallback)


def main(argv: Optional[Sequence[str]] = None,
         prog: Optional[str] = None) -> List[dict]:
    """Parse ``argv``, run the inferencer, report what was written.

    Returns:
        The per-frame results without their arrays (``input``, ``name``,
        ``frame_index``, ``pred_files``, ``vis_files``, ``nonfinite``), also
        written to ``OUT_DIR/outputs.json``.

    Raises:
        RuntimeError: No input could be processed (each was skipped).
    """
    args = build_parser(prog).parse_args(argv)
    from sapiens_mm.cli.common import third_party_warnings
    with third_party_warnings(args.verbose):
        return _run(args)


def _run(args: argparse.Namespace) -> List[dict]:
    """:func:`main` after parsing."""
    if args.show:  # before any model loads: Qt aborts without a display
        from sapiens_mm.apis.inferencers.utils.display import \
            display_problem
        problem = display_problem()
        if problem:
            raise RuntimeError(
                f'--show needs a window, but {problem}. Run without --show: '
                f'the results are written to --out-dir ({args.out_dir}).')
    from mmengine.logging import print_log

    from sapiens_mm.zoo import ConfigMismatchError
    bboxes = _load_bboxes(args.bboxes)
    models = models_from_args(args)
    if args.trust_pt2:
        pt2 = [spec['checkpoint'] for spec in models.values()
               if str(spec['checkpoint'] or '').lower().endswith('.pt2')]
        if not pt2:
            raise ValueError('--trust-pt2 was given, but no .pt2 model.')
        from sapiens_mm.deploy import trust_exported_program
        for path in pt2:
            trust_exported_program(path)
    if not (args.no_save_pred and args.no_save_vis):
        # before any model is built or run
        from sapiens_mm.engine.fileio import ensure_writable_dir
        ensure_writable_dir(args.out_dir, 'output folder (--out-dir)')
    try:
        inferencer = _build_inferencer(args, models)
    except ConfigMismatchError as e:
        raise ValueError(e.explain(
            f'--{e.task}-config CFG --{e.task} {e.checkpoint}')) from None
    inputs = [int(x) if x.isdigit() and not osp.exists(x) else x
              for x in args.inputs]
    summary = []
    for result in inferencer.stream(
            inputs,
            out_dir=args.out_dir,
            bboxes=bboxes,
            no_save_pred=args.no_save_pred,
            no_save_vis=args.no_save_vis,
            show=args.show,
            wait_time=args.wait_time,
            draw_bbox=not args.no_draw_bbox,
            max_frames=args.max_frames,
            show_progress=not args.no_progress,
            skeleton_style=args.skeleton_style,
            export_formats=args.export_format,
            save_mask=args.save_mask):
        summary.append({
            k: result[k]
            for k in ('input', 'name', 'frame_index', 'pred_files',
                      'vis_files', 'nonfinite')
        })
    print_log(
        f'Sapiens {", ".join(inferencer.tasks)}: {len(summary)} image(s) / '
        f'frame(s) processed, {len(inferencer.skipped)} skipped; outputs in '
        f'{args.out_dir}', logger='current')
    if summary and not (args.no_save_pred and args.no_save_vis):
        # which input each output came from (names made unique)
        from sapiens_mm.engine.fileio import atomic_write
        atomic_write(json.dumps(summary, indent=1),
                     osp.join(args.out_dir, 'outputs.json'))
    flagged = [r for r in summary if r['nonfinite']]
    if flagged:
        print_log(f'{len(flagged)} image(s) / frame(s) had non-finite model '
                  'outputs (see "nonfinite" in outputs.json).',
                  logger='current', level=30)
    if not summary:
        reasons = '; '.join(f'{name}: {why}'
                            for name, why in inferencer.skipped[:3])
        raise RuntimeError(
            f'No input could be processed ({len(inferencer.skipped)} '
            f'skipped{": " + reasons if reasons else ""}'
            f'{"; ..." if len(inferencer.skipped) > 3 else ""}).')
    return summary


def cli(argv: Optional[Sequence[str]] = None,
        prog: Optional[str] = None) -> List[dict]:
    """:func:`main` for a command line: a user error ends with one line and
    exit code 1 (the traceback with ``--debug``)."""
    from sapiens_mm.cli import run_cli
    return run_cli(lambda a: main(a, prog), argv, prog)
